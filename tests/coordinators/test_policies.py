"""Routing policies (spec 004 "Choosing how it routes", "What it records"), with the mock
evaluation model (block ``coordinator-route``) and scripted delegates, sync cluster."""

from __future__ import annotations

from coordinators.constants import COORDINATOR_JUDGMENT
from coordinators.models import DelegatedPost
from seats.models import Seat
from tests.conftest import MEMBER
from tests.coordinators.conftest import ACCOUNTS, DELEGATES, DEVICES, GENERAL, HELP, choose, desk_tree

TURN = f"{MEMBER}, through {HELP}: "


def hand_off(*workers: str, text: str = "") -> dict:
    return {"text": text, "tool_calls": [{"name": "handOff", "arguments": {"worker": w}} for w in workers]}


# ----------------------------------------------------------------------------- judgment


def test_judgment_is_the_default_and_the_turn_hands_off_to_as_many_as_it_likes(desk):
    d = desk(scripts={HELP: [hand_off(DEVICES, ACCOUNTS), "Handed to devices and accounts."]})
    post = d.run("My laptop won't charge and I was billed twice.")
    assert post.status == "completed" and post.output["policy"] == "judgment"
    [record] = d.records()
    assert record == {
        "postId": post.request_id,
        "round": 0,
        "policy": "judgment",
        "by": "judgment",
        "delegates": [{"worker": DEVICES, "outcome": "delivered"}, {"worker": ACCOUNTS, "outcome": "delivered"}],
    }
    answers = dict(d.answers())
    assert answers[DEVICES] == f"{DEVICES} answered: {TURN}My laptop won't charge and I was billed twice."
    assert answers[ACCOUNTS] == f"{ACCOUNTS} answered: {TURN}My laptop won't charge and I was billed twice."
    assert answers[f"{COORDINATOR_JUDGMENT}:{HELP}"] == "Handed to devices and accounts."
    assert GENERAL not in answers and d.turns(GENERAL) == 0


def test_judgment_can_answer_itself_under_a_coordinator_judgment_agent_name(desk):
    d = desk(scripts={HELP: ["Our shop opens at nine."]})
    post = d.run("When do you open?")
    [(agent, text)] = d.answers()
    assert agent.startswith("coordinator-judgment") and text == "Our shop opens at nine."
    [record] = d.records()
    assert record == {
        "postId": post.request_id,
        "round": 0,
        "policy": "judgment",
        "by": "judgment",
        "delegates": [],
        "none": "the coordinator handed it to no delegate",
    }
    assert all(d.turns(w) == 0 for w in DELEGATES)


def test_the_coordinator_sees_the_post_once_and_not_the_route_records(desk):
    d = desk(scripts={HELP: ["first", "second"]})
    d.run("hello")
    d.run("again")
    second = d.resolver.calls_for(HELP)[1].messages
    contents = [m["content"] for m in second if m["role"] != "system"]
    assert contents == ["hello", "first", "again"]  # history, then the turn text; no records


def test_a_failed_judgment_turn_means_nobody_took_the_post_and_the_conversation_says_so(desk):
    d = desk(scripts={HELP: [RuntimeError("the model is down")]})
    post = d.run("anything")
    [record] = d.records()
    assert record["by"] == "unplaced" and record["delegates"] == []
    assert record["none"].startswith("Nobody took this post: the coordinator's own turn failed: model-error: ")
    assert d.answers() == [(f"{COORDINATOR_JUDGMENT}:{HELP}", record["none"])]
    assert post.status == "completed"


