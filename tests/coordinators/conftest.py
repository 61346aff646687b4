"""Fixtures for coordinators (spec 004).

``desk(...)`` writes a tree with a coordinator ``support.help`` over ``support.devices``,
``support.accounts`` and ``support.general`` (its keys given as arguments), hires the
workers, configures the coordinator flow (delegate flows, route model, round deadline)
and answers a ``Desk`` helper that talks to the coordinator as ``MEMBER`` in the
conversation ``support.help:u_42``. Delegates and the coordinator's own turn are
scripted by block name (their worker ids) with ``create_mock_model_resolver``; best fit's
evaluator by ``coordinator-route`` with ``mock_evaluation_model``. django-q2 runs
``sync`` (settings_test): ``run`` and the actions execute every task they lead to (a
delegate's turn, its report, the next round) before they return.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from coordinators.config import configure_coordinator
from coordinators.constants import COORDINATOR_ROUTE, KIND
from coordinators.models import DelegatedPost, Round
from coordinators.services import do_ensure_worker_session
from tests.conftest import MEMBER, hire_tree, wired_by_hand, write_tree  # noqa: F401
from tests.seats.conftest import worker_md
from workforce.llm import set_model_resolver
from workforce.models import Item, Request
from workforce.sessions import do_run_action
from workforce.testing import MockModelResolver, create_mock_model_resolver, mock_evaluation_model  # noqa: F401

HELP = "support.help"
DEVICES, ACCOUNTS, GENERAL = "support.devices", "support.accounts", "support.general"
DELEGATES = (DEVICES, ACCOUNTS, GENERAL)
CONVERSATION = f"{HELP}:{MEMBER}"

DEVICES_MD = worker_md("Phones, laptops, and anything else that won't turn on or charge.", model="embedded/echo")
ACCOUNTS_MD = worker_md("Sign-in, passwords, billing and refunds.", model="embedded/echo")
GENERAL_MD = worker_md("Anything that fits none of the others.", model="embedded/echo")


def coordinator_md(delegates=DELEGATES, *, body: str = "You are the support desk.", **keys) -> str:
    """A coordinator's WORKER.md: ``flow: coordinator``, ``delegates:`` and ``keys``."""
    lines = ["---", "description: Ask the support team anything.", "flow: coordinator", "model: embedded/echo"]
    if delegates is not None:
        lines.append(f"delegates: [{', '.join(delegates)}]")
    lines += [f"{key}: {value}" for key, value in keys.items()]
    lines += ["---", "", body, ""]
    return "\n".join(lines)


def desk_tree(**coordinator_keys) -> dict[str, str]:
    delegates = coordinator_keys.pop("delegates", DELEGATES)
    return {
        "teams/support/workers/help/WORKER.md": coordinator_md(delegates, **coordinator_keys),
        "teams/support/workers/devices/WORKER.md": DEVICES_MD,
        "teams/support/workers/accounts/WORKER.md": ACCOUNTS_MD,
        "teams/support/workers/general/WORKER.md": GENERAL_MD,
    }


def echo_script(call) -> str:
    """A delegate that answers ``<worker> answered: <the message it was handed>``."""
    turn = next(m["content"] for m in reversed(call.messages) if m["role"] == "user")
    return f"{call.block} answered: {turn}"


@dataclass
class Desk:
    """A hired coordinator and helpers to talk to it (sync cluster)."""

    org: object
    capture: object
    resolver: MockModelResolver
    route: object = None
    session_id: str = CONVERSATION
    user_id: str = MEMBER
    seats: list = field(default_factory=list)

    def act(self, action: str, input=None, *, user_id: str | None = None, session_id: str | None = None) -> Request:
        """Run a coordinator action and every task it leads to."""
        with self.capture(execute=True):
            return do_run_action(
                org=self.org,
                kind=KIND,
                session_id=session_id or self.session_id,
                action=action,
                input=input if input is not None else {},
                user_id=user_id or self.user_id,
            )

    def run(self, message: str, **kw) -> Request:
        return self.act("run", {"message": message}, **kw)

    def items(self, component: str = COORDINATOR_ROUTE) -> list[dict]:
        return [
            i.data
            for i in Item.objects.filter(session__session_id=self.session_id, component=component, type="component").order_by(
                "seq"
            )
        ]

    def records(self, post_id: str | None = None) -> list[dict]:
        return [r for r in self.items() if post_id is None or r["postId"] == post_id]

    def messages(self) -> list[dict]:
        return [i.data for i in Item.objects.filter(session__session_id=self.session_id, type="message").order_by("seq")]

    def answers(self) -> list[tuple[str, str]]:
        """``(agentName, text)`` of every assistant message, in order."""
        return [(m["agentName"], m["text"]) for m in self.messages() if m["role"] == "assistant"]

    def turns(self, worker: str) -> int:
        """How many delegate turns ``worker`` ran (its model calls)."""
        return len(self.resolver.calls_for(worker))

    def deliveries(self, **filters):
        return DelegatedPost.objects.filter(conversation__session__session_id=self.session_id, **filters).order_by("pk")

    def rounds(self):
        return Round.objects.filter(conversation__session__session_id=self.session_id).order_by("pk")


@pytest.fixture(autouse=True)
def coordinator_runtime():
    """This process counts as booted, and the coordinator kind's facets and the model
    resolver are put back after each test."""
    with wired_by_hand(KIND):
        yield


@pytest.fixture
def desk(make_tree, org, django_capture_on_commit_callbacks):
    """``desk(files=None, scripts=None, answers=None, delegate_flows=("agent",),
    deadline_ms=300_000, open_session=True, **coordinator_keys) -> Desk``: the
    conversation ``support.help:u_42`` is opened (``ensure_worker_session``) unless
    ``open_session`` is False."""

    def _desk(
        files=None, *, scripts=None, answers=None, delegate_flows=("agent",), deadline_ms=300_000, open_session=True, **keys
    ) -> Desk:
        seats = hire_tree(make_tree(files or desk_tree(**keys)))
        route = mock_evaluation_model(answers) if answers is not None else None
        resolver = create_mock_model_resolver(
            {"*": echo_script, **(scripts or {})},
            evaluators={"coordinator-route": route} if route is not None else None,
        )
        set_model_resolver(resolver)
        configure_coordinator(delegate_flows=delegate_flows, route_model="mock/evaluation", round_deadline_ms=deadline_ms)
        if open_session:
            do_ensure_worker_session(org, MEMBER, HELP)
        return Desk(org=org, capture=django_capture_on_commit_callbacks, resolver=resolver, route=route, seats=seats)

    return _desk


def choose(worker: str):
    """An evaluator answer picking ``worker``."""
    return {"delegate": {"type": "choice", "choice": worker}}
