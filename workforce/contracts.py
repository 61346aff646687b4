"""Contracts a function states in code, so that breaking one fails at once instead of
reading wrong in a docstring (docs/architecture.md "Contracts in code").

``@in_callers_transaction`` marks a function that writes as part of its caller's
transaction and opens none of its own: a row lock it takes, or a write that must commit
or roll back with the caller's, means nothing in autocommit. Called outside
``transaction.atomic()``, it raises ``NotInCallersTransaction`` before it does anything.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import DEFAULT_DB_ALIAS, transaction

P = ParamSpec("P")
R = TypeVar("R")

# Set on every function the decorator wraps (True), so a test can list them.
MARK = "__in_callers_transaction__"


class NotInCallersTransaction(RuntimeError):
    """A function marked ``@in_callers_transaction`` was called in autocommit (no
    ``transaction.atomic()`` open on its connection). A programming error, never a refusal."""


def in_callers_transaction(func: Callable[P, R]) -> Callable[P, R]:
    """Make ``func`` refuse to run outside its caller's transaction.

    The wrapper checks ``transaction.get_connection().in_atomic_block`` (the default
    database, the only one the server uses) on every call; the check reads a flag on the
    connection, no statement.

    Raises (from the wrapped function):
        NotInCallersTransaction: no transaction is open; the message names the function.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if not transaction.get_connection(DEFAULT_DB_ALIAS).in_atomic_block:
            raise NotInCallersTransaction(
                f"{func.__module__}.{func.__qualname__} runs inside its caller's transaction: "
                "call it inside transaction.atomic(), not in autocommit"
            )
        return func(*args, **kwargs)

    setattr(wrapper, MARK, True)
    return wrapper


def runs_in_callers_transaction(func: object) -> bool:
    """True when ``func`` was marked with ``@in_callers_transaction``."""
    return getattr(func, MARK, False) is True
