"""Setting a coordinator up (spec 004 "Setting one up"): the flow's options
(``defineCoordinatorFlow``) and what hiring refuses in a coordinator's WORKER.md.

``configure_coordinator(delegate_flows=..., route_model=..., round_deadline_ms=...,
agent=...)`` is the spec's ``defineCoordinatorFlow``; the composition root calls it at
boot with the settings (``WORKFORCE_COORDINATOR_*``). The app registers the kind at
start-up with the same settings, so hiring and ``manage.py check`` know it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from seats.capabilities import AGENT_CATALOG
from workforce.delegation import declares_delegated_post_entry
from workforce.facets import BOARD_ROW_TURN, COORDINATOR, TAKES_TASKS, TOOL_CATALOG
from workforce.flows import registry

from .constants import (
    DEFAULT_POLICY,
    DEFAULT_ROUND_DEADLINE_MS,
    KIND,
    MAX_DELEGATES,
    MAX_ROUNDS,
    POLICIES,
)

TASK_FACETS = (TAKES_TASKS, BOARD_ROW_TURN)


@dataclass(frozen=True)
class CoordinatorSetup:
    """What ``configure_coordinator`` was given.

    Attributes:
        delegate_flows: the kinds a post can be delivered to (each declares the
            delegated-post entry).
        route_model: best fit's evaluator: a model id or an evaluation model object.
        round_deadline_ms: how long a round waits for its answers, in milliseconds.
        catalog: the tools a coordinator's ``tools:`` line is read against.
        capabilities: functions ``(seat) -> [Tool]`` whose tools the coordinator's own
            turn is always offered (besides the five coordinator tools).
    """

    delegate_flows: tuple[str, ...]
    route_model: Any
    round_deadline_ms: int = DEFAULT_ROUND_DEADLINE_MS
    catalog: dict = field(default_factory=dict)
    capabilities: tuple[Callable, ...] = ()


def check_round_deadline_ms(value: Any) -> int:
    """``value`` as a round deadline in milliseconds.

    Raises:
        ImproperlyConfigured: not a positive whole number (booleans, floats, strings and
            numbers below 1 included).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ImproperlyConfigured(f"round_deadline_ms must be a positive whole number of milliseconds, not {value!r}")
    return value


def configure_coordinator(
    kind: str = KIND,
    *,
    delegate_flows: Iterable[str] = ("agent",),
    route_model: Any = None,
    round_deadline_ms: Any = DEFAULT_ROUND_DEADLINE_MS,
    agent: dict | None = None,
) -> CoordinatorSetup:
    """Build coordinator kind ``kind`` with these options (the spec's
    ``defineCoordinatorFlow``) and return them.

    Args:
        delegate_flows: kind names a post can be delivered to. Each must be registered
            and declare the delegated-post entry (``workforce.delegation``). Only these
            take posts: a worker on any other kind is skipped, even when its kind
            declares the entry.
        route_model: best fit's evaluator, a model id the resolver knows
            (``embedded/lexical``, ``openai/<name>``) or an evaluation model. Required,
            even when no coordinator routes by best fit.
        round_deadline_ms: how long a round waits for its answers (default 300,000:
            five minutes); a positive whole number of milliseconds.
        agent: what the coordinator's own turn is built with, as for the agent kind:
            ``{"catalog": {name: Tool}, "capabilities": [fn]}``. Left out, the built-in
            agent's catalog (``post-to-mailbox``).

    Raises:
        ImproperlyConfigured: a delegate flow is unknown or lacks the entry, no route
            model, or a round deadline that isn't a positive whole number.
    """
    flows = tuple(delegate_flows)
    for name in flows:
        if registry.get(name) is None:
            raise ImproperlyConfigured(f'delegate_flows names the kind "{name}", which was not registered')
        if not declares_delegated_post_entry(name):
            raise ImproperlyConfigured(
                f'delegate_flows names the kind "{name}", which does not declare the delegated-post entry '
                '(an internal action "onDelegatedPost"; see workforce.delegation.delegated_post_entry)'
            )
    if route_model is None or route_model == "":
        raise ImproperlyConfigured("route_model is required, even when no coordinator routes by best fit")
    deadline = check_round_deadline_ms(round_deadline_ms)
    agent = dict(agent or {})
    catalog = dict(agent["catalog"]) if "catalog" in agent else dict(AGENT_CATALOG)
    setup = CoordinatorSetup(flows, route_model, deadline, catalog, tuple(agent.get("capabilities") or ()))
    flow = registry.require(kind)
    COORDINATOR.set(flow, setup)
    TOOL_CATALOG.set(flow, dict(catalog))
    return setup


def current_setup(kind: str = KIND) -> CoordinatorSetup:
    """The options coordinator kind ``kind`` runs with in this process.

    Raises:
        ImproperlyConfigured: the kind was never configured.
    """
    flow = registry.get(kind)
    setup = COORDINATOR.get(flow)
    if setup is None:
        raise ImproperlyConfigured(f'the coordinator kind "{kind}" is not configured')
    return setup


