"""A stdio MCP server for break-it probes (JSON-RPC by hand). Tools:
``partial_exit`` writes half a line then exits; ``sized(n, ch)`` answers ``n`` copies
of ``ch`` (astral characters escaped, 12 wire characters each); ``blocks(n)`` answers
``n`` empty text blocks; ``image(n)`` a text and an image of ``n`` base64 characters; ``good(x)``."""

from __future__ import annotations

import json
import os
import sys

TOOLS = [
    {"name": n, "description": n, "inputSchema": {"type": "object"}} for n in ("partial_exit", "sized", "blocks", "image", "good")
]


def main() -> None:
    out = sys.stdout.buffer
    for line in sys.stdin:
        message = json.loads(line)
        mid = message.get("id")
        if mid is None:
            continue
        method = message.get("method")
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "b3", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            name, args = message["params"]["name"], message["params"].get("arguments") or {}
            if name == "partial_exit":
                out.write(b'{"jsonrpc": "2.0", "id": ' + str(mid).encode() + b', "result": {"content": [{"type"')
                out.flush()
                os._exit(0)
            if name == "sized":
                result = {"content": [{"type": "text", "text": args["ch"] * int(args["n"])}], "isError": False}
            elif name == "image":  # a short text and an image of n base64 characters
                image = {"type": "image", "data": "A" * int(args["n"]), "mimeType": "image/png"}
                result = {"content": [{"type": "text", "text": "shot"}, image], "isError": False}
            elif name == "blocks":
                result = {"content": [{"type": "text", "text": ""}] * int(args["n"]), "isError": False}
            else:
                result = {"content": [{"type": "text", "text": f"good {args.get('x', '')}"}], "isError": False}
        else:
            result = {}
        out.write(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
