"""A misbehaving MCP tool server for break-it tests: JSON-RPC written by hand (no SDK), so
it can do what the SDK's own server never would. ``python rogue_server.py [EXTRA ...]``
serves over stdio; ``python rogue_server.py --http PORT [EXTRA ...]`` over streamable
HTTP on 127.0.0.1:PORT (any path; JSON answers, no session id). Tools:

- ``good(x)``: answers ``good <x>``; its input schema is a valid JSON schema;
- ``bad_schema``: listed with an input schema no JSON-schema validator takes
  (a property whose ``type`` is ``"nonsense"``), which a provider refuses (OpenAI: 400
  for the whole request).

The ``EXTRA`` arguments list more:

- ``nul_name``: a tool named ``nul<NUL>name``, which no PostgreSQL text keeps (answers
  like ``good``);
- ``endless``: answers a message that never ends (``ENDLESS_BYTES`` of text with no
  end to the line or the JSON body, then nothing more: the server then waits, stdio, or
  ends the body unfinished, HTTP);
- ``endless_events``: over HTTP, answers as an event stream whose one event never ends.
"""

from __future__ import annotations

import json
import sys
import time

ENDLESS_BYTES = 64 * 1024 * 1024
CHUNK = b"x" * 65536

TOOLS = [
    {
        "name": "good",
        "description": "Answers good.",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}},
    },
    {
        "name": "bad_schema",
        "description": "Its schema is broken.",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "nonsense"}}},
    },
]
EXTRA_TOOLS = {
    "nul_name": {"name": "nul\x00name", "description": "Its name holds a NUL.", "inputSchema": {"type": "object"}},
    "endless": {"name": "endless", "description": "Answers without end.", "inputSchema": {"type": "object"}},
    "endless_events": {"name": "endless_events", "description": "One event without end.", "inputSchema": {"type": "object"}},
}


def listed(extras: list[str]) -> list[dict]:
    return TOOLS + [EXTRA_TOOLS[name] for name in extras]


def endless_head(message_id) -> bytes:
    """The start of an answer whose text never ends."""
    head = json.dumps({"jsonrpc": "2.0", "id": message_id, "result": {"content": [{"type": "text", "text": ""}]}})
    return head[: head.rindex('""') + 1].encode()


def result_for(message: dict, extras: list[str]) -> dict | None:
    """The result of a request other than an endless call (None for a notification)."""
    method = message.get("method")
    if method == "initialize":
        return {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "rogue", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": listed(extras)}
    if method == "tools/call":
        params = message["params"]
        text = f"{params['name']} {params.get('arguments', {}).get('x', '')}"
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return {}


def serve_stdio(extras: list[str]) -> None:
    out = sys.stdout.buffer
    for line in sys.stdin:
        message = json.loads(line)
        message_id = message.get("id")
        if message_id is None:
            continue  # a notification
        if message.get("method") == "tools/call" and message["params"]["name"] == "endless":
            out.write(endless_head(message_id))
            for _ in range(ENDLESS_BYTES // len(CHUNK)):
                out.write(CHUNK)
            out.flush()
            time.sleep(3600)
        out.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result_for(message, extras)}).encode() + b"\n")
        out.flush()


def serve_http(port: int, extras: list[str]) -> None:
    import uvicorn

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            await send({"type": "http.response.start", "status": 405, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        message = json.loads(body)
        message_id = message.get("id")
        if message_id is None:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        name = message.get("params", {}).get("name") if message.get("method") == "tools/call" else None
        if name in ("endless", "endless_events"):
            events = name == "endless_events"
            kind = b"text/event-stream" if events else b"application/json"
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", kind)]})
            await send(
                {
                    "type": "http.response.body",
                    "body": (b"data: " if events else b"") + endless_head(message_id),
                    "more_body": True,
                }
            )
            for _ in range(ENDLESS_BYTES // len(CHUNK)):
                await send({"type": "http.response.body", "body": CHUNK, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        answer = json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result_for(message, extras)}).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments[:1] == ["--http"]:
        serve_http(int(arguments[1]), arguments[2:])
    else:
        serve_stdio(arguments)
