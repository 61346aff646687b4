"""An answer's text as it is written (``workforce.previews``; docs/api.md "Watching a
session live", ``partial-text``): the embedded and mock models write word by word, a turn's
preview is throttled and cut to fit a NOTIFY, and a stream sends each change, then the
end after the items stored with it, reading who still runs only while it shows a preview.
Over HTTP, on a real ``serve`` and in a browser: ``tests/e2e/test_partial_text.py``."""

from __future__ import annotations

import asyncio
import json
import time

import psycopg
import pytest
from django.db import connection, transaction

from tests.conftest import on_postgres
from workforce import streams
from workforce.llm import EchoModel, ModelCall, ModelError, ScriptedModel
from workforce.models import Request, Session
from workforce.previews import NOTE_BYTES, TextPreview, note_body
from workforce.sessions import do_record_request
from workforce.streams import CHANNEL, hub, item_events, parse_preview_note, read_preview_files
from workforce.testing import create_mock_model_resolver


def turn(text: str) -> list[dict]:
    return [{"role": "system", "content": "Answer."}, {"role": "user", "content": text}]


def test_the_embedded_models_write_their_answer_word_by_word():
    for model in (EchoModel(), ScriptedModel()):
        pieces: list[str] = []
        reply = model.complete(ModelCall(block="eng.lead", messages=turn("u_42 in eng.m: hello there"), on_text=pieces.append))
        assert reply.text == "eng.lead heard: u_42 in eng.m: hello there"
        assert pieces == ["eng.lead ", "heard: ", "u_42 ", "in ", "eng.m: ", "hello ", "there"]
    assert EchoModel().complete(ModelCall(block="eng.lead", messages=turn("hi"))).text == "eng.lead heard: hi"  # no on_text


def test_scripted_writes_at_its_pace_and_echo_ignores_it():
    stamps: list[float] = []
    started = time.monotonic()
    ScriptedModel().complete(
        ModelCall(block="s", messages=turn("one two\n/pace 40"), on_text=lambda _: stamps.append(time.monotonic()))
    )
    assert len(stamps) == 6 and stamps[0] - started >= 0.04
    assert all(b - a >= 0.035 for a, b in zip(stamps, stamps[1:], strict=False))
    started = time.monotonic()
    EchoModel().complete(ModelCall(block="s", messages=turn("one two\n/pace 400"), on_text=lambda _: None))
    assert time.monotonic() - started < 0.3  # anyone can post: echo never waits on a sender's word
    with pytest.raises(ModelError, match="no answer within"):
        ScriptedModel().complete(ModelCall(block="s", messages=turn("a b c d\n/pace 100"), timeout=0.15, on_text=lambda _: None))


def test_a_mock_models_text_answer_is_written_word_by_word():
    resolver = create_mock_model_resolver({"*": ["the printer is fixed", {"text": "", "tool_calls": [{"name": "t"}]}]})
    pieces: list[str] = []
    model = resolver.resolve("openai/x", block="b")
    assert model.complete(ModelCall(block="b", messages=turn("?"), on_text=pieces.append)).text == "the printer is fixed"
    assert pieces == ["the ", "printer ", "is ", "fixed"]
    model.complete(ModelCall(block="b", messages=turn("?"), on_text=pieces.append))
    assert len(pieces) == 4  # a tool call writes no text


def test_a_note_is_cut_to_its_end_to_fit_a_notify():
    text = "é" * 5000 + "the end"  # 10,007 bytes of UTF-8
    body = note_body({"requestId": "req_1", "sessionId": "s", "agentName": "a", "text": text, "start": 0, "done": False})
    assert len(body.encode()) <= NOTE_BYTES - 24
    data = json.loads(body)
    assert data["text"].endswith("the end") and data["start"] > 0 and text[data["start"] :] == data["text"]
    assert parse_preview_note(f"t12:{body}") == (12, data)
    for text in ("é" * 20000, "\x00" * 20000, "漢字🎉" * 5000, "a" * 9000):  # costs 2, 6, 3-4 and 1 bytes a character
        data = json.loads(
            note_body({"requestId": "r", "sessionId": "s", "agentName": "a", "text": text, "start": 0, "done": False})
        )
        assert text[data["start"] :] == data["text"] and len(data["text"]) > 1000  # its end, counted in characters
    for payload in ("12:3", "r7:3", "tx:{}", "t12:not json", 't12:{"text": "no request"}'):
        assert parse_preview_note(payload) is None


