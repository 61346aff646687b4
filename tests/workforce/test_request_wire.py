"""The 202's body (``request_wire``) is ``RequestSerializer``'s, key for key, for every
shape of request: completed with output, failed with an error, running, no output."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from workforce.api.serializers import RequestSerializer, request_wire
from workforce.models import Request, Session

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "fields",
    [
        {"status": "completed", "output": {"id": "l1", "body": "é", "n": [1, None]}, "finished": True},
        {"status": "failed", "error": {"reason": "author-not-a-member", "message": "author-not-a-member: x"}, "finished": True},
        {"status": "running", "finished": False},
        {"status": "completed", "output": None, "finished": True},
    ],
)
def test_request_wire_is_the_serializers_answer(org, fields):
    session = Session.objects.create(organization=org, session_id="a.b", flow_kind="mailbox", user_id="u")
    fields = dict(fields)
    finished = fields.pop("finished")
    row = Request.objects.create(
        organization=org, session=session, action="post", user_id="u", finished_at=timezone.now() if finished else None, **fields
    )
    row = Request.objects.select_related("session").get(pk=row.pk)
    expected = RequestSerializer(row).data
    assert request_wire(row) == expected
    assert json.dumps(request_wire(row)) == json.dumps(expected)  # the same keys in the same order
    assert request_wire(row, include_output=False) == RequestSerializer(row, context={"include_output": False}).data
