"""The admin inspects sessions, requests, items and transcript lines, read-only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from mailboxes.models import Line
from workforce.models import Item, Request, Session


@pytest.fixture
def posted(open_tree, act):
    open_tree()
    act("eng.standup", "post", {"body": "shipped the reader", "author": "eng.lead"})
    act("eng.standup", "post", {"body": "x", "author": "eng.intruder"})
    act("eng.standup", "read")


@pytest.mark.parametrize(
    "name",
    [
        "admin:workforce_organization_changelist",
        "admin:workforce_session_changelist",
        "admin:workforce_request_changelist",
        "admin:workforce_item_changelist",
        "admin:workforce_orgrecord_changelist",
        "admin:mailboxes_line_changelist",
    ],
)
def test_changelists_load(admin_client, posted, name):
    response = admin_client.get(reverse(name))
    assert response.status_code == 200


def test_the_session_changelist_lists_the_mailboxes(admin_client, posted):
    content = admin_client.get(reverse("admin:workforce_session_changelist")).content.decode()
    assert "eng.standup" in content and "eng.incidents" in content


def test_a_session_change_page_shows_its_requests_and_items(admin_client, posted):
    session = Session.objects.get(session_id="eng.standup")
    response = admin_client.get(reverse("admin:workforce_session_change", args=[session.pk]))
    assert response.status_code == 200
    content = response.content.decode()
    for request in Request.objects.filter(session=session):
        assert request.request_id in content
    assert "mailbox-post" in content


@pytest.mark.parametrize(
    "name,model",
    [("admin:workforce_request_change", Request), ("admin:workforce_item_change", Item), ("admin:mailboxes_line_change", Line)],
)
def test_detail_pages_load_read_only(admin_client, posted, name, model):
    obj = model.objects.first()
    response = admin_client.get(reverse(name, args=[obj.pk]))
    assert response.status_code == 200
    assert b'name="_save"' not in response.content


def test_lines_cannot_be_added_or_deleted(admin_client, posted):
    line = Line.objects.first()
    assert admin_client.get(reverse("admin:mailboxes_line_add")).status_code == 403
    assert admin_client.post(reverse("admin:mailboxes_line_delete", args=[line.pk]), {"post": "yes"}).status_code == 403
    assert Line.objects.filter(pk=line.pk).exists()


def test_the_changelist_search_works(admin_client, posted):
    response = admin_client.get(reverse("admin:mailboxes_line_changelist"), {"q": "reader"})
    assert response.status_code == 200
    assert "shipped the reader" in response.content.decode()
