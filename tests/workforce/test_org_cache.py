"""The per-process cache of Organization rows (``workforce.org_cache``): the organization
read every HTTP call without authentication makes is sent once, then not while the row
is cached; only committed rows are cached; a delete here evicts at once, another
process's within ``TTL_SECONDS``, and a stale row's foreign-key failure clears it."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from tests.conftest import MEMBER
from workforce import org_cache
from workforce.flows import Action, FlowKind, registry
from workforce.models import DEFAULT_ORG_ID, Organization, Session
from workforce.sessions import ensure_organization

pytestmark = pytest.mark.django_db(transaction=True)  # rows committed, as in a served call

ORG_TABLE = '"workforce_organization"'


def _org_statements(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if ORG_TABLE in q["sql"]]


def _ensure(org_id: str) -> tuple[Organization, list[str], int]:
    """``ensure_organization(org_id)``, the organization statements it sent, and how many
    statements in all."""
    with CaptureQueriesContext(connection) as captured:
        org = ensure_organization(org_id)
    return org, _org_statements(captured), len(captured.captured_queries)


def test_a_second_ensure_outside_a_transaction_sends_nothing():
    stored = Organization.objects.create(id="acme", name="Acme")
    first, first_sql, _ = _ensure("acme")
    second, second_sql, second_count = _ensure("acme")
    assert len(first_sql) == 1 and first_sql[0].startswith('SELECT "id", "name", "created_at" FROM "workforce_organization"')
    assert (second_sql, second_count) == ([], 0)
    assert (second.pk, second.name, second.created_at) == ("acme", "Acme", stored.created_at)
    assert second is not first and second._state.adding is False  # a fresh instance per call: callers may change theirs


def test_a_second_http_call_sends_no_organization_read(client):
    def items() -> tuple[int, list[str]]:
        with CaptureQueriesContext(connection) as captured:
            answer = client.get(f"/api/sessions/eng.nowhere/items?userId={MEMBER}")
        assert answer.status_code == 404 and answer.json()["error"]["reason"] == "session-not-found"
        return len(captured.captured_queries), _org_statements(captured)

    Organization.objects.create(id=DEFAULT_ORG_ID)
    first_count, first_sql = items()
    second_count, second_sql = items()
    assert len(first_sql) == 1 and first_sql[0].startswith("SELECT")
    assert second_sql == [] and second_count == first_count - 1


def test_an_organization_created_outside_a_transaction_is_cached():
    created, created_sql, _ = _ensure("fresh")
    assert any(sql.startswith("INSERT") for sql in created_sql)
    assert _ensure("fresh")[1:] == ([], 0)
    assert Organization.objects.filter(id="fresh").count() == 1


def test_a_read_inside_a_transaction_is_cached_when_it_commits():
    Organization.objects.create(id="acme")
    with transaction.atomic():
        ensure_organization("acme")
        assert org_cache.cached_organization("acme") is None  # not before the commit
        assert len(_ensure("acme")[1]) == 1
    assert org_cache.cached_organization("acme").pk == "acme"
    assert _ensure("acme")[1:] == ([], 0)


def test_a_row_created_in_a_transaction_that_rolls_back_is_not_cached():
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            assert ensure_organization("ghost").pk == "ghost"
            raise RuntimeError("roll back")
    assert org_cache.cached_organization("ghost") is None
    assert Organization.objects.filter(id="ghost").count() == 0
    _, sql, _ = _ensure("ghost")  # read, then created again, for real this time
    assert sql[0].startswith("SELECT") and any(s.startswith("INSERT") for s in sql)
    assert Organization.objects.filter(id="ghost").count() == 1


def test_a_row_created_in_a_rolled_back_savepoint_is_not_cached():
    with transaction.atomic():
        with pytest.raises(RuntimeError):
            with transaction.atomic():
                ensure_organization("ghost")
                raise RuntimeError("roll back the savepoint")
    assert org_cache.cached_organization("ghost") is None
    assert Organization.objects.filter(id="ghost").count() == 0


def test_a_delete_evicts_and_the_next_call_reads_and_creates_again():
    ensure_organization("acme")
    assert org_cache.cached_organization("acme") is not None
    Organization.objects.get(id="acme").delete()
    assert org_cache.cached_organization("acme") is None
    _, sql, _ = _ensure("acme")
    assert sql[0].startswith("SELECT") and any(s.startswith("INSERT") for s in sql)
    assert Organization.objects.filter(id="acme").count() == 1
    assert _ensure("acme")[1:] == ([], 0)


def test_a_read_that_raced_a_delete_is_not_cached():
    Organization.objects.create(id="acme")
    since = org_cache.generation()
    read = Organization.objects.get(id="acme")
    Organization.objects.filter(id="acme").delete()  # between the read and its fill
    org_cache.remember(read, since)
    assert org_cache.cached_organization("acme") is None


def test_a_delete_inside_a_transaction_evicts_again_when_it_commits():
    ensure_organization("acme")
    with transaction.atomic():
        Organization.objects.filter(id="acme").delete()
        assert org_cache.cached_organization("acme") is None
        # Another thread still sees the row until the commit, and may cache it meanwhile.
        org_cache.remember(Organization(id="acme"), org_cache.generation())
    assert org_cache.cached_organization("acme") is None


def test_an_edit_evicts():
    ensure_organization("acme")
    Organization.objects.filter(id="acme").update(name="renamed by hand")  # no signal: still cached
    assert org_cache.cached_organization("acme").name == ""
    org = Organization.objects.get(id="acme")
    org.name = "Acme"
    org.save()
    assert org_cache.cached_organization("acme") is None
    assert ensure_organization("acme").name == "Acme"


def test_another_process_s_delete_is_seen_after_the_ttl(monkeypatch):
    ensure_organization("acme")
    with connection.cursor() as cursor:  # as another node would: no signal here
        cursor.execute(f"DELETE FROM {ORG_TABLE} WHERE id = %s", ["acme"])
    now = org_cache.time.monotonic()
    monkeypatch.setattr(org_cache.time, "monotonic", lambda: now + org_cache.TTL_SECONDS - 0.5)
    assert _ensure("acme")[1:] == ([], 0)  # stale, within its TTL
    monkeypatch.setattr(org_cache.time, "monotonic", lambda: now + org_cache.TTL_SECONDS + 0.5)
    _, sql, _ = _ensure("acme")
    assert sql[0].startswith("SELECT") and any(s.startswith("INSERT") for s in sql)
    assert Organization.objects.filter(id="acme").count() == 1


@pytest.fixture
def probe_kind():
    """A kind whose one action runs on a session a client's call creates."""
    registry.register(FlowKind("probe", actions={"sound": Action("sound", lambda ctx, data: {"ok": True})}))
    yield "/api/flows/probe/probe.one/actions/sound"
    registry.unregister("probe")


