"""``manage.py check`` validates the coordinator flow's options (spec 004: "A value that
isn't a positive whole number of milliseconds throws")."""

from __future__ import annotations

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from workforce.facets import COORDINATOR
from workforce.flows import registry

from .config import configure_coordinator, setup_from_settings
from .constants import KIND


@checks.register("workforce")
def check_coordinator_setup(app_configs=None, **kwargs):
    """coordinators.E001: the ``WORKFORCE_COORDINATOR_*`` settings don't make a
    coordinator flow (a round deadline that isn't a positive whole number of
    milliseconds, a delegate flow without the delegated-post entry, no route model)."""
    flow = registry.get(KIND)
    saved = dict(flow.facets) if flow is not None else None
    try:
        configure_coordinator(KIND, **setup_from_settings())
    except ImproperlyConfigured as exc:
        return [checks.Error(f"coordinator: {exc}", id="coordinators.E001")]
    finally:
        if flow is not None and saved is not None and saved.get(COORDINATOR.key) is not None:
            flow.facets.update(saved)
    return []
