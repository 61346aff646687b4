"""Registering a mailbox kind of your own (spec "Registering a kind of your own").

A kind of your own is a flow you write, with its own post and read; registering it makes
``flow: <kind>`` in a MAILBOX.md run on it. The map in the ``WORKFORCE_MAILBOX_KINDS``
setting (``{"my-mailbox": "myapp.flows:build_my_mailbox"}``) is the whole registration
surface; each factory returns a ``workforce.flows.FlowKind``.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from workforce.facets import MAILBOX, NOTIFY, ROUTE
from workforce.flows import FlowKind, registry
from workforce.tree import name_problem

from .binder import BUILTIN_KIND
from .services import OLD_KIND


def register_mailbox_kind(flow: FlowKind) -> FlowKind:
    """Register ``flow`` as a mailbox kind (its facet ``mailbox`` set to True).

    Raises:
        ImproperlyConfigured: the kind is named ``channel`` (the pre-rename name),
            ``mailbox`` (the built-in), or breaks the name rule.
    """
    if flow.kind == OLD_KIND:
        raise ImproperlyConfigured(
            'A mailbox kind can\'t be called "channel": that is the name from before mailboxes were renamed.'
        )
    if flow.kind == BUILTIN_KIND:
        raise ImproperlyConfigured('"mailbox" is the built-in kind; give your kind another name.')
    problem = name_problem(flow.kind)
    if problem:
        raise ImproperlyConfigured(f"mailbox kind: {problem}")
    MAILBOX.set(flow, True)
    flow.facets.setdefault(NOTIFY.key, None)
    flow.facets.setdefault(ROUTE.key, None)
    return registry.register(flow)


def register_configured_kinds(kinds: dict[str, str]) -> list[FlowKind]:
    """Import and register each ``{name: "module:factory" or "module.factory"}``; the
    factory's kind must carry the name it is registered under."""
    flows = []
    for name, path in kinds.items():
        factory = import_string(path.replace(":", "."))
        flow = factory()
        if flow.kind != name:
            raise ImproperlyConfigured(f'WORKFORCE_MAILBOX_KINDS["{name}"] builds a kind named "{flow.kind}".')
        flows.append(register_mailbox_kind(flow))
    return flows
