"""A turn's history window read (``seats.queries.conversation_history``, issue 26): on
PostgreSQL the statement shapes the chat messages and Python decodes one JSON text; it
returns what the item-by-item read returned (``_old_history``, the read before it, kept
here only to compare), on both databases."""

from __future__ import annotations

import json

import pytest
from django.db import connection

from seats.queries import _WINDOW_FLOORS, MESSAGE_ITEM, _chat_messages, conversation_history, window_messages
from tests.conftest import on_postgres
from workforce.models import Item, Request, Session
from workforce.sessions import history_window

SPEAKER = "eng.lead"

# The PostgreSQL read before issue 26's fold (each item's whole data, decoded in Python),
# without the floor (a hint: the same window either way).
_OLD_POSTGRESQL = """
WITH w AS MATERIALIZED (
    SELECT r.id, r.status FROM {requests} r WHERE r.session_id = %(session)s ORDER BY r.id DESC LIMIT %(window)s
)
SELECT i.session_id, i.data
FROM w CROSS JOIN LATERAL (
    SELECT it.session_id, it.data, it.seq FROM {items} it WHERE it.request_id = w.id AND it.type = %(type)s OFFSET 0
) i
WHERE w.status <> %(aborted)s AND w.id <> %(exclude)s
ORDER BY i.seq
"""


def _old_history(session: Session, *, speaker: str, exclude_request_id: int | None = None) -> list[dict]:
    if on_postgres():
        sql = _OLD_POSTGRESQL.format(
            requests=connection.ops.quote_name(Request._meta.db_table), items=connection.ops.quote_name(Item._meta.db_table)
        )
        params = {
            "session": session.pk,
            "window": history_window(),
            "type": MESSAGE_ITEM,
            "aborted": Request.Status.ABORTED,
            "exclude": -1 if exclude_request_id is None else exclude_request_id,
        }
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = [(s, json.loads(d) if isinstance(d, str) else d) for s, d in cursor.fetchall()]
    else:
        rows = window_messages(session, exclude_request_id=exclude_request_id)
    # The rules that build messages from the rows were the old read's own loop, kept as is.
    return _chat_messages(rows, session.pk, speaker)


TOOL_CALLS = [{"id": "c1", "name": "search", "arguments": {"q": 'ünï "quoted"\n'}, "result": {"hits": [1, 2.5, None]}}]

# One turn per entry: (status, [(type, data), ...]); the window is the last WINDOW turns.
TURNS = [
    ("completed", [("message", {"role": "user", "text": "cut off: before the window"})]),
    ("completed", [("message", {"role": "assistant", "text": "also cut", "agentName": SPEAKER})]),
    ("completed", [("message", {"role": "user", "text": "first in the window"})]),
    (
        "completed",
        [
            ("message", {"role": "user", "text": "use a tool, 'please' \\ \"now\"\t"}),
            ("tool-call", {"name": "search", "arguments": {"q": "x"}, "status": "done", "result": "ok"}),
            ("component", {"component": "preview", "text": "a preview is not a message"}),
            ("message", {"role": "assistant", "text": "answer 🙂", "agentName": SPEAKER, "toolCalls": TOOL_CALLS}),
        ],
    ),
    ("aborted", [("message", {"role": "user", "text": "aborted turn"})]),
    (
        "completed",
        [
            ("message", {"role": "user", "text": ""}),
            ("message", {"role": "user"}),
            ("message", {"role": "user", "text": None}),
            ("message", {"role": "system", "text": "not a chat role"}),
            ("message", {"text": "no role"}),
            ("message", {"role": "assistant", "text": "a delegate's", "agentName": "eng.analyst", "done": True}),
            ("message", {"role": "assistant", "text": "nobody's", "agentName": ""}),
            ("message", {"role": "assistant", "text": "null name", "agentName": None}),
            ("message", {"role": "assistant", "text": "no name"}),
            ("message", {"role": "user", "text": "a user's agentName is ignored", "agentName": "someone"}),
        ],
    ),
    (
        "completed",
        [
            # Not JSON strings: Python's own rules (left to _chat_message on PostgreSQL).
            ("message", {"role": "user", "text": 42}),
            ("message", {"role": "user", "text": 0}),
            ("message", {"role": "user", "text": False}),
            ("message", {"role": "assistant", "text": ["a", 1], "agentName": "other"}),
            ("message", {"role": "assistant", "text": "numbered agent", "agentName": 7}),
            ("message", {"role": "assistant", "text": "falsy agent", "agentName": 0}),
            ("message", {"role": "user", "text": {"nested": True}}),
        ],
    ),
    ("completed", [("message", {"role": "user", "text": "the excluded turn's prompt"})]),
    ("completed", [("message", {"role": "user", "text": "updated later"}), ("message", {"role": "assistant", "text": "reply"})]),
]
WINDOW = len(TURNS) - 2


