"""What every process of the server leaves out of memory (docs/running.md "Memory").

Django REST framework's ``rest_framework.compat`` imports, whenever they are installed,
``requests`` (for its test client), ``pygments`` and ``markdown`` (the browsable API's code
highlighting and descriptions), ``yaml`` (its own OpenAPI renderer) and
``django.contrib.postgres`` (which imports psycopg, on SQLite too). This project uses none
of those through DRF: its schema is drf-spectacular's, which imports ``yaml`` itself when
it renders one, and its models have no PostgreSQL-only fields. Imported by every process
that loads DRF (the web process, the cluster and its workers, through the apps' flows),
they cost about 6 MiB of RSS each, and psycopg 8 more on SQLite.
"""

from __future__ import annotations

import sys

# The optional packages rest_framework.compat would import; each stays importable by
# whoever needs it later (the tree reader imports yaml, the PostgreSQL backend psycopg).
DRF_EXTRAS = ("requests", "pygments", "markdown", "yaml", "django.contrib.postgres")


def import_drf_compat_without_extras() -> None:
    """Import ``rest_framework.compat`` with ``DRF_EXTRAS`` hidden from it (it then
    takes them as not installed), unless it is already imported; call it before anything
    imports DRF."""
    if "rest_framework.compat" in sys.modules:
        return
    hidden = [name for name in DRF_EXTRAS if name not in sys.modules]
    for name in hidden:
        # None in sys.modules: the import system raises ImportError, as if not installed.
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import rest_framework.compat  # noqa: F401
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
