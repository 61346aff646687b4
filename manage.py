#!/usr/bin/env python
"""Django's command-line utility for the workforce server."""

import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except Exception as exc:
        # A database that does not exist, does not answer or is not migrated is one line
        # saying what to do, not a traceback (workforce_project.database_errors).
        from workforce_project.database_errors import explain_database_error

        message = explain_database_error(exc)
        if message is None:
            raise
        sys.stderr.write(f"{message}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
