"""A broker that is down after the commit: the post stands and answers 202, each task
that could not be sent is one warning line, and the sweeper sends it later."""

from __future__ import annotations

import logging
import socket
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.conf import Conf
from rest_framework.test import APIClient

from mailboxes.deliveries import do_sweep_deliveries
from mailboxes.models import Delivery, Line
from tests.conftest import MEMBER
from workforce.leases import requeue_after_seconds


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def redis_down(monkeypatch):
    """django-q2 as a real cluster would run it (not sync) with its Redis broker on a
    loopback port nothing listens on: every enqueue raises ConnectionError."""
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(Conf, "ORM", None)
    monkeypatch.setattr(Conf, "BROKER_CLASS", None)  # settings name workforce.broker only with the ORM broker
    monkeypatch.setattr(Conf, "REDIS", f"redis://127.0.0.1:{closed_port()}/2?socket_connect_timeout=2")


@pytest.mark.django_db(transaction=True)
def test_a_post_with_the_broker_down_answers_202_and_is_swept_later(wired, org, redis_down, monkeypatch, caplog):
    wired()
    client = APIClient()
    with caplog.at_level(logging.WARNING, logger="workforce.dispatch"):
        response = client.post(
            "/api/flows/mailbox/eng.standup/actions/post", {"userId": MEMBER, "input": {"body": "disk full"}}, format="json"
        )
    assert response.status_code == 202, response.content
    assert response.json()["status"] == "completed"
    assert list(Line.objects.filter(session__session_id="eng.standup").values_list("body", flat=True)) == ["disk full"]
    deliveries = list(Delivery.objects.order_by("pk"))
    assert [d.status for d in deliveries] == ["pending", "pending"]  # eng.lead and eng.analyst hear it
    warnings = [r for r in caplog.records if r.name == "workforce.dispatch"]
    assert len(warnings) == len(deliveries) == 2
    for record, delivery in zip(warnings, deliveries, strict=False):
        text = record.getMessage()
        assert record.levelno == logging.WARNING and "\n" not in text
        assert text.startswith(f"task mailboxes.tasks.deliver_post[{delivery.pk}] not enqueued (ConnectionError:")
        assert text.endswith("its sweeper will enqueue it again")

    # The broker is back (here: the sync cluster) and the sweeper finds both deliveries.
    monkeypatch.undo()
    later = timezone.now() + timedelta(seconds=requeue_after_seconds() + 1)
    assert sorted(do_sweep_deliveries(now=later).requeued) == [d.pk for d in deliveries]
    assert list(Delivery.objects.order_by("pk").values_list("status", flat=True)) == ["done", "done"]
    assert Line.objects.filter(session__session_id="eng.standup").count() == 1  # the post was written once


@pytest.mark.django_db(transaction=True)
def test_an_idempotent_retry_after_a_broker_failure_writes_no_second_line(wired, org, redis_down):
    wired()
    client = APIClient()
    body = {"userId": MEMBER, "input": {"body": "disk full"}}
    first = client.post("/api/flows/mailbox/eng.standup/actions/post", body, format="json", headers={"Idempotency-Key": "k1"})
    again = client.post("/api/flows/mailbox/eng.standup/actions/post", body, format="json", headers={"Idempotency-Key": "k1"})
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json()["requestId"] == first.json()["requestId"]
    assert Line.objects.filter(session__session_id="eng.standup").count() == 1
