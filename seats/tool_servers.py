"""Tool servers: MCP servers whose tools a seat may call (docs/tools.md).

An organization declares its tool servers in ``org/tool-servers.yaml`` of the workforce
tree, read with the tree's strict YAML loader (``workforce.tree.strict_yaml_load``)::

    servers:
      orders:                      # the server's name (the tree's name rule)
        description: Order lookup for the support desk.
        command: python            # stdio: a command (python: the server's own interpreter)
        args: [org/tools/orders.py]  # its arguments; it runs in the tree's root folder
        env: [ORDERS_DB_URL]       # variables passed from the server's environment
      crm:
        url: http://127.0.0.1:9000/mcp   # streamable HTTP
        headers: {Authorization: CRM_AUTHORIZATION}  # header: the variable holding its value

Secrets are never written in the tree: ``env`` names environment variables whose values
are passed to a stdio server, and ``headers`` maps a header to the environment variable
holding its value. Every problem of the file is a ``LoadError`` at its path, reported by
``seats.workers.read_workforce`` with the tree's other problems.

A ``WORKER.md`` grants tools in its ``tools:`` list as ``<server>/<tool>`` or
``<server>/*`` (the server's whole set). At hire an unknown server or tool is refused by
name (``tool_grant_problems``); the seat's turn is offered exactly those tools, named
``<server>__<tool>`` on the wire (``wire_name``), with the JSON schemas the server lists
(``tool_server_capability``). A call to a declared server's tool the seat was not granted
is refused ``tool-not-granted`` and ledgered ``run.denied`` (``refuse_unoffered``); a
call of a granted tool its server does not list is refused ``tool-not-offered``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import time
from collections.abc import Iterable
from contextvars import ContextVar
from pathlib import Path

from django.conf import settings

from workforce.refusals import Refusal
from workforce.tools import Tool, ToolContext, ToolResult, refuse
from workforce.tree import FrontmatterError, LoadError, name_problem, os_reason, strict_yaml_load
from workforce.wire import check_storable, text_problem

from .mcp_client import ServerTool, ToolServer, ToolServerError, call_timeout, list_server_tools, pool
from .models import Seat, ToolCallEntry

logger = logging.getLogger(__name__)

TOOL_SERVERS_FILE = "org/tool-servers.yaml"
TOOL_SERVERS_LOAD_FAILED = "tool-servers-load-failed"
SERVER_KEYS = ("description", "command", "args", "env", "url", "headers")
GRANT_ALL = "*"
WIRE_SEPARATOR = "__"
# What a provider takes as a tool's name (OpenAI: ^[a-zA-Z0-9_-]{1,64}$); the length is
# the model client's to keep (it aliases longer names), the characters are ours.
_WIRE_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def wire_name(server: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server``: ``<server>__<tool>``, with any
    character a provider refuses in a name written ``_``."""
    return _WIRE_UNSAFE.sub("_", f"{server}{WIRE_SEPARATOR}{tool}")


def split_grant(entry: str) -> tuple[str, str] | None:
    """``("orders", "lookup_order")`` for a ``tools:`` entry ``orders/lookup_order`` (or
    ``("orders", "*")``), None for a built-in tool's name."""
    if "/" not in entry:
        return None
    server, _, tool = entry.partition("/")
    return server, tool


def tool_grants(tools: Iterable[str]) -> list[tuple[str, str]]:
    """The tool-server grants of a ``tools:`` list, in order."""
    return [grant for grant in (split_grant(t) for t in tools) if grant is not None]


# ----------------------------------------------------------------------------- the file


def read_tool_servers(root: str | os.PathLike) -> tuple[dict[str, ToolServer], list[LoadError]]:
    """Read ``<root>/org/tool-servers.yaml`` when it exists.

    Returns:
        ``(servers, errors)``: the declared servers by name (none when the file is
        absent or has a problem), and one ``LoadError`` (kind ``tool-servers-load-failed``,
        at the file's path) per problem: a link on its path, not a file, unreadable, not
        valid YAML, a key not declarable, a server without exactly one of ``command`` and
        ``url``, a badly named server, variable or header. Every problem at once.
    """
    path = Path(root)
    for part in TOOL_SERVERS_FILE.split("/"):
        path = path / part
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return {}, []
        except OSError as exc:
            return {}, [_error(f"cannot be read ({os_reason(exc)}).")]
        if stat.S_ISLNK(st.st_mode):
            return {}, [_error("a symbolic link sits on its path, and links in the tree are never followed.")]
    if not stat.S_ISREG(st.st_mode):
        return {}, [_error("is not a file.")]
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        reason = os_reason(exc) if isinstance(exc, OSError) else "it is not UTF-8 text"
        return {}, [_error(f"cannot be read ({reason}).")]
    try:
        declared = strict_yaml_load(text, TOOL_SERVERS_FILE)
    except FrontmatterError as exc:
        return {}, [LoadError(TOOL_SERVERS_LOAD_FAILED, TOOL_SERVERS_FILE, str(exc).replace("the frontmatter", "the file"))]
    servers, problems = check_tool_servers(declared, cwd=str(Path(root).resolve()))
    if problems:
        return {}, [_error(problem) for problem in problems]
    return servers, []


