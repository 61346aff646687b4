"""A mail run that fails leaves its mail where the next run or a person finds it (issue
24, "Models" item 1): the mail goes back to ``mail:new`` with the failure ledgered
(``run.failed``), a model failure is run again while the run has claims left, and a run
whose reply already landed is not failed for it."""

from __future__ import annotations

from mail.constants import LABEL_NEW, LABEL_REPLIED, RUN_FAILED
from mail.models import LedgerEntry, MailRun, Thread
from mail.runs import do_sweep_mail
from seats.models import TurnSlot
from tests.mail.test_send import mail_turns
from workforce.llm import ModelError, set_model_resolver
from workforce.testing import create_mock_model_resolver


def failures(org) -> list[LedgerEntry]:
    return list(LedgerEntry.objects.filter(organization=org, event=RUN_FAILED).order_by("pk"))


def test_a_mail_whose_model_keeps_failing_goes_back_to_new_with_each_failure_ledgered(agents, org, store, send, settings):
    settings.WORKFORCE_DELIVERY_MAX_ATTEMPTS = 3
    agents()
    set_model_resolver(
        create_mock_model_resolver({"eng.reader": lambda call: (_ for _ in ()).throw(ModelError("429 rate limited"))})
    )
    thread = send("eng.reader", "FYI")
    run = MailRun.objects.get(thread=thread)
    # Run again while it had claims left, then failed for good with the model's error.
    assert run.status == "failed" and run.attempts == 3
    assert run.error["reason"] == "model-error" and "429 rate limited" in run.error["message"]
    turns = mail_turns(org, "eng.reader")
    assert [t.status for t in turns] == ["failed"] * 3
    assert all(t.error["reason"] == "model-error" for t in turns)
    # The mail is back where a person (or the next run) finds it: mail:new, in the vault too.
    thread.refresh_from_db()
    assert thread.state == "new" and thread.labels == [LABEL_NEW]
    assert store.get_issue("default", "eng.reader", 1).labels == (LABEL_NEW,)
    ledgered = failures(org)
    assert [(e.principal, e.thread) for e in ledgered] == [("agent:eng.reader", "eng.reader:1")] * 3
    assert [e.data["attempt"] for e in ledgered] == [1, 2, 3]
    assert [e.data["retried"] for e in ledgered] == [True, True, False]
    assert {e.data["reason"] for e in ledgered} == {"model-error"}
    assert all("429 rate limited" in e.data["error"] for e in ledgered)
    assert all(e.data["runKind"] == "mail" and e.data["requestId"] == t.request_id for e, t in zip(ledgered, turns, strict=True))
    assert TurnSlot.objects.get(session__session_id="mail:eng.reader").claim_token == ""


def test_a_mail_whose_model_fails_once_is_run_again_and_replied(agents, org, store, send):
    agents()
    calls = []

    def flaky(call):
        calls.append(call)
        if len(calls) == 1:
            raise ModelError("503 the queue is full")
        return {"tool_calls": [{"name": "mail_reply", "arguments": {"body": "on it"}}]} if len(calls) == 2 else "done"

    set_model_resolver(create_mock_model_resolver({"eng.reader": flaky}))
    thread = send("eng.reader", "Please answer")
    run = MailRun.objects.get(thread=thread)
    assert run.status == "done" and run.attempts == 2 and run.error is None
    thread.refresh_from_db()
    assert thread.state == "replied" and store.get_issue("default", "eng.reader", 1).labels == (LABEL_REPLIED,)
    assert [t.status for t in mail_turns(org, "eng.reader")] == ["failed", "completed"]
    [ledgered] = failures(org)
    assert ledgered.data["retried"] is True and ledgered.data["reason"] == "model-error"