@pytest.fixture
def conversation(org, settings):
    settings.WORKFORCE_HISTORY_WINDOW = WINDOW
    session = Session.objects.create(organization=org, session_id="eng.m:eng.lead", flow_kind="agent", user_id="u_owner")
    other = Session.objects.create(organization=org, session_id="eng.other", flow_kind="agent", user_id="u_owner")
    requests, seq = [], 0
    for status, items in TURNS:
        request = Request.objects.create(organization=org, session=session, action="t", user_id="u_owner", status=status)
        requests.append(request)
        for type_, data in items:
            seq += 1
            Item.objects.create(session=session, request=request, seq=seq, type=type_, data=data)
    # Another session's message under a request of the window (left out: not this session's).
    Item.objects.create(session=other, request=requests[3], seq=1, type="message", data={"role": "user", "text": "elsewhere"})
    # An item updated after it was written: the window reads what it holds now.
    Item.objects.filter(session=session, data__text="updated later").update(data={"role": "user", "text": "updated ✓"})
    return session, requests


def test_the_history_is_what_the_item_by_item_read_returned(conversation):
    session, requests = conversation
    excluded = requests[-2].pk
    _WINDOW_FLOORS.clear()
    for speaker in (SPEAKER, "eng.analyst", ""):
        for exclude in (excluded, None):
            expected = _old_history(session, speaker=speaker, exclude_request_id=exclude)
            for _ in range(2):  # the second read starts at the window's floor
                got = conversation_history(session, speaker=speaker, exclude_request_id=exclude)
                assert got == expected
                assert [list(m) for m in got] == [["role", "content"]] * len(got)  # key order too
    assert any(key[1] == session.pk for key in _WINDOW_FLOORS) == on_postgres()


def test_the_history_holds_these_messages(conversation):
    session, requests = conversation
    assert conversation_history(session, speaker=SPEAKER, exclude_request_id=requests[-2].pk) == [
        {"role": "user", "content": "first in the window"},
        {"role": "user", "content": "use a tool, 'please' \\ \"now\"\t"},
        {"role": "assistant", "content": "answer 🙂"},
        {"role": "assistant", "content": "eng.analyst: a delegate's"},
        {"role": "assistant", "content": "nobody's"},
        {"role": "assistant", "content": "null name"},
        {"role": "assistant", "content": "no name"},
        {"role": "user", "content": "a user's agentName is ignored"},
        {"role": "user", "content": 42},
        {"role": "assistant", "content": "other: ['a', 1]"},
        {"role": "assistant", "content": "7: numbered agent"},
        {"role": "assistant", "content": "falsy agent"},
        {"role": "user", "content": {"nested": True}},
        {"role": "user", "content": "updated ✓"},
        {"role": "assistant", "content": "reply"},
    ]


def test_an_empty_window_and_a_window_of_strings_only(org, settings):
    settings.WORKFORCE_HISTORY_WINDOW = 3
    session = Session.objects.create(organization=org, session_id="eng.m:eng.lead", flow_kind="agent", user_id="u_owner")
    assert conversation_history(session, speaker=SPEAKER) == []
    request = Request.objects.create(organization=org, session=session, action="t", user_id="u_owner", status="completed")
    assert conversation_history(session, speaker=SPEAKER) == []
    Item.objects.create(session=session, request=request, seq=1, type="message", data={"role": "user", "text": "hi"})
    assert conversation_history(session, speaker=SPEAKER) == [{"role": "user", "content": "hi"}]
    assert conversation_history(session, speaker=SPEAKER, exclude_request_id=request.pk) == []