def _error(message: str) -> LoadError:
    return LoadError(TOOL_SERVERS_LOAD_FAILED, TOOL_SERVERS_FILE, message)  # the error's path names the file


def check_tool_servers(declared: object, *, cwd: str = "") -> tuple[dict[str, ToolServer], list[str]]:
    """Check the loaded file: ``{servers: {<name>: {command|url, ...}}}``.

    Returns ``(servers, problems)``: one sentence per problem, each naming the server and key.
    """
    problems: list[str] = []
    if declared is None:
        return {}, []
    if not isinstance(declared, dict) or set(declared) - {"servers"}:
        return {}, ["must be a mapping with servers:, such as {servers: {orders: {command: python, args: [orders.py]}}}"]
    servers_declared = declared.get("servers")
    if servers_declared is None:
        return {}, []
    if not isinstance(servers_declared, dict):
        return {}, ["servers: must be a mapping from a server's name to its declaration"]
    servers: dict[str, ToolServer] = {}
    for name, spec in servers_declared.items():
        where = f"servers.{name}"
        if not isinstance(name, str) or name_problem(name):
            problems.append(f"{where}: {name_problem(str(name)) or 'a server name must be text'}")
            continue
        if not isinstance(spec, dict):
            problems.append(f"{where}: must be a mapping with command: (stdio) or url: (streamable HTTP)")
            continue
        before = len(problems)
        for key in spec:
            if key not in SERVER_KEYS:
                hint = (
                    " (write the variable's name under env: or headers:, never its value)" if key in ("token", "secret") else ""
                )
                problems.append(f'{where}: "{key}" is not a key a tool server takes; the keys are {", ".join(SERVER_KEYS)}{hint}')
        command, url = spec.get("command"), spec.get("url")
        if (command is None) == (url is None):
            problems.append(f"{where}: declares exactly one of command: (a stdio server) and url: (a streamable-HTTP server)")
        if command is not None and (not isinstance(command, str) or not command.strip()):
            problems.append(f"{where}: command: must be the program to run, such as python")
        if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
            problems.append(f"{where}: url: must be an http:// or https:// address")
        args = spec.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            problems.append(f"{where}: args: must be a list of text arguments")
        elif args and url is not None:
            problems.append(f"{where}: args: is for a stdio server (command:), not one at a url:")
        env = spec.get("env", [])
        if not isinstance(env, list) or not all(isinstance(e, str) and _ENV_NAME.match(e) for e in env):
            problems.append(f"{where}: env: must be a list of environment variable names (their values are never written here)")
        elif env and url is not None:
            problems.append(f"{where}: env: is for a stdio server (command:); an HTTP server takes headers:")
        headers = spec.get("headers", {})
        if not isinstance(headers, dict) or not all(
            isinstance(h, str) and _HEADER_NAME.match(h) and isinstance(v, str) and _ENV_NAME.match(v) for h, v in headers.items()
        ):
            problems.append(
                f"{where}: headers: must map a header to the environment variable holding its value, "
                "such as {Authorization: CRM_AUTHORIZATION}"
            )
        elif headers and command is not None:
            problems.append(f"{where}: headers: is for a server at a url:; a stdio server takes env:")
        description = spec.get("description", "")
        if not isinstance(description, str):
            problems.append(f"{where}: description: must be text")
        if len(problems) > before:
            continue
        servers[name] = ToolServer(
            name=name,
            description=description,
            command=command,
            args=tuple(args),
            env=tuple(env),
            url=url,
            headers=tuple(sorted(headers.items())),
            cwd=cwd,
        )
    return servers, problems


def declared_servers(root: str | os.PathLike | None = None) -> dict[str, ToolServer]:
    """The tool servers ``root``'s file declares (default ``WORKFORCE_ROOT``); none when the
    file has a problem (the tree check names it)."""
    servers, _ = read_tool_servers(root if root is not None else settings.WORKFORCE_ROOT)
    return servers


# ----------------------------------------------------------------------------- hire