def test_a_run_whose_reply_landed_before_the_model_failed_is_done_not_failed(agents, org, store, send):
    agents()
    script = [{"tool_calls": [{"name": "mail_reply", "arguments": {"body": "here you go"}}]}, ModelError("503 overloaded")]
    set_model_resolver(create_mock_model_resolver({"eng.reader": script}))
    thread = send("eng.reader", "Please answer")
    run = MailRun.objects.get(thread=thread)
    assert run.status == "done" and run.attempts == 1
    thread.refresh_from_db()
    assert thread.state == "replied"  # replied once, and not run again into a second reply
    assert thread.messages.count() == 2
    [turn] = mail_turns(org, "eng.reader")
    assert turn.status == "failed" and turn.error["reason"] == "model-error"  # still listed for operators
    assert failures(org) == []


def test_a_failure_that_is_not_the_models_is_not_run_again(agents, org, store, send, settings):
    settings.WORKFORCE_TURN_MAX_STEPS = 1
    agents()
    script = [{"tool_calls": [{"name": "mail_close", "arguments": {"thread": "eng.alpha:9"}}]}]
    set_model_resolver(create_mock_model_resolver({"eng.reader": script}))
    thread = send("eng.reader", "Loop")
    run = MailRun.objects.get(thread=thread)
    assert run.status == "failed" and run.attempts == 1 and run.error["reason"] == "turn-step-limit"
    thread.refresh_from_db()
    assert thread.state == "new"
    [ledgered] = failures(org)
    assert ledgered.data["retried"] is False and ledgered.data["reason"] == "turn-step-limit"


def test_the_sweep_puts_back_a_mail_left_working_by_a_run_that_failed(agents, org, store, send, committed):
    agents()
    set_model_resolver(create_mock_model_resolver({"eng.reader": ["read it"]}))
    thread = send("eng.reader", "FYI")
    # What a process that died between the run's end and the label's move leaves behind.
    store.set_labels("default", "eng.reader", 1, ["mail:working"])
    Thread.objects.filter(pk=thread.pk).update(state="working", labels=["mail:working"])
    MailRun.objects.filter(thread=thread).update(status="failed", error={"reason": "model-error", "message": "x"})
    committed(do_sweep_mail)
    thread.refresh_from_db()
    assert thread.state == "new" and store.get_issue("default", "eng.reader", 1).labels == (LABEL_NEW,)


def test_the_sweep_fails_a_run_out_of_claims_and_puts_its_mail_back(agents, org, store, send, committed, settings):
    from datetime import timedelta

    from django.utils import timezone

    agents()
    reply = {"tool_calls": [{"name": "mail_reply", "arguments": {"body": "here"}}]}
    set_model_resolver(create_mock_model_resolver({"eng.reader": ["read it"], "eng.alpha": [reply, "done"]}))
    left = send("eng.reader", "FYI")
    replied = send("eng.alpha", "Answer me")
    # What a worker that died on the run's last claim leaves: running, its lease lapsed.
    store.set_labels("default", "eng.reader", 1, ["mail:working"])
    Thread.objects.filter(pk=left.pk).update(state="working", labels=["mail:working"])
    lapsed = timezone.now() - timedelta(seconds=1)
    MailRun.objects.update(
        status="running", attempts=settings.WORKFORCE_DELIVERY_MAX_ATTEMPTS, claim_token="gone", lease_until=lapsed
    )
    committed(do_sweep_mail)
    abandoned = MailRun.objects.get(thread=left)
    assert abandoned.status == "failed" and abandoned.error["reason"] == "run-abandoned"
    left.refresh_from_db()
    assert left.state == "new" and store.get_issue("default", "eng.reader", 1).labels == (LABEL_NEW,)
    [ledgered] = failures(org)
    assert (ledgered.thread, ledgered.data["reason"], ledgered.data["retried"]) == ("eng.reader:1", "run-abandoned", False)
    # The run whose reply had landed is done, its mail left replied.
    assert MailRun.objects.get(thread=replied).status == "done"
    replied.refresh_from_db()
    assert replied.state == "replied"
