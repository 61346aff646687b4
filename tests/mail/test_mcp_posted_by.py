"""Who said what through the MCP server's ``post`` tool (issue 25 item 9): the line names
the caller the server resolved (the token's user, or without authentication the person
``manage.py mcp`` was started as, unverified), never a ``postedBy`` the tool call sends."""

from __future__ import annotations

import asyncio

import pytest
from django.contrib.auth.models import User
from mcp import Client
from rest_framework.authtoken.models import Token

from mail.mcp_server import build_server
from mailboxes.models import Line
from tests.posted_by import ALICE, BOB, MODES, user
from workforce.models import Membership

pytestmark = pytest.mark.django_db(transaction=True)  # the SDK runs each tool in a thread of its own


@pytest.fixture(params=MODES)
def mode(request, settings) -> str:
    settings.WORKFORCE_AUTH = request.param
    return request.param


def server_as(org, name: str, mode: str):
    """The stdio server acting as ``name``: by a token of theirs, or named (no auth)."""
    if mode == "none":
        return build_server(user_id=name)
    person = User.objects.create_user(name)
    Membership.objects.create(user=person, organization=org)
    return build_server(token=Token.objects.create(user=person).key)


async def call(server, name: str, args: dict):
    async with Client(server) as client:
        return await client.call_tool(name, args)


def test_a_tool_post_names_its_caller_and_a_sent_postedby_changes_nothing(open_tree, org, mode):
    open_tree()
    for name in (ALICE, BOB):
        done = asyncio.run(call(server_as(org, name, mode), "post", {"mailbox": "eng.standup", "body": f"from {name}"}))
        assert not done.is_error
    forged = asyncio.run(
        call(
            server_as(org, "carol", mode),
            "post",
            {"mailbox": "eng.standup", "body": "forged", "postedBy": {"kind": "user", "id": ALICE, "verified": True}},
        )
    )
    # The tool takes no such argument: the SDK drops it, and the line is the caller's.
    assert not forged.is_error
    assert [(line.body, line.as_wire()["postedBy"]) for line in Line.objects.order_by("seq")] == [
        (f"from {ALICE}", user(ALICE, mode)),
        (f"from {BOB}", user(BOB, mode)),
        ("forged", user("carol", mode)),
    ]
