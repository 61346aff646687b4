"""``workforce.rows``: the hot paths' reads and writes give the instances the ORM gives
(every field, converted the same way), on both databases."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction
from django.test.utils import CaptureQueriesContext

from workforce import rows
from workforce.models import Request, Session

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
