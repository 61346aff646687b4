"""The ``coordinator`` kind (spec 004): a worker like any other, run by the coordinator
flow, that hands each post to its delegates.

Public actions (a client's, over ``POST /api/flows/coordinator/{session}/actions/...``):

- ``run`` ``{message}``: a post (``coordinators.services.do_post``);
- ``addDelegate`` ``{worker, note?}``, ``removeDelegate`` ``{worker}``, ``setFallback``
  ``{worker}`` (``null`` clears it), ``listDelegates`` ``{}``: each answers
  ``{delegates, fallback, max: 25, filingSessionId}``.

Internal actions (dispatch only): ``onDelegateReport`` (a delegate's turn ended) and
``closeRound`` (a round's deadline passed).

Facets: ``worker`` (hiring accepts ``flow: coordinator``), ``tools`` (the catalog a
coordinator's ``tools:`` is read against), ``coordinator`` (the ``CoordinatorSetup``),
``validate_worker`` (what hiring refuses in a coordinator's file) and ``state_fields``
(the session state only this flow writes).
"""

from __future__ import annotations

from rest_framework import serializers

from workforce.facets import (
    CLIENT_CREATES_SESSIONS,
    COORDINATOR,
    OPEN_SESSION,
    PRIVATE_SESSIONS,
    STATE_FIELDS,
    TOOL_CATALOG,
    VALIDATE_WORKER,
    WORKER,
)
from workforce.flows import Action, ClientTextField, FlowKind, StrictCharField, StrictIntegerField, registry
from workforce.sessions import ActionContext

from .config import configure_from_settings, coordinator_worker_problems
from .constants import (
    ADD_DELEGATE,
    CLOSE_ROUND,
    KIND,
    LIST_DELEGATES,
    REMOVE_DELEGATE,
    REPORT,
    RESERVED_STATE_FIELDS,
    RUN,
    SET_FALLBACK,
)
from .delegates import do_change_delegates
from .services import do_close_round, do_ensure_worker_session, do_post, do_report


class RunInput(serializers.Serializer):
    """``{message}``: what the person says to the coordinator."""

    message = ClientTextField()


class WorkerInput(serializers.Serializer):
    """``{worker}``: a worker id."""

    worker = StrictCharField()


class AddDelegateInput(serializers.Serializer):
    """``{worker, note?}``: best fit picks by the note before the worker's description."""

    worker = StrictCharField()
    note = ClientTextField(required=False, allow_blank=True, max_length=2_000)


class SetFallbackInput(serializers.Serializer):
    """``{worker}``: a delegate, or ``null`` to clear the fallback."""

    worker = StrictCharField(allow_null=True)


class ReportInput(serializers.Serializer):
    """Internal ``onDelegateReport``: ``{deliveryId, outcome, text?, error?}``."""

    deliveryId = StrictIntegerField(min_value=1)
    outcome = serializers.ChoiceField(choices=["answered", "failed", "cancelled"])
    text = StrictCharField(required=False)
    error = serializers.DictField(required=False)


class CloseRoundInput(serializers.Serializer):
    """Internal ``closeRound``: ``{roundId}``."""

    roundId = StrictIntegerField(min_value=1)


def run(ctx: ActionContext, data: dict) -> dict:
    """A post to the coordinator (see ``coordinators.services.do_post``)."""
    return do_post(ctx, data["message"])


def _change(change: str):
    def handler(ctx: ActionContext, data: dict) -> dict:
        return do_change_delegates(ctx.org, ctx.session, ctx.user_id, change, data)

    handler.__doc__ = f"The {change} delegate action (coordinators.delegates.do_change_delegates)."
    return handler


def on_delegate_report(ctx: ActionContext, data: dict) -> dict:
    """A delegate's turn ended (see ``coordinators.services.do_report``)."""
    return do_report(ctx, data)


def close_round(ctx: ActionContext, data: dict) -> dict:
    """A round's deadline passed (see ``coordinators.services.do_close_round``)."""
    return do_close_round(ctx, data)


def build_coordinator_kind() -> FlowKind:
    """The coordinator kind, registered once per process (configured by
    ``coordinators.config.configure_coordinator``)."""
    flow = FlowKind(
        kind=KIND,
        actions={
            RUN: Action(RUN, run, RunInput, description="Send the coordinator a post.", adds_work=True),
            ADD_DELEGATE: Action(ADD_DELEGATE, _change("add"), AddDelegateInput, description="Add a delegate."),
            REMOVE_DELEGATE: Action(REMOVE_DELEGATE, _change("remove"), WorkerInput, description="Remove a delegate."),
            SET_FALLBACK: Action(SET_FALLBACK, _change("fallback"), SetFallbackInput, description="Set or clear the fallback."),
            LIST_DELEGATES: Action(LIST_DELEGATES, _change("list"), None, description="List the delegates."),
        },
        internal_actions={
            REPORT: Action(REPORT, on_delegate_report, ReportInput, description="A delegate's turn ended."),
            CLOSE_ROUND: Action(CLOSE_ROUND, close_round, CloseRoundInput, description="A round's deadline passed."),
        },
    )
    WORKER.set(flow, True)
    TOOL_CATALOG.set(flow, {})
    COORDINATOR.set(flow, None)
    VALIDATE_WORKER.set(flow, coordinator_worker_problems)
    STATE_FIELDS.set(flow, RESERVED_STATE_FIELDS)
    # A conversation is its owner's: another user's call answers 404 and leaves nothing
    # in it (workforce.sessions.do_run_action).
    PRIVATE_SESSIONS.set(flow, True)
    # Conversations are opened by POST /api/workers/<worker>/sessions, never by naming
    # an id in an action call.
    CLIENT_CREATES_SESSIONS.set(flow, False)
    OPEN_SESSION.set(flow, do_ensure_worker_session)  # the pages open conversations through it
    return flow


def register() -> FlowKind:
    """Register the kind and configure it from the settings."""
    flow = registry.register(build_coordinator_kind())
    try:
        configure_from_settings(KIND)
    except Exception:  # a bad setting: the system check names it (coordinators.E001)
        pass
    return flow
