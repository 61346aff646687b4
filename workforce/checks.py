"""System checks for the kernel's configuration."""

from __future__ import annotations

from django.conf import settings
from django.core import checks


@checks.register("workforce")
def check_q_cluster(app_configs=None, **kwargs):
    """django-q2 must have ``timeout`` < ``retry`` (or a running task is handed out
    again) and a finite ``max_attempts`` (or a failing task is redelivered forever)."""
    conf = settings.Q_CLUSTER
    errors: list[checks.CheckMessage] = []
    timeout, retry = conf.get("timeout"), conf.get("retry")
    if conf.get("sync"):
        return errors
    if not isinstance(timeout, int) or not isinstance(retry, int) or timeout >= retry:
        errors.append(
            checks.Error(
                f"Q_CLUSTER timeout ({timeout}) must be a whole number of seconds below retry ({retry}).",
                hint="A task still running after `retry` seconds is handed out again; keep timeout < retry.",
                id="workforce.E010",
            )
        )
    attempts = conf.get("max_attempts")
    if not isinstance(attempts, int) or attempts <= 0:
        errors.append(
            checks.Error(
                f"Q_CLUSTER max_attempts ({attempts}) must be a positive whole number.",
                hint="With max_attempts unset a failing task is redelivered forever.",
                id="workforce.E011",
            )
        )
    return errors