class _Row:
    pk = 7
    request_id = "req_x"
    session_id = "eng.m:eng.lead"
    parent_id = 3
    flow_kind = "agent"


def test_a_preview_is_published_at_most_every_interval_counted_from_the_calls_start(monkeypatch):
    sent: list[dict] = []
    preview = TextPreview(request=_Row(), session=_Row(), agent_name="eng.lead", interval=0.05)
    monkeypatch.setattr(preview, "_publish", sent.append)
    write = preview.writer()
    for word in ("a ", "b ", "c "):
        write(word)
    assert sent == []  # written whole within the interval: nothing to show before its line
    time.sleep(0.06)
    write("d ")
    write("e ")
    assert [s["text"] for s in sent] == ["a b c d "]
    time.sleep(0.06)
    write("f")
    assert [s["text"] for s in sent] == ["a b c d ", "a b c d e f"]
    assert sent[0] == {
        "requestId": "req_x",
        "sessionId": "eng.m:eng.lead",
        "agentName": "eng.lead",
        "text": "a b c d ",
        "start": 0,
        "done": False,
    }
    assert preview.targets == [7, 3]  # the turn's session and its parent's
    preview.writer()("g")  # the next model call starts from an empty text
    assert preview.text == "g"


def test_a_failing_publish_never_reaches_the_model(monkeypatch):
    preview = TextPreview(request=_Row(), session=_Row(), agent_name="eng.lead", interval=0)
    monkeypatch.setattr(preview, "_publish", lambda data: 1 / 0)
    preview.writer()("a")  # logged, not raised


@pytest.fixture
def running(open_tree, org):
    """A running request on a seat's conversation in ``eng.standup``."""
    open_tree()
    mailbox = Session.objects.get(organization=org, session_id="eng.standup")
    seat = Session.objects.create(
        organization=org, session_id="eng.standup:eng.lead", flow_kind="agent", user_id="u", parent=mailbox
    )
    request = do_record_request(seat, action="onMailboxPost", input={}, user_id="u", running=True)
    return mailbox, seat, request


async def _events(stream, n: int) -> list[str]:
    return [await asyncio.wait_for(anext(stream), 10) for _ in range(n)]


@pytest.mark.django_db(transaction=True)
def test_a_stream_sends_each_preview_then_its_end_after_the_line(running, settings, tmp_path, monkeypatch):
    settings.VAR_DIR = tmp_path
    mailbox, seat, request = running
    store: list[tuple[int, dict]] = []
    asked: list[list[str]] = []
    real_running = streams._running

    async def counted(ids, session_pks):
        asked.append(sorted(ids))
        return await real_running(ids, session_pks)

    monkeypatch.setattr(streams, "_running", counted)
    preview = TextPreview(request=request, session=seat, agent_name="eng.lead", interval=0)

    async def run():
        stream = item_events(
            mailbox.pk, after=0, read=lambda after, limit: [r for r in store if r[0] > after][:limit], poll_seconds=0.05
        )
        got = [await anext(stream)]
        while not hub.listening and on_postgres():
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)
        idle_asks = len(asked)
        await asyncio.to_thread(_write, preview, "eng.lead heard: ")
        got += await _events(stream, 1)
        await asyncio.to_thread(_write, preview, "hi")
        got += await _events(stream, 1)
        store.append((1, {"seq": 1, "body": "the line"}))
        await asyncio.to_thread(_end, request, preview)
        hub.wake(mailbox.pk)
        got += await _events(stream, 2)
        await stream.aclose()
        return got, idle_asks

    got, idle_asks = asyncio.run(run())
    connection.close()
    assert got[0] == "retry: 1000\n\n" and idle_asks == 0  # no preview shown: nobody asked who runs
    previews_sent = [json.loads(text.split("data: ", 1)[1]) for text in got[1:3]]
    assert [text.split("\n")[0] for text in got[1:]] == ["event: partial-text"] * 2 + ["id: 1", "event: partial-text"]
    assert [p["text"] for p in previews_sent] == ["eng.lead heard: ", "eng.lead heard: hi"]
    assert previews_sent[0]["requestId"] == request.request_id and previews_sent[0]["sessionId"] == seat.session_id
    end = json.loads(got[4].split("data: ", 1)[1])
    assert end["done"] is True and end["requestId"] == request.request_id  # after the line
    assert read_preview_files(seat.pk) == {} and read_preview_files(mailbox.pk) == {}  # nothing left behind
    if not on_postgres():
        assert asked  # SQLite: who still runs, read at each poll while a preview is shown


