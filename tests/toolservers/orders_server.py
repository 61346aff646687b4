"""A real MCP tool server for tests, written on the SDK (``mcp.server.mcpserver.MCPServer``).

``python orders_server.py`` serves over stdio; ``python orders_server.py --http PORT``
over streamable HTTP on 127.0.0.1:PORT at ``/mcp`` (answering 401 unless the
``Authorization`` header is ``Bearer $ORDERS_TOKEN``, when that is set). Tools:

- ``lookup_order(order_id)``: ``{"order_id", "status", "carrier"}`` as structured content
  (order ``A-1001`` shipped with Parcelways; any other id is not found, an ``isError``);
- ``crash(note)``: the server process dies in the middle of the call;
- ``sleep(seconds, marker)``: answers after that long (writing the file ``marker`` first);
- ``nul()``: a text holding a NUL character;
- ``whoami()``: the process id and the ``ORDERS_GREETING`` variable it was given.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TypedDict

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("orders")


class Order(TypedDict):
    order_id: str
    status: str
    carrier: str


class Identity(TypedDict):
    pid: int
    greeting: str


ORDERS: dict[str, Order] = {"A-1001": {"order_id": "A-1001", "status": "shipped", "carrier": "Parcelways"}}


@app.tool(structured_output=True)
def lookup_order(order_id: str) -> Order:
    """Look up one order by its id: its status and carrier."""
    order = ORDERS.get(order_id)
    if order is None:
        raise ToolError(f"no order {order_id}")
    return order


@app.tool()
def crash(note: str = "") -> str:
    """Dies in the middle of the call (a test's killed server)."""
    os._exit(3)


@app.tool()
def sleep(seconds: float, marker: str = "") -> str:
    """Answers after ``seconds``; writes the file ``marker`` (when given) as it starts."""
    if marker:
        Path(marker).write_text(str(os.getpid()))
    time.sleep(seconds)
    return f"slept {seconds}"


@app.tool()
def nul() -> str:
    """Answers a text holding a NUL character, which no store keeps."""
    return "before\x00after"


@app.tool(structured_output=True)
def whoami() -> Identity:
    """This server's process id and the greeting it was given."""
    return Identity(pid=os.getpid(), greeting=os.environ.get("ORDERS_GREETING", ""))


def checked(asgi, token: str):
    """``asgi`` answering 401 to a request whose ``Authorization`` is not ``Bearer <token>``."""

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != f"Bearer {token}".encode():
            await send({"type": "http.response.start", "status": 401, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"no token"})
            return
        await asgi(scope, receive, send)

    return guarded


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        import uvicorn

        web = app.streamable_http_app(streamable_http_path="/mcp")
        token = os.environ.get("ORDERS_TOKEN", "")
        uvicorn.run(checked(web, token) if token else web, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        app.run()