def test_hand_off_refusals_come_back_as_refused_and_the_record_says_why(desk, make_tree):
    d = desk(scripts={HELP: [hand_off("support.nobody", DEVICES, DEVICES), "done"]})
    d.run("hi")
    results = [c.messages for c in d.resolver.calls_for(HELP)][1]
    tool_results = [m["content"] for m in results if m["role"] == "tool"]
    assert (
        tool_results[0]
        == '{"refused": "delegate-not-listed: \\"support.nobody\\" isn\'t a delegate in this conversation. Add it first."}'
    )
    assert tool_results[1] == '{"handedOff": "support.devices", "round": 0}'
    assert "it was already handed this post in this round" in tool_results[2]
    [record] = d.records()
    assert record["delegates"] == [
        {
            "worker": "support.nobody",
            "outcome": "skipped",
            "reason": '"support.nobody" isn\'t a delegate in this conversation. Add it first.',
        },
        {"worker": DEVICES, "outcome": "skipped", "reason": "it was already handed this post in this round"},
        {"worker": DEVICES, "outcome": "delivered"},
    ]
    assert d.turns(DEVICES) == 1


# ----------------------------------------------------------------------------- best fit


def test_best_fit_asks_one_question_over_the_delegates_descriptions(desk):
    d = desk(routing="best-fit", answers=lambda call: choose(DEVICES))
    post = d.run("My laptop won't charge.")
    [call] = d.route.calls
    assert call.block == "coordinator-route" and call.question.name == "delegate"
    assert [(c.value, c.description) for c in call.question.choices] == [
        (DEVICES, "Phones, laptops, and anything else that won't turn on or charge."),
        (ACCOUNTS, "Sign-in, passwords, billing and refunds."),
        (GENERAL, "Anything that fits none of the others."),
    ]
    assert call.state == {"post": {"from": MEMBER, "text": "My laptop won't charge."}, "round": 0}
    [record] = d.records()
    assert record == {
        "postId": post.request_id,
        "round": 0,
        "policy": "best-fit",
        "by": "evaluated",
        "delegates": [{"worker": DEVICES, "outcome": "delivered"}],
    }
    assert d.answers() == [(DEVICES, f"{DEVICES} answered: {TURN}My laptop won't charge.")]


def test_best_fit_picks_by_the_note_before_the_description_and_skips_a_delegate_with_neither(desk, make_tree):
    files = desk_tree(routing="best-fit")
    files["teams/support/workers/general/WORKER.md"] = "---\nmodel: embedded/echo\n---\n\nNo description.\n"
    d = desk(files, answers=lambda call: choose(ACCOUNTS))
    d.act("removeDelegate", {"worker": ACCOUNTS})
    d.act("addDelegate", {"worker": ACCOUNTS, "note": "Software license questions"})
    d.run("Where is my license key?")
    [call] = d.route.calls
    assert [(c.value, c.description) for c in call.question.choices] == [
        (DEVICES, "Phones, laptops, and anything else that won't turn on or charge."),
        (ACCOUNTS, "Software license questions"),
    ]


def test_best_fit_holds_while_a_delegate_is_still_on_your_last_post(desk, monkeypatch):
    from coordinators import policies
    from workforce.dispatch import enqueue

    d = desk(routing="best-fit", answers=lambda call: choose(DEVICES))
    # Deliveries are written but their tasks don't run: devices is still on the first post.
    monkeypatch.setattr(policies, "enqueue", lambda task, *a: None if task == policies.DELIVER_TASK else enqueue(task, *a))
    first = d.run("My laptop won't charge.")
    assert DelegatedPost.objects.get(post__post_id=first.request_id).worker == DEVICES
    assert len(d.route.calls) == 1
    second = d.run("It still won't.")
    assert len(d.route.calls) == 1  # no call: held
    record = d.records(second.request_id)[0]
    assert record == {
        "postId": second.request_id,
        "round": 0,
        "policy": "best-fit",
        "by": "held",
        "delegates": [{"worker": DEVICES, "outcome": "delivered"}],
    }
    third = d.run("Still nothing.")  # a held post holds too: devices is on both
    assert len(d.route.calls) == 1 and d.records(third.request_id)[0]["by"] == "held"


def test_best_fit_does_not_hold_once_the_delegate_answered(desk):
    d = desk(routing="best-fit", answers=[choose(DEVICES), choose(ACCOUNTS)])
    d.run("My laptop won't charge.")
    second = d.run("And I was billed twice.")
    assert len(d.route.calls) == 2
    assert d.records(second.request_id)[0]["by"] == "evaluated"
    assert d.records(second.request_id)[0]["delegates"] == [{"worker": ACCOUNTS, "outcome": "delivered"}]