def _write(preview: TextPreview, piece: str) -> None:
    try:
        preview.add(piece)
    finally:
        connection.close()


def _end(request: Request, preview: TextPreview) -> None:
    try:
        with transaction.atomic():
            Request.objects.filter(pk=request.pk).update(status=Request.Status.COMPLETED)
            preview.end()
    finally:
        connection.close()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_preview_is_a_note_at_once_and_its_end_comes_with_the_commit(running):
    mailbox, seat, request = running
    conf = connection.settings_dict
    listener = psycopg.connect(
        dbname=conf["NAME"], user=conf["USER"], host=conf["HOST"], port=conf["PORT"] or None, autocommit=True
    )
    try:
        listener.execute(f"LISTEN {CHANNEL}")
        preview = TextPreview(request=request, session=seat, agent_name="eng.lead", interval=0)
        preview.writer()("hello")
        notes = [parse_preview_note(n.payload) for n in listener.notifies(timeout=1.0, stop_after=2)]
        assert [(pk, data["text"]) for pk, data in notes] == [(seat.pk, "hello"), (mailbox.pk, "hello")]
        with transaction.atomic():
            preview.end()
            assert list(listener.notifies(timeout=0.3, stop_after=1)) == []  # not before the commit
        ends = [parse_preview_note(n.payload) for n in listener.notifies(timeout=1.0, stop_after=2)]
        assert [(pk, data["done"]) for pk, data in ends] == [(seat.pk, True), (mailbox.pk, True)]
    finally:
        listener.close()


def test_a_session_private_on_its_own_keeps_its_text_from_its_parents_streams():
    class Conversation(_Row):
        flow_kind = "coordinator"  # private by its kind (workforce.privacy)

    assert TextPreview(request=_Row(), session=Conversation(), agent_name="a").targets == [7]
    assert TextPreview(request=_Row(), session=_Row(), agent_name="a").targets == [7, 3]


def test_text_that_cannot_land_on_the_parent_is_previewed_on_the_turns_own_session_only(monkeypatch, tmp_path, settings):
    """A woken seat's text lands in its mailbox only as a routed post's answer not yet
    handed over by post-to-mailbox: otherwise the mailbox's page would show a second copy
    of an answer already there (or text that never lands there)."""
    settings.VAR_DIR = str(tmp_path)
    monkeypatch.setattr("workforce.previews._postgres", lambda: False)
    lands = {"parent": True}
    preview = TextPreview(request=_Row(), session=_Row(), agent_name="eng.lead", interval=0, to_parent=lambda: lands["parent"])
    write = preview.writer()
    write("the answer ")
    assert sorted(p.name for p in (tmp_path / "previews").iterdir()) == ["3", "7"]
    assert (tmp_path / "previews" / "3" / "req_x.json").exists()
    lands["parent"] = False  # post-to-mailbox handed the answer over
    write("more")
    assert preview.targets == [7]
    assert not (tmp_path / "previews" / "3" / "req_x.json").exists()  # the parent's preview ended
    assert json.loads((tmp_path / "previews" / "7" / "req_x.json").read_text())["text"] == "the answer more"

    quiet = TextPreview(request=_Row(), session=_Row(), agent_name="eng.lead", interval=0, to_parent=lambda: False)
    quiet.writer()("words")
    assert quiet.targets == [7]