def setup_from_settings() -> dict:
    """``configure_coordinator`` keyword arguments from the settings:
    ``WORKFORCE_COORDINATOR_DELEGATE_FLOWS`` (default ``["agent"]``),
    ``WORKFORCE_COORDINATOR_ROUTE_MODEL`` (default ``WORKFORCE_ROUTE_MODEL``, else
    ``embedded/lexical``) and ``WORKFORCE_COORDINATOR_ROUND_DEADLINE_MS`` (default
    300,000)."""
    route_model = settings.WORKFORCE_COORDINATOR_ROUTE_MODEL or settings.WORKFORCE_ROUTE_MODEL or "embedded/lexical"
    return {
        "delegate_flows": tuple(settings.WORKFORCE_COORDINATOR_DELEGATE_FLOWS),
        "route_model": route_model,
        "round_deadline_ms": settings.WORKFORCE_COORDINATOR_ROUND_DEADLINE_MS,
    }


def configure_from_settings(kind: str = KIND) -> CoordinatorSetup:
    """``configure_coordinator(kind, **setup_from_settings())`` (what boot does)."""
    return configure_coordinator(kind, **setup_from_settings())


def takes_tasks(kind: str) -> bool:
    """True when flow ``kind`` takes board tasks: it sets ``takes_tasks`` or can run a
    claimed board row (``board_row_turn``, the agent kind's drain)."""
    flow = registry.get(kind)
    return flow is not None and any(facet.get(flow) for facet in TASK_FACETS)


def takes_posts(kind: str, setup: CoordinatorSetup) -> bool:
    """True when flow ``kind`` takes a delegated post: it is one of ``delegate_flows``
    (and still declares the entry). Any other kind counts as one that can't."""
    return kind in setup.delegate_flows and declares_delegated_post_entry(kind)


# ---------------------------------------------------------------- hiring


def coordinator_worker_problems(worker: Any, workers: Iterable[Any]) -> list[str]:
    """What hiring refuses in a coordinator's WORKER.md, one sentence per problem
    naming it (spec "Setting one up"): ``rounds:`` above 3 (or below 0), a ``routing:``
    it doesn't know, a ``fallback:`` that isn't one of its ``delegates:``, a delegate
    named twice, a delegate that is not a worker declared in the same files, more than
    25 delegates. The kind's ``validate_worker`` facet (``seats.hiring.hire_problems``).

    Args:
        worker: the coordinator's manifest (``declared`` is its frontmatter).
        workers: every manifest being hired with it.
    """
    declared = getattr(worker, "declared", {}) or {}
    problems: list[str] = []
    ids = {w.id for w in workers}
    delegates = declared.get("delegates") or []
    if not isinstance(delegates, list):
        delegates = []
    if len(delegates) > MAX_DELEGATES:
        problems.append(f"delegates: names {len(delegates)} workers; a coordinator can have at most {MAX_DELEGATES}")
    seen: set[str] = set()
    for delegate in delegates:
        if delegate in seen:
            problems.append(f'delegates: names "{delegate}" twice')
            continue
        seen.add(delegate)
        if delegate not in ids:
            problems.append(
                f'delegates: names "{delegate}", which is not a worker declared in your files; '
                "a coordinator declared in your files can name only workers declared in your files"
            )
    routing = declared.get("routing", DEFAULT_POLICY)
    if isinstance(routing, str) and routing not in POLICIES:
        problems.append(
            f'routing: "{routing}" is not a routing the coordinator knows; it is judgment, best-fit, round-robin or everyone'
        )
    fallback = declared.get("fallback")
    if isinstance(fallback, str) and fallback not in delegates:
        listed = ", ".join(delegates) or "none"
        problems.append(f'fallback: "{fallback}" isn\'t one of its delegates: ({listed})')
    rounds = declared.get("rounds", 0)
    if isinstance(rounds, int) and not isinstance(rounds, bool):
        if rounds > MAX_ROUNDS:
            problems.append(f"rounds: {rounds} is above {MAX_ROUNDS}; rounds can be at most {MAX_ROUNDS}")
        elif rounds < 0:
            problems.append(f"rounds: {rounds} is below 0; rounds can be 0 to {MAX_ROUNDS}")
    return problems


def policy_of(seat: Any) -> str:
    """A coordinator seat's ``routing:`` (``judgment`` when it names none)."""
    routing = (getattr(seat, "config", None) or {}).get("routing") or DEFAULT_POLICY
    return routing if routing in POLICIES else DEFAULT_POLICY


def rounds_of(seat: Any) -> int:
    """A coordinator seat's ``rounds:`` (0 when it names none), held within 0..3."""
    rounds = (getattr(seat, "config", None) or {}).get("rounds") or 0
    if isinstance(rounds, bool) or not isinstance(rounds, int):
        return 0
    return max(0, min(rounds, MAX_ROUNDS))
