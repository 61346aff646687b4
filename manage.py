#!/usr/bin/env python
"""Django's command-line utility for the workforce server."""

import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A setting read from the environment that is not what it must be names the
        # variable and what to write (workforce_project.settings): one line, not a traceback.
        if not str(exc).startswith(("WORKFORCE_", "DJANGO_", "DATABASE_URL", "OPENAI_")):
            raise
        sys.stderr.write(f"setting: {exc}\n")
        sys.exit(1)
    except Exception as exc:
        # A database that does not exist, does not answer or is not migrated is one line
        # saying what to do, not a traceback (workforce_project.database_errors).
        from workforce_project.database_errors import explain_database_error

        message = explain_database_error(exc, command=sys.argv[1] if len(sys.argv) > 1 else None)
        if message is None:
            raise
        sys.stderr.write(f"{message}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
