"""The flow-kind registry: each kind names its public and internal actions.

A *public* action is reachable by a client (HTTP) and by dispatch from another flow; an
*internal* action only by dispatch (the spec's "internal entry ... never a client").
Apps register their kinds in ``AppConfig.ready()``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from rest_framework import serializers
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from .refusals import Refusal
from .wire import name_list

if TYPE_CHECKING:  # pragma: no cover
    from .sessions import ActionContext

Handler = Callable[["ActionContext", dict], Any]


@dataclass(frozen=True)
class Action:
    """One action of a kind.

    Args:
        name: the action's wire name (``post``, ``read``, ``fileTask``).
        handler: ``handler(ctx, data) -> JSON-able output or None``; raises Refusal.
        input_serializer: a DRF Serializer class; keys it does not declare are refused
            (``invalid-input``). ``None`` means the action takes only ``{}``.
        allow_extra: keys that are accepted and ignored (``read``'s ``after`` cursor).
        locks_session: the handler serializes on the session's row lock
            (``ActionContext.lock_session``): ``do_run_action`` then reads the session
            ``FOR UPDATE`` in the read it makes anyway, and ``lock_session`` returns
            that row without reading it again (docs/architecture.md "A post end to end").
        adds_work: a client's call wakes work the task cluster runs (a post's
            deliveries): ``do_run_action`` refuses it with ``backlog-full`` while the
            backlog is past ``WORKFORCE_BACKLOG_LIMIT`` (``workforce.backlog``), before
            anything is recorded. Internal calls (a seat's own post) are never refused.
    """

    name: str
    handler: Handler
    input_serializer: type[serializers.Serializer] | None = None
    allow_extra: frozenset[str] = frozenset()
    description: str = ""
    locks_session: bool = False
    adds_work: bool = False

    @cached_property
    def declared_keys(self) -> frozenset[str]:
        """The input keys the schema declares (read once: a serializer is not built per
        call just to list its fields)."""
        return frozenset(self.input_serializer().fields) if self.input_serializer else frozenset()

    def validate(self, data: Any) -> dict:
        """Check ``data`` against the input schema; return the cleaned dict.

        Raises:
            Refusal("invalid-input"): not an object, an undeclared key, or a field error.
        """
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise Refusal("invalid-input", f"{self.name} takes a JSON object, not {type(data).__name__}.")
        declared = self.declared_keys
        extra = sorted(set(data) - declared - set(self.allow_extra))
        if extra:
            allowed = ", ".join(sorted(declared)) or "nothing"
            raise Refusal("invalid-input", f"{self.name} does not take {name_list(extra)}; it takes {allowed}.")
        if not self.input_serializer:
            return {}
        try:
            validated = _validator(self.input_serializer).run_validation({k: v for k, v in data.items() if k in declared})
        except serializers.ValidationError as exc:
            raise Refusal("invalid-input", format_serializer_errors(exc.detail)) from None
        return dict(validated)


_VALIDATORS: dict[type[serializers.Serializer], serializers.Serializer] = {}


def _validator(input_serializer: type[serializers.Serializer]) -> serializers.Serializer:
    # One unbound instance per input serializer, reused: what ``is_valid`` runs is
    # ``run_validation``, and building a serializer per call deep-copies its declared
    # fields (a sixth of a post's CPU). Input serializers keep no per-call state (no
    # ``initial_data``, ``instance`` or ``context`` in their validation). Fields read
    # settings when built (``WORKFORCE_MAX_TEXT_CHARS``): a changed setting drops them.
    validator = _VALIDATORS.get(input_serializer)
    if validator is None:
        validator = _VALIDATORS[input_serializer] = _build_validator(input_serializer)
    return validator


@receiver(setting_changed)
def _drop_validators(**kwargs) -> None:
    _VALIDATORS.clear()


def _build_validator(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    validator = serializer_class()
    for declared in validator.fields.values():
        for text in (declared, getattr(declared, "child", None)):
            if isinstance(text, serializers.CharField):
                text.validators = [
                    _SurrogatesRefused() if isinstance(v, ProhibitSurrogateCharactersValidator) else v for v in text.validators
                ]
    return validator


_SURROGATE = re.compile("[\ud800-\udfff]")


class _SurrogatesRefused(ProhibitSurrogateCharactersValidator):
    """DRF's refusal of surrogate characters in a text field, with its message and code,
    by one regular-expression search instead of a Python loop over every character (a
    post's body is checked on every post)."""

    def __call__(self, value):
        found = _SURROGATE.search(str(value))
        if found:
            raise serializers.ValidationError(self.message.format(code_point=ord(found.group())), code=self.code)


@dataclass(frozen=True)
class ActionFamily:
    """Public actions whose names are made at run time (a kind's ``resolve``), documented
    as one template in the OpenAPI schema (docs/architecture.md "The API's schema").

    Args:
        template: the action name with one ``{parameter}`` in it, e.g.
            ``addTask_{boardSuffix}``.
        parameter: the name of the template's variable (``boardSuffix``).
        parameter_description: what the variable stands for, for people.
        description: what the actions do.
        input_schema: the JSON Schema of the action's input object; ``"type": [t,
            "null"]`` is allowed (the schema writes it as OpenAPI 3.0's ``nullable``).
    """

    template: str
    parameter: str
    parameter_description: str
    description: str
    input_schema: dict


def format_serializer_errors(errors: Any, prefix: str = "") -> str:
    """Flatten DRF's nested error dict into one sentence: ``body: This field may not be blank.``"""
    parts: list[str] = []
    if isinstance(errors, dict):
        for key, value in errors.items():
            name = f"{prefix}{key}" if key != "non_field_errors" else prefix.rstrip(".")
            parts.append(format_serializer_errors(value, f"{name}."))
    elif isinstance(errors, list):
        texts = [format_serializer_errors(e, prefix) if isinstance(e, (dict, list)) else str(e) for e in errors]
        label = prefix.rstrip(".")
        return (
            f"{label}: {' '.join(texts)}" if label and all(not isinstance(e, (dict, list)) for e in errors) else " ".join(texts)
        )
    else:
        return f"{prefix.rstrip('.')}: {errors}"
    return "; ".join(p for p in parts if p)


@dataclass
class FlowKind:
    """A registered kind: its name, public actions, internal actions and extra facets
    other apps look up (``facets["hears_posts"]`` and the like)."""

    kind: str
    actions: dict[str, Action] = field(default_factory=dict)
    internal_actions: dict[str, Action] = field(default_factory=dict)
    facets: dict[str, Any] = field(default_factory=dict)
    # Actions whose names are not known when the kind is built (a mailbox's per-board
    # task actions): ``resolve(name, internal) -> Action | None``, asked after the
    # static tables. The action it returns still decides, per session, whether to run.
    resolve: Callable[[str, bool], Action | None] | None = None

    def find(self, action: str, *, internal: bool) -> Action | None:
        """The action called ``action``; internal ones only when ``internal`` (dispatch);
        then whatever ``resolve`` answers for names outside the static tables."""
        if action in self.actions:
            return self.actions[action]
        if internal and action in self.internal_actions:
            return self.internal_actions[action]
        if self.resolve is not None:
            return self.resolve(action, internal)
        return None


class FlowRegistry:
    """Kind name -> FlowKind. One instance per kind, never one per session."""

    def __init__(self) -> None:
        self._kinds: dict[str, FlowKind] = {}
        self._on_register: dict[str, list[Callable[[FlowKind], None]]] = {}

    def register(self, flow: FlowKind) -> FlowKind:
        """Register (or replace) ``flow`` under its kind name and return it, then run every
        ``when_registered`` callback for that name on it (in the order they were added)."""
        self._kinds[flow.kind] = flow
        for callback in self._on_register.get(flow.kind, ()):
            callback(flow)
        return flow

    def when_registered(self, kind: str, callback: Callable[[FlowKind], None]) -> None:
        """Run ``callback(flow)`` on kind ``kind``: now if it is registered, and again each
        time it is registered (a kind built again keeps what other apps add to it).

        An app that adds to another app's kind (mail's tools on the agent kind) calls this
        from its ``ready()``, so the order of ``INSTALLED_APPS`` does not matter. The
        callback must be safe to run more than once on one kind (a facet set, not appended
        twice).
        """
        self._on_register.setdefault(kind, []).append(callback)
        flow = self._kinds.get(kind)
        if flow is not None:
            callback(flow)

    def unregister(self, kind: str) -> None:
        self._kinds.pop(kind, None)

    def get(self, kind: str) -> FlowKind | None:
        return self._kinds.get(kind)

    def require(self, kind: str) -> FlowKind:
        """The kind, or Refusal("flow-not-found")."""
        flow = self._kinds.get(kind)
        if flow is None:
            raise Refusal("flow-not-found", f'No flow kind "{kind}" is registered.')
        return flow

    def kinds(self) -> list[str]:
        return sorted(self._kinds)


registry = FlowRegistry()


class StrictCharField(serializers.CharField):
    """A CharField that refuses non-strings (DRF's converts ``42`` to ``"42"``) and keeps
    the text verbatim (no whitespace trimming); blank means whitespace-only too."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        if not self.allow_blank and not data.strip():
            self.fail("blank")
        return super().to_internal_value(data)


class ClientTextField(StrictCharField):
    """Text a client writes (a post's body, a task's goal, a coordinator message): a
    StrictCharField capped at ``WORKFORCE_MAX_TEXT_CHARS`` (32,000 characters) unless
    ``max_length`` says otherwise, since it is copied into requests, items and ledgers.
    Internal actions (a seat's reply, a round's pass-on) take StrictCharField uncapped."""

    def __init__(self, **kwargs: Any) -> None:
        from django.conf import settings

        kwargs.setdefault("max_length", settings.WORKFORCE_MAX_TEXT_CHARS)
        super().__init__(**kwargs)


INT32_MAX = 2**31 - 1


class StrictIntegerField(serializers.IntegerField):
    """An IntegerField that refuses booleans, strings and floats (DRF's accepts ``"5"``,
    ``5.0`` and ``True``); ``min_value``/``max_value`` work as usual and default to a
    32-bit range, so a number the database can't hold is ``invalid-input`` on
    PostgreSQL and SQLite alike."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", -INT32_MAX)
        kwargs.setdefault("max_value", INT32_MAX)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)
