"""Fixtures for routed mailboxes (spec "Testing a routed mailbox").

``routed(...)`` writes a tree with a routed ``support.desk`` (devices, accounts, general;
fallback general), hires its workers, builds the mailbox kind with a notify block and a
route (``route_by_purpose(seats, model=...)``) before binding, opens the mailboxes and
serves the roster. Seats' turns and the route's evaluator are scripted with
``create_mock_model_resolver(scripts, evaluators={"mailbox-route": route})``.
django-q2 runs ``sync`` (settings_test): ``post`` runs the route task and the chosen
member's delivery when the post commits.
"""

from __future__ import annotations

import pytest

from mailboxes.models import Line, Route
from mailboxes.notify import configure_notify, wake_member_seats
from mailboxes.routing import configure_route, route_by_purpose
from tests.conftest import MEMBER, OWNER, hire_tree, mailbox_md, open_mailboxes, wired_by_hand, write_tree  # noqa: F401
from tests.seats.conftest import worker_md
from workforce.llm import set_model_resolver
from workforce.models import Item
from workforce.sessions import do_run_action
from workforce.testing import create_mock_model_resolver, mock_evaluation_model

DESK = "support.desk"
DEVICES, ACCOUNTS, GENERAL = "support.devices", "support.accounts", "support.general"
MEMBERS = (DEVICES, ACCOUNTS, GENERAL)

DEVICES_MD = worker_md(
    "Phones, laptops, printers and wifi; anything that won't turn on, charge or connect.", model="embedded/echo"
)
ACCOUNTS_MD = worker_md("Sign-in, passwords, billing, refunds and account settings.", model="embedded/echo")
GENERAL_MD = worker_md("Anything that fits none of the other specialists.", model="embedded/echo")


def desk_md(members=MEMBERS, routing: str | None = "\n  fallback: support.general", **extra) -> str:
    keys = dict(extra)
    if routing is not None:
        keys["routing"] = routing
    return mailbox_md("Ask the support team anything.", members=members, body="Answer the customer.", **keys)


def routed_tree(**overrides) -> dict[str, str]:
    """The routed desk's files; ``overrides`` replaces files by relative path (a value
    of None removes the file)."""
    files = {
        "teams/support/mailboxes/desk/MAILBOX.md": desk_md(),
        "teams/support/workers/devices/WORKER.md": DEVICES_MD,
        "teams/support/workers/accounts/WORKER.md": ACCOUNTS_MD,
        "teams/support/workers/general/WORKER.md": GENERAL_MD,
    }
    for path, text in overrides.items():
        if text is None:
            files.pop(path, None)
        else:
            files[path] = text
    return files


def ok(call):
    """A seat's model that always answers "ok"."""
    return "ok"


def printer_route():
    """The spec's example: posts about a printer go to devices, everything else to accounts."""

    def answers(call):
        post = call.state["post"]
        member = DEVICES if "printer" in post["text"] else ACCOUNTS
        return {"member": {"type": "choice", "choice": member}}

    return mock_evaluation_model(answers=answers)


@pytest.fixture(autouse=True)
def routing_runtime():
    """This process counts as booted (kinds are wired by hand); the model resolver is
    put back after each test (the mailbox kind's facets are by tests/conftest.py)."""
    with wired_by_hand():
        yield


@pytest.fixture
def routed(make_tree, org):
    """``routed(files=None, *, route=None, scripts=None, model=None, extra_seats=()) ->
    (seats, resolver)``: wire and open a routed tree. ``route`` is the mock evaluator
    (default ``printer_route()``); ``model`` overrides the route's model (an id or an
    evaluation model); ``scripts`` the seats' chat scripts by block (default: embedded
    echo answers, through ``"*"`` falling back to echo)."""

    def _wire(files=None, *, route=None, scripts=None, model=None, extra_seats=(), seats_filter=None):
        root = make_tree(routed_tree() if files is None else files)
        seats = hire_tree(root)
        if seats_filter is not None:
            seats = [s for s in seats if seats_filter(s)]
        seats = [*seats, *extra_seats]
        route = printer_route() if route is None else route
        resolver = create_mock_model_resolver(scripts or {}, evaluators={"mailbox-route": route})
        if not scripts:
            from workforce.llm import EchoModel

            resolver.scripts["*"] = lambda call: EchoModel().complete(call)
        set_model_resolver(resolver)
        configure_notify("mailbox", wake_member_seats(seats))
        configure_route("mailbox", route_by_purpose(seats, model=route if model is None else model))
        open_mailboxes(root, org)
        return seats, resolver

    return _wire


@pytest.fixture
def post(org, django_capture_on_commit_callbacks):
    """``post(body, mailbox=DESK, author=None, user_id=MEMBER, run=True) -> Request``: a
    client post, committed; with ``run`` its route task and the member's delivery run."""

    def _post(body: str, *, mailbox: str = DESK, author: str | None = None, user_id: str = MEMBER, run: bool = True):
        payload = {"body": body}
        if author is not None:
            payload["author"] = author
        with django_capture_on_commit_callbacks(execute=run):
            return do_run_action(org=org, kind="mailbox", session_id=mailbox, action="post", input=payload, user_id=user_id)

    return _post


def route_items(mailbox: str = DESK) -> list[dict]:
    """The mailbox's ``mailbox-route`` items' data, in order."""
    return [i.data for i in Item.objects.filter(session__session_id=mailbox, component="mailbox-route").order_by("seq")]


def lines(mailbox: str = DESK) -> list[Line]:
    return list(Line.objects.filter(session__session_id=mailbox).order_by("seq"))


def route_of(body: str) -> Route:
    return Route.objects.get(post__body=body)
