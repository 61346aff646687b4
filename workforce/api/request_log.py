"""How ``django.request`` logs answers: Django logs every 4xx at WARNING, so a client's
bad input would read like an operator's problem. A refusal is the contract working; it
is logged at INFO, and 5xx stays at ERROR."""

from __future__ import annotations

import logging


class ClientErrorsAtInfo(logging.Filter):
    """A ``logging.Filter`` for the ``django.request`` logger: a record of a 4xx answer
    (its ``status_code`` below 500) is lowered to INFO; everything else passes as is."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500 and record.levelno == logging.WARNING:
            record.levelno = logging.INFO
            record.levelname = logging.getLevelName(logging.INFO)
        return True
