"""``workforce.rows``: the hot paths' reads and writes give the instances the ORM gives
(every field, converted the same way), on both databases."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.test.utils import CaptureQueriesContext

from workforce import rows
from workforce.models import Item, Request, Session

pytestmark = pytest.mark.django_db


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def test_a_row_read_is_the_row_the_orm_reads(org):
    made = Session.objects.create(organization=org, session_id="a.b", flow_kind="mailbox", user_id="u", state={"members": ["x"]})
    found = rows.select_one(Session, '"organization_id" = %s AND "session_id" = %s', [org.pk, "a.b"], for_update=True)
    assert _fields(found) == _fields(Session.objects.get(pk=made.pk))
    assert found.state == {"members": ["x"]} and found.created_at.tzinfo is not None
    assert rows.select_one(Session, '"session_id" = %s', ["nobody"]) is None


def test_an_insert_and_an_update_store_what_the_orm_stores(org):
    session = Session.objects.create(organization=org, session_id="a.b", flow_kind="mailbox", user_id="u")
    request = Request(organization=org, session=session, action="post", user_id="u", input={"body": "é"}, status="running")
    rows.insert(request)
    assert request.pk is not None and not request._state.adding
    assert _fields(Request.objects.get(pk=request.pk)) == _fields(request)
    request.status, request.output = Request.Status.COMPLETED, {"ok": [1, None, True]}
    assert rows.update(request, ("status", "output")) == 1
    stored = Request.objects.get(pk=request.pk)
    assert (stored.status, stored.output) == ("completed", {"ok": [1, None, True]})
    twin = Request(organization=org, session=session, action="post", user_id="u", request_id=request.request_id)
    with pytest.raises(IntegrityError), transaction.atomic():
        rows.insert(twin)  # request_id is unique


@pytest.mark.postgres
def test_one_statement_reads_a_row_and_inserts_its_child(org):
    session = Session.objects.create(organization=org, session_id="a.b", flow_kind="mailbox", user_id="u", state={"k": 1})
    request = Request(organization=org, action="post", user_id="u", input={}, status="running")
    found = rows.select_one_and_insert(
        Session, '"organization_id" = %s AND "session_id" = %s', [org.pk, "a.b"], request, "session_id", for_update=True
    )
    assert _fields(found) == _fields(Session.objects.get(pk=session.pk))
    assert Request.objects.get(pk=request.pk).session_id == session.pk
    missing = Request(organization=org, action="post", user_id="u", input={}, status="running")
    assert rows.select_one_and_insert(Session, '"session_id" = %s', ["nobody"], missing, "session_id") is None
    assert missing.pk is None and Request.objects.count() == 1


def test_many_inserts_store_what_bulk_create_stores_in_order_and_in_batches(org, monkeypatch):
    from django.db import connection

    session = Session.objects.create(organization=org, session_id="a.b", flow_kind="mailbox", user_id="u")

    def made(n: int, tag: str) -> list[Request]:
        return [
            Request(organization=org, session=session, action="post", user_id="u", input={"n": i, "t": tag}, status="running")
            for i in range(n)
        ]

    ours, theirs = made(5, "ours"), made(5, "orm")
    monkeypatch.setattr(connection.ops, "bulk_batch_size", lambda fields, objs: 2)  # 3 statements: 2, 2, 1
    with CaptureQueriesContext(connection) as sent:
        rows.insert_many(ours)
    assert len(sent.captured_queries) == 3
    Request.objects.bulk_create(theirs)
    assert all(r.pk is not None and not r._state.adding for r in ours)
    assert [r.pk for r in ours] == sorted(r.pk for r in ours)
    for mine, orm in zip(ours, theirs, strict=True):
        stored = Request.objects.get(pk=mine.pk)
        assert stored.input == mine.input and _fields(stored) == _fields(mine)
        expected = {k: v for k, v in _fields(Request.objects.get(pk=orm.pk)).items() if k not in {"id", "request_id", "input"}}
        assert {k: v for k, v in _fields(stored).items() if k in expected and "_at" not in k} == {
            k: v for k, v in expected.items() if "_at" not in k
        }
    with CaptureQueriesContext(connection) as sent:
        rows.insert_many([])
    assert sent.captured_queries == []
    twin = made(2, "twin")
    twin[1].request_id = ours[0].request_id
    with pytest.raises(IntegrityError), transaction.atomic():
        rows.insert_many(twin)  # one statement: neither row stays
    assert not Request.objects.filter(input__t="twin").exists()


def _sent(value):
    # psycopg's JSON wrapper (PostgreSQL's adapt_json_value) has no equality of its own.
    return ("json", value.obj) if type(value).__name__ in ("Json", "Jsonb") else value


def test_a_plan_sends_what_each_fields_own_chain_sends(org):
    """``WritePlan`` skips a field's ``pre_save``/``get_db_prep_save`` only where they
    change nothing: every parameter is the one the ORM's chain gives, a value the fast
    path does not take (a lazy string, a naive datetime) included."""
    import warnings
    from datetime import datetime, timedelta

    from django.db import connection
    from django.utils import timezone
    from django.utils.functional import lazy

    session = Session.objects.create(organization=org, session_id="a.b", flow_kind="mailbox", user_id="u")
    lazy_str = lazy(lambda: "post", str)
    plan = rows.insert_parts(Request, connection.vendor)[2]
    created = plan.attnames.index("created_at")
    for request in (
        Request(organization=org, session=session, action="post", user_id="u", input={"body": "é", "n": [1, None]}),
        Request(organization=org, session=session, action=lazy_str(), user_id="u", input=[1, "x"], started_at=timezone.now()),
        Request(organization=org, session=session, action="post", user_id="u", input="x", error={"r": 1}),
        Request(organization=org, session=session, action="post", user_id="u", started_at=datetime(2026, 1, 2, 3, 4)),
        Request(organization=org, session=session, action="post", user_id="u", finished_at=timezone.now() + timedelta(1)),
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a naive datetime: the chain's own warning, both ways
            sent = [_sent(v) for v in rows.insert_params(request, plan, connection)]
            chain = [_sent(f.get_db_prep_save(f.pre_save(request, True), connection)) for f in plan.fields]
        # auto_now_add: the plan sets the attribute, as pre_save does, and sends it.
        assert sent[created] == connection.ops.adapt_datetimefield_value(request.created_at) is not None
        assert sent[:created] + sent[created + 1 :] == chain[:created] + chain[created + 1 :]


def test_a_row_from_its_values_is_the_row_an_instance_writes(org):
    """``WritePlan.values`` (no instance: a post's item) fills a field not given with its
    default and ``auto_now_add`` with now, and stores what ``save`` stores."""
    from django.db import connection

    session = Session.objects.create(organization=org, session_id="a.b", flow_kind="mailbox", user_id="u")
    plan = rows.insert_parts(Item, connection.vendor)[2]
    values = {"session_id": session.pk, "seq": 1, "component": "mailbox-post", "data": {"id": "l1", "body": "é"}}
    with connection.cursor() as cursor:
        cursor.execute(rows.insert_sql(Item, connection.vendor), rows.row_params(plan, values, connection))
        (pk,) = cursor.fetchone()
    ours = Item.objects.get(pk=pk)
    theirs = Item.objects.create(session=session, seq=2, component="mailbox-post", data={"id": "l1", "body": "é"})
    assert ours.type == "component" and ours.request_id is None and ours.created_at.tzinfo is not None
    same = {"id", "seq", "created_at"}
    assert {k: v for k, v in _fields(ours).items() if k not in same} == {
        k: v for k, v in _fields(theirs).items() if k not in same
    }


def test_a_deferred_field_is_read_through_its_descriptor(org):
    session = Session.objects.create(organization=org, session_id="a.b", flow_kind="mailbox", user_id="u")
    made = Request.objects.create(organization=org, session=session, action="post", user_id="u", output={"keep": 1})
    partial = Request.objects.only("id", "status").get(pk=made.pk)
    partial.status = Request.Status.COMPLETED
    assert rows.update(partial, ("status", "output")) == 1  # output is loaded, not sent as missing
    stored = Request.objects.get(pk=made.pk)
    assert (stored.status, stored.output) == ("completed", {"keep": 1})


def test_a_field_whose_pre_save_needs_its_instance_is_refused_a_row_of_values():
    from django.db import connection, models
    from django.test.utils import isolate_apps

    with isolate_apps("workforce"):

        class Dated(models.Model):
            day = models.DateField(auto_now=True)
            note = models.CharField(max_length=10, default="n")

            class Meta:
                app_label = "workforce"

            def __str__(self) -> str:
                return str(self.day)

        plan = rows.WritePlan(Dated, [Dated._meta.get_field("day"), Dated._meta.get_field("note")], add=True)
        with pytest.raises(TypeError, match="day"):
            plan.values({"note": "x"}, connection)
        dated = Dated()
        sent = plan.params(dated, connection)
        assert dated.day is not None and sent == [connection.ops.adapt_datefield_value(dated.day), "n"]
