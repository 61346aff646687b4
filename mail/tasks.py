"""django-q2 entry points of mail: ids in, one service call."""

from __future__ import annotations

from workforce.runtime import boot_for_task

from .chat import do_run_chat
from .runs import do_run_mail


def run_mail(run_pk: int) -> str:
    """Run mail run ``run_pk`` (``mail.runs.do_run_mail``)."""
    boot_for_task()
    return do_run_mail(run_pk)


def run_chat(run_pk: int) -> str:
    """Run chat turn ``run_pk`` (``mail.chat.do_run_chat``)."""
    boot_for_task()
    return do_run_chat(run_pk)