def tool_grant_problems(tools: Iterable[str], servers: dict[str, ToolServer], *, reach: bool = True) -> list[str]:
    """Why a worker's ``tools:`` tool-server grants can't be hired: one sentence per
    unknown server (by name) and, with ``reach``, per tool the server does not list (the
    server is asked for its tools: ``seats.mcp_client.list_server_tools``). A server that
    cannot be reached refuses the grants that name one of its tools."""
    problems: list[str] = []
    listed: dict[str, list[str] | str] = {}
    for server_name, tool in tool_grants(tools):
        server = servers.get(server_name)
        if server is None:
            declared = ", ".join(sorted(servers)) or "none"
            problems.append(
                f'tools: names the tool server "{server_name}", which {TOOL_SERVERS_FILE} does not declare '
                f"(it declares {declared})"
            )
            continue
        if not tool or (tool != GRANT_ALL and "/" in tool):
            problems.append(f'tools: "{server_name}/{tool}" must name one tool of {server_name}, or {server_name}/*')
            continue
        if tool == GRANT_ALL or not reach:
            continue
        if server_name not in listed:
            try:
                # A name no store keeps (a NUL) is never offered, so never grantable.
                listed[server_name] = [t.name for t in list_server_tools(server) if text_problem(t.name) is None]
            except ToolServerError as exc:
                listed[server_name] = str(exc)
        offered = listed[server_name]
        if isinstance(offered, str):
            problems.append(
                f'tools: names "{server_name}/{tool}", but the tool server {server_name} could not list its tools: {offered}'
            )
        elif tool not in offered:
            problems.append(
                f'tools: names "{server_name}/{tool}", which the tool server {server_name} does not offer '
                f"(it offers {', '.join(sorted(offered)) or 'none'})"
            )
    return problems


# ----------------------------------------------------------------------------- the turn


def _ledger(ctx: ToolContext, event: str, server: str, tool: str, **data: object) -> None:
    ToolCallEntry.objects.create(
        organization=ctx.org,
        event=event,
        seat_id=ctx.seat_id,
        server=server,
        tool=tool,
        request_id=ctx.request.request_id if ctx.request is not None else "",
        data=data,
    )


