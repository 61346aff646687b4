"""The installation's secret key when ``DJANGO_SECRET_KEY`` is unset.

Tasks are pickled and signed with ``SECRET_KEY``: a key anyone can read (a constant in
the repository) lets anyone who can write to the broker run code in the cluster. So an
installation with no key set gets its own random key, kept in a file under
``WORKFORCE_VAR_DIR`` that the web server and the task cluster both read.

Imported by ``settings.py`` before Django is set up: standard library only.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

# The constant the repository once shipped as its default key; refused by a system check.
REPOSITORY_KEY = "dev-only-insecure-workforce-secret-key-change-me"


def load_or_create_secret_key(path: Path) -> str:
    """The key kept in ``path``, written there first (50 random URL-safe characters,
    mode 0600) when the file does not exist yet.

    Race-safe: the key is written whole to a private temporary file and published with
    ``os.link``, which fails with ``EEXIST`` when another process got there first (the
    atomic create-exclusive of a whole file); the loser reads the winner's key. So two
    processes starting at once end with the same key, and no reader sees a half-written
    file.

    Raises:
        OSError: the directory cannot be created or the file cannot be read.
        RuntimeError: the file exists but stays empty (someone else's broken file).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        key = secrets.token_urlsafe(50)[:50]
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                handle.write(key + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process published its key first: use that one
        finally:
            tmp.unlink(missing_ok=True)
    for _ in range(50):  # a file created some other way may still be being written
        key = path.read_text(encoding="ascii").strip()
        if key:
            return key
        time.sleep(0.02)
    raise RuntimeError(f"{path} is empty: delete it (a new key is made at the next start) or set DJANGO_SECRET_KEY.")