def test_a_stale_organization_s_foreign_key_failure_clears_the_cache(client, probe_kind):
    body = {"userId": MEMBER, "input": {}}
    assert client.post(probe_kind, data=body, content_type="application/json").status_code == 202
    Session.objects.all().delete()
    with connection.cursor() as cursor:  # another node deletes the organization: no signal here
        cursor.execute(f"DELETE FROM {ORG_TABLE} WHERE id = %s", [DEFAULT_ORG_ID])
    assert org_cache.cached_organization(DEFAULT_ORG_ID) is not None
    with pytest.raises(IntegrityError):  # the new session's foreign key names the gone row
        client.post(probe_kind, data=body, content_type="application/json")
    assert org_cache.cached_organization(DEFAULT_ORG_ID) is None
    again = client.post(probe_kind, data=body, content_type="application/json")
    assert again.status_code == 202 and again.json()["status"] == "completed"
    assert Organization.objects.filter(id=DEFAULT_ORG_ID).count() == 1


def test_only_an_integrity_error_clears_the_cache():
    ensure_organization("acme")
    try:
        raise ValueError("a bug")
    except ValueError:
        org_cache.on_request_exception(None)
    assert org_cache.cached_organization("acme") is not None
    try:
        raise IntegrityError("FOREIGN KEY constraint failed")
    except IntegrityError:
        org_cache.on_request_exception(None)
    assert org_cache.cached_organization("acme") is None


def test_a_forked_child_starts_with_nothing_cached():
    ensure_organization("acme")
    org_cache._after_fork()  # what os.register_at_fork runs in the child
    assert org_cache.cached_organization("acme") is None
    assert len(_ensure("acme")[1]) == 1
