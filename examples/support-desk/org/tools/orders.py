"""The support desk's order lookup: a small MCP tool server over stdio, written on the
``mcp`` SDK. ``org/tool-servers.yaml`` declares it as ``orders``; the general seat's
WORKER.md grants its tools (``orders/*``), so its turn is offered ``orders__lookup_order``.

Its orders are a few made-up ones; a real desk's server would read its shop's database
(its address passed in an environment variable the tree names under ``env:``).
"""

from __future__ import annotations

import re
from typing import TypedDict

from mcp.server.mcpserver import MCPServer

app = MCPServer("orders", instructions="Look up the shop's orders by their id (A-1001).")


class Order(TypedDict):
    found: bool
    order_id: str
    status: str
    carrier: str
    eta: str


ORDERS = {
    "A-1001": ("shipped", "Parcelways", "Thursday"),
    "A-1002": ("packing", "", "next week"),
    "A-1003": ("delivered", "Parcelways", ""),
}
ORDER_ID = re.compile(r"\b[A-Z]-\d{4}\b")


@app.tool(structured_output=True)
def lookup_order(order_id: str) -> Order:
    """Look up one order: its status, carrier and expected delivery. order_id is the
    order's id (A-1001); a sentence that holds one is read for it."""
    match = ORDER_ID.search(order_id.upper())
    wanted = match.group(0) if match else order_id.strip()
    if wanted not in ORDERS:
        return Order(found=False, order_id=wanted, status="", carrier="", eta="")
    status, carrier, eta = ORDERS[wanted]
    return Order(found=True, order_id=wanted, status=status, carrier=carrier, eta=eta)


if __name__ == "__main__":
    app.run()
