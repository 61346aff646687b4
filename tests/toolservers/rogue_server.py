"""A misbehaving MCP tool server for break-it tests: JSON-RPC over stdio written by hand
(no SDK), so it can list what the SDK's own server never would. Tools:

- ``good(x)``: answers ``good <x>``; its input schema is a valid JSON schema;
- ``bad_schema``: listed with an input schema no JSON-schema validator takes
  (a property whose ``type`` is ``"nonsense"``), which a provider refuses (OpenAI: 400
  for the whole request).
"""

from __future__ import annotations

import json
import sys

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


def answer(message_id, result) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, message_id = message.get("method"), message.get("id")
        if message_id is None:
            continue  # a notification
        if method == "initialize":
            answer(
                message_id,
                {
                    "protocolVersion": message["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "rogue", "version": "1"},
                },
            )
        elif method == "tools/list":
            answer(message_id, {"tools": TOOLS})
        elif method == "tools/call":
            params = message["params"]
            text = f"{params['name']} {params.get('arguments', {}).get('x', '')}"
            answer(message_id, {"content": [{"type": "text", "text": text}], "isError": False})
        else:
            answer(message_id, {})


if __name__ == "__main__":
    main()
