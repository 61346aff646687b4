"""Workers on disk: ``WORKER.md`` files (the spec's ``readWorkforce``; 004 "Setting one up").

``read_workforce(root)`` reads ``teams/<team>/workers/<name>/WORKER.md`` (id
``<team>.<name>``) and ``org/workers/<name>/WORKER.md`` (id ``<name>``, an org-level
worker) with the mailbox reader's rules: folder names follow the tree's name rule,
links are never followed, frontmatter is strict YAML. Every problem is collected as a
``LoadError``; only an unreadable root raises.

A worker file declares ``description``, ``flow`` (default ``agent``), ``model``
(``provider/name``; default ``WORKFORCE_MODEL``), ``tools`` (the tools it may call,
e.g. ``[post-to-mailbox, orders/lookup_order, crm/*]``: a built-in tool's name, or a
tool server's tool or whole set, ``seats.tool_servers``), ``instructions`` or a body (the system prompt, one or the
other), the coordinator keys ``delegates``, ``routing``, ``fallback`` and
``rounds``, which the coordinator flow reads, and the board keys ``drains`` and
``boardTools`` (the boards it drains and the boards whose task tools it holds, as
ledger ids; see ``seats.boards``), ``discover: [mailboxes]`` (the seat's tool that
lists the mailboxes it is a member of, from the inventory), and the run keys
``capabilities`` (a mapping from a capability's name to its argument: ``mail.send:
["*"]`` or a list of worker ids, the agents it may mail) and ``run`` (``triggers:``, the
kinds of run that may start it, such as ``[mail]``; spec "How mail becomes work").
Anything else is refused by name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

from workforce.tree import (
    REFUSED_DECLARATION,
    UNREADABLE_SLOT,
    LoadError,
    RecordError,
    did_you_mean,
    folder_name_error,
    is_seat_id,
    linked_folder_error,
    name_problem,
    open_root,
    open_slot,
    read_record_file,
)

from .boards import BOARD_KEYS, check_board_keys
from .tool_servers import read_tool_servers

WORKER_FILE = "WORKER.md"
WORKERS_DIR = "workers"
TEAMS_DIR = "teams"
ORG_DIR = "org"
WORKER_LOAD_FAILED = "worker-load-failed"
DEFAULT_FLOW = "agent"
AGENT_KEYS = ("description", "flow", "model", "tools", "instructions")
COORDINATOR_KEYS = ("delegates", "routing", "fallback", "rounds")
CAPABILITIES_KEY = "capabilities"
RUN_KEY = "run"
RUN_KEYS = (CAPABILITIES_KEY, RUN_KEY)
# The capabilities a WORKER.md can grant, with what each takes.
MAIL_SEND = "mail.send"
RUN_TRIGGERS = "triggers"
# discover: [mailboxes] gives the seat the inventory's list-mailboxes tool (spec
# "Upgrading from channels": a seat's discover: was channels).
DISCOVER_KEYS = ("discover",)
DISCOVERABLE = ("mailboxes",)
WORKER_KEYS = AGENT_KEYS + COORDINATOR_KEYS + DISCOVER_KEYS + RUN_KEYS + BOARD_KEYS


@dataclass
class WorkerManifest:
    """One worker read from disk.

    ``id`` is ``<team>.<name>`` (``support.devices``) or ``<name>`` for an org-level
    worker; ``declared`` the frontmatter as written; ``body`` the text below it;
    ``path`` the folder, relative to the root.
    """

    id: str
    declared: dict
    body: str
    path: str = ""
    team: str | None = None

    @property
    def description(self) -> str:
        return self.declared.get("description") or ""

    @property
    def flow(self) -> str:
        """The kind the worker runs on: ``flow:``, or ``agent``."""
        return self.declared.get("flow") or DEFAULT_FLOW

    @property
    def model(self) -> str:
        """``model:`` as written, or ``""`` (the default model)."""
        return self.declared.get("model") or ""

    @property
    def tools(self) -> list[str]:
        return list(self.declared.get("tools") or [])

    @property
    def instructions(self) -> str:
        """The system prompt: ``instructions:``, or the body."""
        declared = self.declared.get("instructions")
        return declared if isinstance(declared, str) else self.body.strip()

    @property
    def config(self) -> dict:
        """The declared keys other than the agent's own (the coordinator's, and the
        board keys ``drains``/``boardTools`` that ``seats.boards`` reads)."""
        return {k: v for k, v in self.declared.items() if k not in AGENT_KEYS}


class Workforce(NamedTuple):
    """What ``read_workforce`` found: ``workers`` (sorted by id) and ``errors`` (sorted
    by path). Unpacks as ``workers, errors = read_workforce(root)``."""

    workers: list[WorkerManifest]
    errors: list[LoadError]


def read_workforce(root: str | os.PathLike) -> Workforce:
    """Read every worker under ``root``.

    Args:
        root: the workforce tree's root folder.

    Returns:
        ``Workforce(workers, errors)``: one manifest per worker that loaded, and one
        LoadError (kind ``worker-load-failed``, ``refused-declaration`` or
        ``unreadable-slot``; path relative to the root) per folder that should have
        produced a worker and did not, and one per problem of the tree's
        ``org/tool-servers.yaml`` (``seats.tool_servers.read_tool_servers``, kind
        ``tool-servers-load-failed``). A tree with no ``workers/`` folders gives no
        workers and no errors. Loose files are passed over. Treat non-empty errors as
        fatal at start-up.

    Raises:
        workforce.tree.WorkforceRootError: only about ``root`` (unreadable, a link, not
            a folder).
    """
    top = open_root(root)
    workers: list[WorkerManifest] = []
    errors: list[LoadError] = []
    try:
        teams = open_slot(top.get(TEAMS_DIR))
    except RecordError as exc:
        errors.append(exc.error)
        teams = None
    for team in teams or ():
        if team.kind in ("file", "other"):
            continue
        try:
            entries = {entry.name: entry for entry in open_slot(team) or ()}  # (team is present: never None)
            folders = open_slot(entries.get(WORKERS_DIR))
        except RecordError as exc:
            errors.append(exc.error)
            continue
        team_problem = name_problem(team.name)
        for folder in folders or ():
            _read_worker_entry(folder, team.name, team_problem, workers, errors)
    try:
        org = open_slot(top.get(ORG_DIR))
        org_entries = {entry.name: entry for entry in org or ()}
        org_workers = open_slot(org_entries.get(WORKERS_DIR)) if org is not None else None
    except RecordError as exc:
        errors.append(exc.error)
        org_workers = None
    for folder in org_workers or ():
        _read_worker_entry(folder, None, None, workers, errors)
    errors.extend(read_tool_servers(root)[1])  # the tree's tool servers (org/tool-servers.yaml)
    workers.sort(key=lambda w: w.id)
    errors.sort(key=lambda e: (e.path, e.kind))
    return Workforce(workers, errors)


def _read_worker_entry(folder, team: str | None, team_problem: str | None, workers: list, errors: list) -> None:
    if folder.kind == "symlink":
        errors.append(linked_folder_error(folder, kind=WORKER_LOAD_FAILED, noun="Worker"))
        return
    if folder.kind != "dir":
        return  # a loose file in workers/
    misnamed = folder_name_error(
        folder,
        team_problem,
        kind=WORKER_LOAD_FAILED,
        noun="Worker",
        team_note="The workers under it cannot be given an id until it is renamed.",
    )
    if misnamed is not None:
        errors.append(misnamed)
        return
    try:
        record = read_record_file(folder.path, folder.rel, WORKER_FILE, kind=WORKER_LOAD_FAILED)
    except RecordError as exc:
        errors.append(exc.error)
        return
    if record is None:
        errors.append(
            LoadError(
                WORKER_LOAD_FAILED,
                folder.rel,
                f'Worker folder "{folder.name}" has no {WORKER_FILE}. A worker folder declares one worker '
                f"in {folder.rel}/{WORKER_FILE}; add it, or move the folder out of {WORKERS_DIR}/.",
            )
        )
        return
    declared, body = record
    found = check_worker_declared(declared, body, folder.rel, f"{folder.rel}/{WORKER_FILE}")
    if found:
        errors.extend(found)
        return
    worker_id = f"{team}.{folder.name}" if team else folder.name
    workers.append(WorkerManifest(id=worker_id, declared=declared, body=body, path=folder.rel, team=team))


def check_worker_declared(declared: dict, body: str, folder_rel: str, file_rel: str) -> list[LoadError]:
    """What a WORKER.md is checked for when it is read: the closed key list and each
    key's shape. Whether its flow, tools and model exist is checked at hire.

    Returns one LoadError per problem (kind ``refused-declaration`` for a key that is
    not declarable, ``worker-load-failed`` otherwise), all at ``folder_rel``.
    """
    found: list[LoadError] = []

    def bad(message: str, kind: str = WORKER_LOAD_FAILED) -> None:
        found.append(LoadError(kind, folder_rel, f"{file_rel}: {message}"))

    for key in declared:
        if key not in WORKER_KEYS:
            bad(
                f'declares "{key}", which a worker cannot declare{did_you_mean(key, WORKER_KEYS)}; '
                f"the keys are {', '.join(WORKER_KEYS)}",
                REFUSED_DECLARATION,
            )
    if "description" in declared:
        description = declared["description"]
        if not isinstance(description, str) or not description.strip():
            bad("description: must be text (a line saying what the worker does)")
    if "flow" in declared:
        flow = declared["flow"]
        if not isinstance(flow, str) or name_problem(flow):
            bad(f"flow: must be a kind name such as agent or coordinator, not {flow!r}")
    if "model" in declared:
        model = declared["model"]
        if not isinstance(model, str) or "/" not in model or not all(model.partition("/")[::2]):
            bad(f"model: must be provider/name, such as embedded/echo or openai/gpt-4o-mini, not {model!r}")
    if "tools" in declared:
        tools = declared["tools"]
        if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
            bad("tools: must be a list of tool names, such as [post-to-mailbox]")
        elif len(set(tools)) != len(tools):
            bad("tools: names a tool twice")
    if "instructions" in declared:
        instructions = declared["instructions"]
        if not isinstance(instructions, str):
            bad("instructions: must be text")
        elif body.strip():
            bad("a body and instructions: are both given; the system prompt is one or the other")
    if "delegates" in declared:
        delegates = declared["delegates"]
        if not isinstance(delegates, list) or not all(is_seat_id(d) for d in delegates):
            bad("delegates: must be a list of worker ids (team.name or name)")
    for key in ("routing", "fallback"):
        if key in declared and not isinstance(declared[key], str):
            bad(f"{key}: must be text")
    if "rounds" in declared and (not isinstance(declared["rounds"], int) or isinstance(declared["rounds"], bool)):
        bad("rounds: must be a whole number")
    for problem in check_board_keys(declared):
        bad(problem)
    for problem in check_run_keys(declared):
        bad(problem)
    if "discover" in declared:
        discover = declared["discover"]
        if not isinstance(discover, list) or not all(isinstance(d, str) for d in discover):
            bad("discover: must be a list of what the seat finds, such as [mailboxes]")
        else:
            for name in discover:
                if name == "channels":
                    bad(
                        'discover: "channels" is the name from before mailboxes were renamed, and it is not read; write mailboxes'
                    )
                elif name not in DISCOVERABLE:
                    bad(f'discover: "{name}" is not something a seat discovers; the one it can is mailboxes')
    return found


def check_run_keys(declared: dict) -> list[str]:
    """The shape of ``capabilities:`` and ``run:`` (spec "Who an agent can write to",
    "How mail becomes work"): ``capabilities`` maps a capability's name to its
    argument, and ``mail.send`` takes a list of recipients, ``["*"]`` for anyone or
    worker ids; ``run`` takes ``triggers``, a list of run kinds (``mail``, ``chat``).
    Returns one sentence per problem."""
    problems = []
    if CAPABILITIES_KEY in declared:
        capabilities = declared[CAPABILITIES_KEY]
        if not isinstance(capabilities, dict):
            problems.append(f'{CAPABILITIES_KEY}: must be a mapping, such as {{{MAIL_SEND}: ["*"]}}')
        else:
            for name in capabilities:
                if name != MAIL_SEND:
                    problems.append(
                        f'{CAPABILITIES_KEY}: "{name}" is not a capability a worker can declare; the one there is is {MAIL_SEND}'
                    )
            if MAIL_SEND in capabilities:
                recipients = capabilities[MAIL_SEND]
                if (
                    not isinstance(recipients, list)
                    or not recipients
                    or not all(isinstance(r, str) and (r == "*" or is_seat_id(r)) for r in recipients)
                ):
                    problems.append(
                        f'{CAPABILITIES_KEY}: {MAIL_SEND} must be a list of recipients: ["*"] for anyone, or worker ids'
                    )
    if RUN_KEY in declared:
        run = declared[RUN_KEY]
        if not isinstance(run, dict) or set(run) - {RUN_TRIGGERS}:
            problems.append(f"{RUN_KEY}: must be a mapping with {RUN_TRIGGERS}:, such as {{{RUN_TRIGGERS}: [mail]}}")
        elif RUN_TRIGGERS in run:
            triggers = run[RUN_TRIGGERS]
            if not isinstance(triggers, list) or not all(isinstance(t, str) and t and not name_problem(t) for t in triggers):
                problems.append(f"{RUN_KEY}: {RUN_TRIGGERS} must be a list of run kinds, such as [mail, chat]")
    return problems


def worker_capability(config: dict, name: str):
    """What a hired seat's ``config`` (``WorkerManifest.config``) grants for capability
    ``name`` (``mail.send``): its declared argument, or None when it is not declared."""
    capabilities = config.get(CAPABILITIES_KEY)
    return capabilities.get(name) if isinstance(capabilities, dict) else None


def run_triggers(config: dict) -> list[str]:
    """The run kinds a hired seat's ``config`` lets start it (``run: {triggers: [...]}``);
    empty when it declares none, so no mail or chat run is admitted for it."""
    run = config.get(RUN_KEY)
    triggers = run.get(RUN_TRIGGERS) if isinstance(run, dict) else None
    return list(triggers) if isinstance(triggers, list) else []


__all__ = [
    "MAIL_SEND",
    "WORKER_KEYS",
    "check_run_keys",
    "run_triggers",
    "worker_capability",
    "WORKER_LOAD_FAILED",
    "WorkerManifest",
    "Workforce",
    "check_worker_declared",
    "read_workforce",
    "UNREADABLE_SLOT",
]