def test_best_fit_falls_back_when_the_call_fails_answers_none_or_outside_the_delegates(desk):
    d = desk(
        routing="best-fit",
        fallback=GENERAL,
        answers=[RuntimeError("down"), {"delegate": {"type": "none"}}, choose("support.lead")],
    )
    for text in ("one", "two", "three"):
        post = d.run(text)
        [record] = d.records(post.request_id)
        assert record["by"] == "fallback" and record["delegates"] == [{"worker": GENERAL, "outcome": "delivered"}]
    assert d.turns(GENERAL) == 3 and len(d.route.calls) == 3


def test_best_fit_with_nobody_to_pick_from_makes_no_call_and_falls_back(desk, make_tree):
    files = desk_tree(routing="best-fit", fallback=GENERAL)
    for name in ("devices", "accounts", "general"):
        files[f"teams/support/workers/{name}/WORKER.md"] = "---\nmodel: embedded/echo\n---\n\nNo description.\n"
    d = desk(files, answers=lambda call: choose(DEVICES))
    d.run("hi")
    assert d.route.calls == []
    assert d.records()[0]["by"] == "fallback"


def test_best_fit_without_a_fallback_hands_the_post_to_the_coordinators_own_turn(desk):
    d = desk(routing="best-fit", answers=[{"delegate": None}], scripts={HELP: [hand_off(ACCOUNTS), "Accounts has it."]})
    post = d.run("Something odd.")
    [record] = d.records()
    assert record == {
        "postId": post.request_id,
        "round": 0,
        "policy": "best-fit",
        "by": "judgment",
        "delegates": [{"worker": ACCOUNTS, "outcome": "delivered"}],
    }
    assert (f"{COORDINATOR_JUDGMENT}:{HELP}", "Accounts has it.") in d.answers()


def test_best_fit_whose_own_turn_fails_too_says_nobody_took_the_post(desk):
    d = desk(routing="best-fit", answers=[RuntimeError("down")], scripts={HELP: [RuntimeError("also down")]})
    d.run("Something odd.")
    [record] = d.records()
    assert record["by"] == "unplaced"
    assert record["none"].startswith(
        "Nobody took this post: best fit couldn't place it, and the coordinator's own turn failed: model-error: "
    )
    assert record["none"].endswith(".") and not record["none"].endswith("..")
    assert d.answers() == [(f"{COORDINATOR_JUDGMENT}:{HELP}", record["none"])]


def test_best_fit_with_an_unreachable_fallback_takes_the_coordinators_turn(desk):
    d = desk(routing="best-fit", fallback=GENERAL, answers=[RuntimeError("down")], scripts={HELP: ["I'll take it."]})
    Seat.objects.filter(seat_id=GENERAL).delete()  # fired
    d.run("Something odd.")
    [record] = d.records()
    assert record["by"] == "judgment"
    assert {"worker": GENERAL, "outcome": "skipped", "reason": 'No worker "support.general" on your roster.'} in record[
        "delegates"
    ]


# ----------------------------------------------------------------------------- round robin


def test_round_robin_hands_each_post_to_the_next_delegate(desk):
    d = desk(routing="round-robin")
    went = []
    for n in range(4):
        post = d.run(f"post {n}")
        [record] = d.records(post.request_id)
        assert record["by"] == "round-robin" and record["policy"] == "round-robin"
        went.append(record["delegates"][-1]["worker"])
    assert went == [DEVICES, ACCOUNTS, GENERAL, DEVICES]


def test_round_robin_skips_a_fired_delegate_and_says_why(desk):
    d = desk(routing="round-robin")
    Seat.objects.filter(seat_id=DEVICES).delete()
    post = d.run("hi")
    [record] = d.records(post.request_id)
    assert record["delegates"] == [
        {"worker": DEVICES, "outcome": "skipped", "reason": 'No worker "support.devices" on your roster.'},
        {"worker": ACCOUNTS, "outcome": "delivered"},
    ]


