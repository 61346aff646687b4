"""Real MCP tool servers for the tests (``orders_server.py``, on the SDK; ``rogue_server.py``,
written by hand to misbehave) and how to start them over streamable HTTP
(``start_http_orders``, ``start_http_rogue``); over stdio a tree's
``org/tool-servers.yaml`` names ``SERVER`` (or ``ROGUE``) and the client starts it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

SERVER = Path(__file__).resolve().parent / "orders_server.py"
ROGUE = Path(__file__).resolve().parent / "rogue_server.py"


def start_http_orders(port: int, token: str, *, greeting: str = "over http") -> subprocess.Popen:
    """``orders_server.py`` over streamable HTTP on 127.0.0.1:``port``, wanting
    ``Authorization: Bearer <token>``; returns the process once it answers."""
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        env={**os.environ, "ORDERS_TOKEN": token, "ORDERS_GREETING": greeting},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return _answering(process, port)


def start_http_rogue(port: int, *extras: str) -> subprocess.Popen:
    """``rogue_server.py`` over streamable HTTP on 127.0.0.1:``port``, listing its
    ``extras`` too; returns the process once it answers."""
    process = subprocess.Popen(
        [sys.executable, str(ROGUE), "--http", str(port), *extras], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return _answering(process, port)


def _answering(process: subprocess.Popen, port: int) -> subprocess.Popen:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/mcp", timeout=1)
        except urllib.error.HTTPError:
            return process  # it answers (401 without the token, 405 to a GET)
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise AssertionError(f"the HTTP tool server did not answer on port {port}")
