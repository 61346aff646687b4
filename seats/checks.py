"""``manage.py check`` validates the tree's workers too (docs/running.md "Commands"): a worker that
fails to load or cannot be hired stops ``serve`` at start-up, every problem named; and
the turn deadline must fit inside the task cluster's ``timeout``."""

from __future__ import annotations

from django.conf import settings
from django.core import checks

from workforce.facets import CAPABILITIES, TOOL_CATALOG
from workforce.flows import registry
from workforce.llm.openai_provider import MAX_TOOL_NAME, TOOL_NAME_PATTERN, tool_alias
from workforce.tree import UNREADABLE_SLOT, WorkforceRootError

from .hiring import _seat_fields, hire_problems
from .models import Seat
from .tool_servers import TOOL_SERVERS_FILE, tool_server_capability
from .turns import offered_tools
from .workers import read_workforce


def _reported_by_mailboxes(error) -> bool:
    # A broken teams/ or team folder is named by the mailbox tree check already.
    parts = error.path.split("/")
    return error.kind == UNREADABLE_SLOT and parts[0] == "teams" and len(parts) <= 2


@checks.register("workforce")
def check_workers(app_configs=None, **kwargs):
    """Every worker problem in ``WORKFORCE_ROOT``: load errors (seats.E001, the tool
    servers' file's included) and workers that cannot be hired (seats.E002; a tool
    server is not asked for its tools here, only at hire, so a check starts no server)."""
    root = settings.WORKFORCE_ROOT
    try:
        workers, errors = read_workforce(root)
    except WorkforceRootError:
        return []  # the mailbox tree check names the root
    found = [
        checks.Error(
            f"{e.path}: [{e.kind}] {e.message}",
            hint=f"Fix {e.path}; nothing was hired."
            if e.path == TOOL_SERVERS_FILE
            else "Fix the worker files named; nothing was hired.",
            id="seats.E001",
        )
        for e in errors
        if not _reported_by_mailboxes(e)
    ]
    # Each problem names the file to fix (a worker id alone leaves the person to find it).
    files = {w.id: f"{w.path}/WORKER.md" for w in workers}
    found.extend(
        checks.Error(
            f"{files[worker]}: worker {worker}: {message}" if worker in files else f"worker {worker}: {message}", id="seats.E002"
        )
        for worker, message in hire_problems(workers, root=root, reach=False)
    )
    return found


@checks.register("workforce")
def check_turn_timeout(app_configs=None, **kwargs):
    """A seat's turn (``WORKFORCE_TURN_TIMEOUT``) must end before django-q2 kills its task
    (``Q_CLUSTER["timeout"]``), or a slow model makes every delivery run out of attempts."""
    conf = settings.Q_CLUSTER
    if conf.get("sync"):
        return []
    timeout = conf.get("timeout")
    turn = float(settings.WORKFORCE_TURN_TIMEOUT)
    model = float(settings.WORKFORCE_MODEL_TIMEOUT)
    errors = []
    if isinstance(timeout, (int, float)) and turn >= timeout:
        errors.append(
            checks.Error(
                f"WORKFORCE_TURN_TIMEOUT ({turn:g}s) must be below Q_CLUSTER timeout ({timeout}s).",
                hint="A task still running at the cluster's timeout is killed; keep the turn's deadline inside it.",
                id="seats.E003",
            )
        )
    if model <= 0 or turn <= 0:
        errors.append(checks.Error("WORKFORCE_MODEL_TIMEOUT and WORKFORCE_TURN_TIMEOUT must be positive.", id="seats.E004"))
    return errors


OPENAI_PREFIX = "openai/"


@checks.register("workforce")
def check_model_endpoints(app_configs=None, **kwargs):
    """A model id that cannot work: ``openai/<name>`` with neither ``OPENAI_BASE_URL`` nor
    ``OPENAI_API_KEY`` set, so every call would go to api.openai.com (the openai client's
    default) with no key and fail. One warning per use: each worker's ``model:`` in the
    tree, ``WORKFORCE_MODEL`` (the default of workers that name none),
    ``WORKFORCE_ROUTE_MODEL`` and ``WORKFORCE_COORDINATOR_ROUTE_MODEL``."""
    if settings.OPENAI_BASE_URL or settings.OPENAI_API_KEY:
        return []
    uses = [
        (name, getattr(settings, name, "") or "")
        for name in ("WORKFORCE_MODEL", "WORKFORCE_ROUTE_MODEL", "WORKFORCE_COORDINATOR_ROUTE_MODEL")
    ]
    try:
        workers, _ = read_workforce(settings.WORKFORCE_ROOT)
    except WorkforceRootError:
        workers = []
    uses += [(f"worker {w.id} (model:)", w.model) for w in workers]
    return [
        checks.Warning(
            f"{where}: {model} cannot work: neither OPENAI_BASE_URL nor OPENAI_API_KEY is set, so its calls would "
            "go to api.openai.com with no key and fail.",
            hint="Set OPENAI_BASE_URL (e.g. http://127.0.0.1:11434/v1 for Ollama) and OPENAI_API_KEY, "
            "or use an embedded model (embedded/echo, embedded/lexical).",
            id="seats.W001",
        )
        for where, model in uses
        if isinstance(model, str) and model.startswith(OPENAI_PREFIX)
    ]


@checks.register("workforce")
def check_tool_names(app_configs=None, **kwargs):
    """A seat on an ``openai/<name>`` model offered a tool whose name OpenAI refuses
    (over 64 characters, or characters outside ``[a-zA-Z0-9_-]``): typically a board's
    ``completeTask_<mailbox>_<board>`` for a long board id. Its calls still work (the
    model is sent a stable alias, ``workforce.llm.openai_provider.tool_alias``), but the
    model reads a name unlike the spec's: one warning per seat (seats.W002), naming its
    file and each such tool. Says nothing when the tree does not load (the other
    checks' errors)."""
    try:
        workers, _ = read_workforce(settings.WORKFORCE_ROOT)
    except WorkforceRootError:
        return []
    warnings = []
    for worker in workers:
        seat = Seat(seat_id=worker.id, scope=Seat.Scope.SHARED, **_seat_fields(worker))
        if not seat.model_id(settings.WORKFORCE_MODEL).startswith(OPENAI_PREFIX):
            continue
        flow = registry.get(seat.kind)
        if flow is None:
            continue  # cannot be hired: seats.E002 says why
        # Without the tool servers' tools: listing them starts each server (a check starts
        # none, docs/tools.md), and the model client aliases their names as any other.
        capabilities = [c for c in CAPABILITIES.get(flow) or [] if c is not tool_server_capability]
        try:
            tools = offered_tools(seat, TOOL_CATALOG.get(flow) or {}, capabilities)
        except Exception:  # a capability that cannot read the worker's keys: hiring names it
            continue
        long = [tool.name for tool in tools if not TOOL_NAME_PATTERN.match(tool.name)]
        if not long:
            continue
        names = "; ".join(f"{name} ({len(name)} characters) is sent as {tool_alias(name)}" for name in long)
        warnings.append(
            checks.Warning(
                f"{worker.path}/WORKER.md: seat {worker.id} ({seat.model_id(settings.WORKFORCE_MODEL)}) is offered "
                f"tools OpenAI refuses by name (more than {MAX_TOOL_NAME} characters, or not [a-zA-Z0-9_-]): {names}.",
                hint="The calls work through the alias; to let the model read the real name, shorten the board's "
                "mailbox id or board name.",
                id="seats.W002",
            )
        )
    return warnings