def test_round_robin_after_the_last_delegate_was_removed_goes_on_from_its_place(desk):
    d = desk(routing="round-robin")
    d.run("one")  # devices
    d.run("two")  # accounts
    d.act("removeDelegate", {"worker": ACCOUNTS})
    post = d.run("three")
    assert d.records(post.request_id)[0]["delegates"] == [{"worker": GENERAL, "outcome": "delivered"}]


def test_round_robin_with_nobody_reachable_says_so(desk):
    d = desk(routing="round-robin")
    Seat.objects.filter(seat_id__in=DELEGATES).delete()
    post = d.run("hi")
    [record] = d.records(post.request_id)
    assert record["by"] == "unplaced"
    assert record["none"] == "Nobody took this post: no delegate in this conversation can be reached."
    assert [e["outcome"] for e in record["delegates"]] == ["skipped"] * 3
    # The conversation says so, in the coordinator's own words (spec 004 "Choosing how it routes").
    assert d.answers() == [
        (f"{COORDINATOR_JUDGMENT}:{HELP}", "Nobody took this post: no delegate in this conversation can be reached.")
    ]
    [line] = [m for m in d.messages() if m["role"] == "assistant"]
    assert line == {
        "role": "assistant",
        "text": "Nobody took this post: no delegate in this conversation can be reached.",
        "agentName": f"{COORDINATOR_JUDGMENT}:{HELP}",
        "postId": post.request_id,
        "round": 0,
    }


# ----------------------------------------------------------------------------- everyone


def test_everyone_hands_the_post_to_every_delegate(desk):
    d = desk(routing="everyone")
    post = d.run("Team meeting at noon?")
    [record] = d.records()
    assert record == {
        "postId": post.request_id,
        "round": 0,
        "policy": "everyone",
        "by": "everyone",
        "delegates": [{"worker": w, "outcome": "delivered"} for w in DELEGATES],
    }
    assert sorted(a for a, _ in d.answers()) == sorted(DELEGATES)


def test_everyone_with_no_delegate_left_says_nobody_took_it(desk):
    d = desk(routing="everyone")
    for worker in DELEGATES:
        d.act("removeDelegate", {"worker": worker})
    post = d.run("anyone?")
    assert d.records(post.request_id) == [
        {
            "postId": post.request_id,
            "round": 0,
            "policy": "everyone",
            "by": "unplaced",
            "delegates": [],
            "none": "Nobody took this post: no delegate in this conversation can be reached.",
        }
    ]
    assert d.answers() == [
        (f"{COORDINATOR_JUDGMENT}:{HELP}", "Nobody took this post: no delegate in this conversation can be reached.")
    ]


def test_everyone_with_every_delegate_fired_says_nobody_took_it_in_the_conversation(desk):
    d = desk(routing="everyone")
    Seat.objects.filter(seat_id__in=DELEGATES).delete()
    post = d.run("anyone?")
    [record] = d.records(post.request_id)
    assert record["by"] == "unplaced" and [e["outcome"] for e in record["delegates"]] == ["skipped"] * 3
    assert [(m["agentName"], m["text"], m["postId"], m["round"]) for m in d.messages() if m["role"] == "assistant"] == [
        (
            f"{COORDINATOR_JUDGMENT}:{HELP}",
            "Nobody took this post: no delegate in this conversation can be reached.",
            post.request_id,
            0,
        )
    ]


def test_an_answer_round_robin_can_route_to_nobody_lands_and_only_its_record_says_so(desk):
    d = desk(routing="round-robin", rounds=1, delegates=(DEVICES,))
    post = d.run("hi")
    r0, r1 = d.records(post.request_id)
    assert (r0["by"], r1["by"], r1["round"]) == ("round-robin", "unplaced", 1)
    assert r1["none"] == "Nobody took this post: no delegate in this conversation can be reached."
    assert [a for a, _ in d.answers()] == [DEVICES]  # the answer, and no "Nobody took" line after it
