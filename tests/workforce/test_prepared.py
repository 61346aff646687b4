"""Querysets compiled once (``workforce.prepared``) answer what the queryset answers, and
the guarded item (``do_update_then_emit_item``) is written only when its UPDATE was."""

from __future__ import annotations

import pytest
from django.db.models import Count

from workforce.models import Item, Request, Session
from workforce.prepared import Prepared, update_rows, update_statement
from workforce.sessions import do_record_request, do_update_then_emit_item, emit_item


@pytest.fixture
def session(org):
    return Session.objects.create(organization=org, session_id="prep.one", flow_kind="mailbox", user_id="u_1")


def test_a_prepared_model_query_answers_the_querysets_instances_with_their_joins(session, org, django_assert_num_queries):
    request = do_record_request(session, action="a", input={"x": [1, 2]}, user_id="u_1", output={"ok": True})
    by_pk = Prepared(
        lambda pk: Request.objects.select_related("session__organization").annotate(n=Count("items")).filter(pk=pk),
        sentinels=(-991,),
    )
    expected = Request.objects.select_related("session__organization").annotate(n=Count("items")).get(pk=request.pk)
    got = by_pk.one(request.pk)  # compiled here, at its first call
    with django_assert_num_queries(1):
        again = by_pk.one(request.pk)
        assert again.session.organization.pk == org.pk  # joined: no query of its own
    for row in (got, again):
        assert (row.pk, row.input, row.output, row.started_at, row.n) == (
            expected.pk,
            {"x": [1, 2]},
            {"ok": True},
            expected.started_at,
            0,
        )
        assert row.session.session_id == "prep.one" and not row._state.adding
    assert by_pk.one(-1) is None


def test_a_prepared_values_list_answers_every_row_in_order(session):
    for n in range(3):
        emit_item(session, "c", {"n": n})
    data = Prepared(lambda pk: Item.objects.filter(session_id=pk).order_by("-seq").values_list("seq", "data"), sentinels=(-992,))
    assert data.all(session.pk) == [(3, {"n": 2}), (2, {"n": 1}), (1, {"n": 0})]
    assert data.all(-5) == []


def test_a_sentinel_missing_from_the_compiled_query_is_refused(session):
    with pytest.raises(ValueError, match="sentinel"):
        Prepared(lambda pk: Request.objects.all(), sentinels=(-993,)).one(1)


def test_update_rows_updates_only_the_rows_its_equalities_name(session):
    request = do_record_request(session, action="a", input={}, user_id="u_1", running=True)
    assert update_rows(Request, {"id": request.pk, "status": "completed"}, status="failed") == 0
    assert update_rows(Request, {"id": request.pk, "status": "running"}, status="completed", output={"a": 1}) == 1
    request.refresh_from_db()
    assert (request.status, request.output) == ("completed", {"a": 1})


def test_the_guarded_item_is_written_only_when_its_update_was(session):
    request = do_record_request(session, action="a", input={}, user_id="u_1", running=True)
    guard = update_statement(Request, {"id": request.pk, "status": "running"}, status="completed")
    updated, item = do_update_then_emit_item(guard, session, "", {"text": "hi"}, type="message", request=request)
    assert updated == 1 and (item.seq, item.data, item.type, item.request_id) == (1, {"text": "hi"}, "message", request.pk)
    assert Item.objects.get(pk=item.pk).data == {"text": "hi"}
    updated, item = do_update_then_emit_item(guard, session, "", {"text": "again"}, type="message", request=request)
    assert (updated, item) == (0, None)
    assert Item.objects.filter(session=session).count() == 1
    assert Session.objects.get(pk=session.pk).item_seq == 1  # the counter moved once: no gap