def _clip(text: str, limit: int = 2000) -> str:
    """``text`` cut to ``limit`` characters (an error's text goes into a refusal)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


def server_tool(server: ToolServer, listed: ServerTool) -> Tool:
    """The ``Tool`` a seat's model is offered for ``listed`` of ``server``: named
    ``wire_name(server, tool)``, with the server's description and input schema. Its call
    goes through this process's session (``seats.mcp_client.pool``) and answers
    ``{"text": ..., "structuredContent": {...}}``; an ``isError`` result is the refusal
    ``tool-error``; a server that cannot be reached or dies during the call
    ``tool-server-unavailable``, one past the time limit ``tool-timeout``, an answer longer
    than ``WORKFORCE_TOOL_RESULT_CHARS`` characters ``tool-result-too-large`` (one far
    longer is read no further: ``seats.mcp_client.answer_limit``). Each call is
    ledgered (``tool.called`` or ``tool.failed``)."""

    def call(ctx: ToolContext, args: dict) -> ToolResult:
        try:
            # At most what is left of the turn: a hanging server must not carry the turn
            # past its deadline (and the task cluster's timeout).
            limit = ctx.seconds_left(call_timeout())
            if limit <= 0:
                raise ToolServerError("tool-timeout", "the turn has no time left for it")
            outcome = pool().call_tool(server, listed.name, args, timeout=limit)
        except ToolServerError as exc:
            _ledger(ctx, ToolCallEntry.Event.FAILED, server.name, listed.name, reason=exc.code)
            return refuse(exc.code, f"{server.name}/{listed.name}: {exc}; nothing came back.")
        _ledger(ctx, ToolCallEntry.Event.CALLED, server.name, listed.name, isError=outcome.is_error)
        try:  # the one input rule (workforce.wire): a server's answer is input too
            check_storable({"text": outcome.text, "structured": outcome.structured}, label="the tool's answer")
        except Refusal as refusal:
            return refuse("tool-error", f"{server.name}/{listed.name} answered what cannot be kept: {refusal.detail}")
        if outcome.is_error:
            return refuse(
                "tool-error", f"{server.name}/{listed.name} answered with an error: {_clip(outcome.text) or '(no text)'}"
            )
        result: dict[str, object] = {"text": outcome.text}
        if outcome.structured is not None:
            result["structuredContent"] = outcome.structured
        size = len(json.dumps(result, ensure_ascii=False))
        limit = settings.WORKFORCE_TOOL_RESULT_CHARS
        if size > limit:  # kept as an item and sent to the model on every later step
            return refuse(
                "tool-result-too-large",
                f"{server.name}/{listed.name} answered {size} characters, more than the {limit} a call may bring back.",
            )
        return result

    schema = listed.input_schema if listed.input_schema.get("type") == "object" else {"type": "object", "properties": {}}
    description = listed.description or f"The {listed.name} tool of the {server.name} tool server."
    return Tool(name=wire_name(server.name, listed.name), description=description, parameters=schema, call=call)


# The ``time.monotonic()`` by which the turn listing its tools must end (``run_turn`` sets
# it around the listing): a server that hangs at its start holds the turn up no longer than
# the turn may last, and its wait counts against the turn.
LISTING_DEADLINE: ContextVar[float | None] = ContextVar("tool_listing_deadline", default=None)


def schema_problem(schema: dict) -> str | None:
    """Why a listed tool's input schema is not a JSON schema (its draft's meta-schema
    refuses it, e.g. a property whose ``type`` is no JSON type), or None."""
    from jsonschema import Draft202012Validator, exceptions, validators

    try:
        validators.validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except exceptions.SchemaError as exc:
        return _clip(exc.message, 200)
    return None


def tool_server_capability(seat: Seat) -> list[Tool]:
    """The agent kind's capability (``workforce.facets.CAPABILITIES``): the tool-server
    tools ``seat``'s ``tools:`` grants, in grant order, each once. A server that cannot
    list its tools now offers none this turn (logged); its grants stand. A listed tool
    whose input schema is not a JSON schema, or whose name is not storable text (a NUL,
    a lone surrogate), is left out (logged)."""
    grants = tool_grants(seat.tools)
    if not grants:
        return []
    servers = declared_servers()
    tools: list[Tool] = []
    seen: set[str] = set()
    for server_name, granted in grants:
        server = servers.get(server_name)
        if server is None:
            continue
        until = LISTING_DEADLINE.get()
        limit = call_timeout() if until is None else min(call_timeout(), until - time.monotonic())
        if limit <= 0:
            logger.warning("seat %s: the tool server %s offers no tools this turn: no time was left", seat.seat_id, server_name)
            continue
        try:
            listed = pool().list_tools(server, timeout=limit)
        except ToolServerError as exc:
            logger.warning("seat %s: the tool server %s offers no tools this turn: %s", seat.seat_id, server_name, exc)
            continue
        for entry in listed:
            if granted not in (GRANT_ALL, entry.name):
                continue
            unkeepable = text_problem(entry.name)
            if unkeepable is not None:
                # Its name is ledgered with each call, and no store keeps it (a NUL, a
                # lone surrogate: workforce.wire); the model could not be told it either.
                logger.warning(
                    "seat %s: the tool %s/%r is not offered: its name %s", seat.seat_id, server_name, entry.name, unkeepable
                )
                continue
            problem = schema_problem(entry.input_schema)
            if problem is not None:
                # A provider refuses the whole call for one bad schema (OpenAI: 400), which
                # would fail every turn of the seat: this tool alone is left out.
                logger.warning(
                    "seat %s: the tool %s/%s is not offered: its input schema is not a JSON schema (%s)",
                    seat.seat_id,
                    server_name,
                    entry.name,
                    problem,
                )
                continue
            tool = server_tool(server, entry)
            if tool.name not in seen:
                seen.add(tool.name)
                tools.append(tool)
    return tools


def refuse_unoffered(name: str, ctx: ToolContext, seat: object = None) -> ToolResult:
    """The answer to a call of a tool the turn did not offer: ``tool-not-granted``,
    ledgered ``run.denied``, when ``name`` is a declared server's tool (``<server>__...``)
    the seat was not granted; when it was granted (by name or ``<server>/*``),
    ``tool-not-offered`` if its server's session holds its list of tools (it does not
    list that one, or the turn left it out) and
    ``tool-server-unavailable`` if it could not; else ``tool-not-offered``. Only a
    denial is ledgered. ``seat`` is the calling ``Seat`` (whose ``tools:`` holds its
    grants)."""
    grants = tool_grants(seat.tools) if isinstance(seat, Seat) else []
    for server in declared_servers().values():
        prefix = wire_name(server.name, "")
        if name.startswith(prefix) and len(name) > len(prefix):
            tool = name[len(prefix) :]
            if any(s == server.name and (t == GRANT_ALL or wire_name(s, t) == name) for s, t in grants):
                listed = pool().listed_tools(server)
                if listed is None:  # the server could not list its tools when the turn began
                    return refuse(
                        "tool-server-unavailable", f"{server.name}/{tool}: the tool server {server.name} cannot be reached now."
                    )
                # It answered: it just offers no such tool, or one left out of the turn
                # (tool_server_capability: its schema or name cannot be offered).
                if any(wire_name(server.name, entry.name) == name for entry in listed):
                    why = f"the tool server {server.name} lists it, but it was left out of this turn"
                else:
                    why = f"the tool server {server.name} does not offer it"
                return refuse("tool-not-offered", f"{server.name}/{tool} is not one of your tools: {why}; nothing was called.")
            _ledger(ctx, ToolCallEntry.Event.DENIED, server.name, tool, reason="tool-not-granted")
            return refuse("tool-not-granted", f"{server.name}/{tool} is not one of your tools; nothing was called.")
    return refuse("tool-not-offered", f'"{name}" is not one of your tools.')
