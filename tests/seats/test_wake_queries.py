"""The lean wake (speed issue, "A lean write path", "Claims", "Guard the gains"): the
statements, transactions and rows one wake of an echo seat costs, on both databases.

A wake is the ``deliver_post`` task's body (``mailboxes.deliveries.do_deliver``): the
claim, the read of what the turn needs, the seat's turn slot, the turn's start and its
history (one transaction), the cancel check before the model call (one read on its own),
the echo model, and the reply, the turn's end, the delivery settled and the slot freed
(one transaction). Transactions are counted as the server sees them: each outermost
``atomic`` block is one (Django's ``connection.commit`` ends it; on SQLite its ``BEGIN IMMEDIATE`` is seen too),
and each statement run outside any block is one more (autocommit).
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from mailboxes import fairness, notify
from mailboxes.deliveries import _turn_note, do_deliver
from mailboxes.models import Delivery, Line
from seats.models import TurnSlot, TurnWait
from seats.queries import _WINDOW_FLOORS
from tests.conftest import MEMBER, mailbox_md, on_postgres, run_in_threads
from tests.seats.conftest import ECHO_LISTENER, ECHO_POSTER
from workforce.leases import LeaseLost, claim_lease, max_attempts
from workforce.models import Item, Request, Session
from workforce.notify import ON_MAILBOX_POST
from workforce.sessions import do_record_running_request_with_item, do_run_action

ONE_SEAT = {
    "teams/eng/mailboxes/m/MAILBOX.md": mailbox_md("M.", members=("eng.lead",)),
    "teams/eng/workers/lead/WORKER.md": ECHO_LISTENER,
}

# One wake of an echo seat that has heard posts before (its conversation and slot exist):
# the claim and the read of what the turn needs (PostgreSQL 1: the claim is a CTE the
# read joins; SQLite 2), slot 1, turn start (PostgreSQL 1: the request, the prompt item and
# its counter's bump, and the delivery noting its turn, in one CTE,
# workforce.sessions.do_record_running_request_with_item with a StartNote; SQLite 4: the
# request, the counter's bump, the item, then the delivery noting its turn), history 1;
# the cancel check 1; finish (PostgreSQL 1: the request settled unless cancelled and, in
# the same CTE, the reply item with its counter's bump; SQLite 3), settle (PostgreSQL 1:
# the delivery settled and the slot freed in one CTE, mailboxes.deliveries.
# _SlotFreedBySettle; SQLite 2: the settle, the slot freed), the next held delivery
# released (mailboxes.fairness: one UPDATE … RETURNING, which finds none here) 1.
WAKE_STATEMENTS = {"postgresql": 8, "sqlite": 15}
START_STATEMENTS = {"postgresql": 4, "sqlite": 8}  # the first transaction's: claim and read, slot, start, history
SETTLE_STATEMENTS = {"postgresql": 3, "sqlite": 6}  # the second's: finish, settle (and slot), release
WAKE_TRANSACTIONS = 2  # atomic blocks; the cancel check is the one autocommit read
# On PostgreSQL the live streams are told of each item by the statement that stores it
# (its pg_notify, delivered at the commit): no NOTIFY statement of its own after a commit
# (there were 2 here while emit_item queued an after-commit NOTIFY).
STREAM_NOTIFIES = 0


def is_stream_notify(sql: str) -> bool:
    """A NOTIFY sent as a statement of its own (the streams' after-commit one, before
    items carried their own); a write that queues its NOTIFY inside (an item's, a
    mailbox line's) is a statement of the wake like any other."""
    return sql.startswith("SELECT pg_notify")


@contextmanager
def profile():
    """Record every statement with the transaction it ran in: ``("atomic", n)`` for the
    n-th outermost atomic block, ``("autocommit", None)`` for one run outside any."""
    rows: list[tuple[str, tuple]] = []
    commits = [0]
    real_commit = connection.commit

    def counting_commit():
        commits[0] += 1
        return real_commit()

    def record(execute, sql, params, many, context):
        where = ("atomic", commits[0]) if connection.in_atomic_block else ("autocommit", None)
        rows.append((sql, where))
        return execute(sql, params, many, context)

    connection.ensure_connection()
    connection.commit = counting_commit
    try:
        with connection.execute_wrapper(record):
            yield rows
    finally:
        del connection.commit


def summary(rows):
    atomic = {where for _, where in rows if where[0] == "atomic"}
    autocommit = [sql for sql, where in rows if where[0] == "autocommit"]
    return len(rows), len(atomic), autocommit


def rows_read_by_one_wake(delivery_pk: int) -> dict[str, int]:
    """Rows each table gave while ``delivery_pk`` was delivered (PostgreSQL: the
    ``seq_tup_read + idx_tup_fetch`` delta of ``pg_stat_xact_user_tables``), tables that
    gave none left out; the delivery must end ``done``."""

    def rows_read() -> dict[str, int]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT relname, COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables")
            return dict(cursor.fetchall())

    before = rows_read()
    assert do_deliver(delivery_pk) == "done"
    return {name: n - before.get(name, 0) for name, n in rows_read().items() if n - before.get(name, 0)}


@pytest.fixture
def one_seat(wired, org, monkeypatch):
    """``post(body) -> Delivery``: a committed post on a one-member mailbox whose
    delivery was written and not handed to the cluster."""
    monkeypatch.setattr(notify, "enqueue", lambda *args, **kwargs: None)
    monkeypatch.setattr(fairness, "enqueue", lambda *args, **kwargs: None)  # the release's tasks (mailboxes.fairness)
    wired(ONE_SEAT)

    def _post(body: str) -> Delivery:
        do_run_action(org=org, kind="mailbox", session_id="eng.m", action="post", input={"body": body}, user_id=MEMBER)
        return Delivery.objects.order_by("-pk").first()

    return _post


@pytest.mark.django_db(transaction=True)
def test_one_wake_of_an_echo_seat_is_8_statements_in_2_transactions_plus_the_stream_notifies(one_seat):
    assert do_deliver(one_seat("first").pk) == "done"  # its conversation and slot are made
    delivery = one_seat("second")
    with profile() as rows:
        assert do_deliver(delivery.pk) == "done"
    notifies = [sql for sql, _ in rows if is_stream_notify(sql)]
    assert len(notifies) == (STREAM_NOTIFIES if on_postgres() else 0)
    # SQLite's IMMEDIATE transactions show their BEGIN as a statement: one per transaction.
    begins = [sql for sql, _ in rows if sql.startswith("BEGIN")]
    assert len(begins) == (0 if on_postgres() else WAKE_TRANSACTIONS)
    rows = [(sql, where) for sql, where in rows if not is_stream_notify(sql) and not sql.startswith("BEGIN")]
    statements, transactions, autocommit = summary(rows)
    assert (statements, transactions) == (WAKE_STATEMENTS[connection.vendor], WAKE_TRANSACTIONS), "\n".join(
        f"{w} {sql[:150]}" for sql, w in rows
    )
    assert len(autocommit) == 1 and autocommit[0].startswith("SELECT %s AS")  # is_cancelled, before the model call
    assert not [sql for sql, _ in rows if "SAVEPOINT" in sql]
    delivery.refresh_from_db()
    turn = delivery.turn_request
    assert (delivery.status, turn.status, turn.output["reply"]) == (
        "done",
        "completed",
        "eng.lead heard: u_owner in eng.m: second",
    )
    # The turn is listed under the post's request, without a read of its own.
    assert turn.parent_request.action == "post"
    texts = [i.data["text"] for i in Item.objects.filter(session=delivery.conversation).order_by("seq")]
    assert texts[-2:] == ["u_owner in eng.m: second", "eng.lead heard: u_owner in eng.m: second"]


ONE_POSTER = {**ONE_SEAT, "teams/eng/workers/lead/WORKER.md": ECHO_POSTER}

# The same wake when the seat answers with post-to-mailbox: its line is a second action
# through the kernel (the mailbox's internal ``seatPost``, dispatched once by its key).
# Besides the 8 (15): the cancel check before the tool call 1, and on SQLite the one
# before the model's second call (on PostgreSQL the tool-call item's statement reads the
# flag for that safe point, seats.turns.TurnLog.cancel_read); the action's transaction (PostgreSQL 2: the mailbox session read under
# its lock and the request's INSERT in one statement, whose ON CONFLICT on the key's index
# finds a used key; the line, its item, the request's completion and the fan-out's
# ``notify`` request (it writes no delivery: the seat's own line) in one CTE,
# mailboxes.services.do_post_line. SQLite 10: the key's read before it, the session read, the
# request's INSERT in a savepoint, the line's three writes, the notify request, the
# request's UPDATE); the tool-call item (PostgreSQL 1, SQLite 2). The tool reads no
# mailbox: the delivery read it.
POSTER_WAKE_STATEMENTS = {"postgresql": 12, "sqlite": 29}
POSTER_WAKE_TRANSACTIONS = 4  # the claim's, the line's, the tool-call item's, the finish's
# The line's item is told by the line's own statement (``mailboxes.lines``), not by one of these.
POSTER_STREAM_NOTIFIES = 0  # 3 while emit_item queued an after-commit NOTIFY


@pytest.mark.django_db(transaction=True)
def test_a_wake_whose_seat_answers_in_the_mailbox_costs_its_line_4_more_statements_on_postgresql(wired, org, monkeypatch):
    monkeypatch.setattr(notify, "enqueue", lambda *args, **kwargs: None)
    monkeypatch.setattr(fairness, "enqueue", lambda *args, **kwargs: None)  # the release's tasks (mailboxes.fairness)
    wired(ONE_POSTER)

    def post(body: str) -> Delivery:
        do_run_action(org=org, kind="mailbox", session_id="eng.m", action="post", input={"body": body}, user_id=MEMBER)
        return Delivery.objects.filter(status="pending").order_by("-pk").first()

    assert do_deliver(post("first").pk) == "done"
    delivery = post("second")
    with profile() as rows:
        assert do_deliver(delivery.pk) == "done"
    notifies = [sql for sql, _ in rows if is_stream_notify(sql)]
    assert len(notifies) == (POSTER_STREAM_NOTIFIES if on_postgres() else 0)
    rows = [(sql, where) for sql, where in rows if not is_stream_notify(sql) and not sql.startswith("BEGIN")]
    statements, transactions, autocommit = summary(rows)
    assert (statements, transactions) == (POSTER_WAKE_STATEMENTS[connection.vendor], POSTER_WAKE_TRANSACTIONS), "\n".join(
        f"{w} {sql[:150]}" for sql, w in rows
    )
    # The cancel checks (two on PostgreSQL: the third rides the tool-call item's
    # statement), and on SQLite the key's read before the line's transaction.
    assert len([sql for sql in autocommit if sql.startswith("SELECT %s AS")]) == (2 if on_postgres() else 3)
    assert len(autocommit) == (2 if on_postgres() else 4)
    if on_postgres():
        tool_call_item = [sql for sql, _ in rows if sql.startswith("WITH counter AS") and " FROM item" in sql]
        assert len(tool_call_item) == 1 and '"status" = %s) FROM item' in tool_call_item[0]
    assert on_postgres() is not any("SAVEPOINT" in sql for sql, _ in rows)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.turn_request.status) == ("done", "completed")
    line = Line.objects.filter(session__session_id="eng.m", seat_authored=True).order_by("-seq").first()
    assert (line.author, line.body) == ("eng.lead", "eng.lead heard: u_owner in eng.m: second")
    seat_post = Request.objects.get(parent_request=delivery.turn_request, action="seatPost")
    assert (seat_post.status, seat_post.idempotency_key) == ("completed", f"dlv{delivery.pk}:post-to-mailbox:1")
    # Run again with the same key (a redelivered turn): the first request answers, nothing lands twice.
    again = do_run_action(
        org=org,
        kind="mailbox",
        session_id="eng.m",
        action="seatPost",
        input=seat_post.input,
        user_id=seat_post.user_id,
        internal=True,
        idempotency_key=seat_post.idempotency_key,
    )
    assert again.pk == seat_post.pk and getattr(again, "replayed", False)
    assert Line.objects.filter(session__session_id="eng.m", body=line.body).count() == 1


def test_the_claim_is_one_statement(one_seat, django_assert_num_queries):
    delivery = one_seat("claim me")
    with django_assert_num_queries(1) as captured:
        token = claim_lease(Delivery, delivery.pk)
    sql = captured.captured_queries[0]["sql"]
    assert sql.startswith('UPDATE "seats_delivery"') and "RETURNING" in sql
    assert ("FOR UPDATE SKIP LOCKED" in sql) is on_postgres()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.claim_token) == ("running", 1, token)
    assert delivery.lease_until > timezone.now() and delivery.started_at is not None
    with django_assert_num_queries(1):
        assert claim_lease(Delivery, delivery.pk) is None  # held by a live claim


def test_the_claim_and_the_read_answer_the_row_as_claimed(one_seat):
    """On PostgreSQL the read of what the turn needs joins the claim (a CTE): the row it
    answers carries the claim's own values, not the row as it was before."""
    from mailboxes.deliveries import _claim

    delivery = one_seat("claim and read")
    token, claimed = _claim(delivery.pk, timezone.now())
    stored = Delivery.objects.get(pk=delivery.pk)
    assert token is not None and (claimed.status, claimed.attempts, claimed.claim_token) == ("running", 1, token)
    assert (claimed.lease_until, claimed.started_at) == (stored.lease_until, stored.started_at)
    assert claimed.mailbox.session_id == "eng.m" and claimed.mailbox.organization.pk == stored.organization_id
    assert claimed.seat.seat_id == "eng.lead" and claimed.post_request_pk is not None
    assert _claim(delivery.pk, timezone.now()) == (None, None)  # held by a live claim


def test_a_lapsed_claim_is_taken_over_until_the_attempts_run_out(one_seat):
    delivery = one_seat("lapse")
    first = claim_lease(Delivery, delivery.pk)
    started = Delivery.objects.get(pk=delivery.pk).started_at
    later = timezone.now() + timedelta(days=1)
    second = claim_lease(Delivery, delivery.pk, now=later)
    assert second not in (None, first)
    delivery.refresh_from_db()
    assert (delivery.attempts, delivery.claim_token, delivery.started_at) == (2, second, started)  # first claim's start kept
    Delivery.objects.filter(pk=delivery.pk).update(attempts=max_attempts())
    assert claim_lease(Delivery, delivery.pk, now=later + timedelta(days=1)) is None
    Delivery.objects.filter(pk=delivery.pk).update(status="done", attempts=0)
    assert claim_lease(Delivery, delivery.pk, now=later + timedelta(days=1)) is None


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_one_statement_claim_under_many_claimers_has_one_winner(one_seat):
    rows = [one_seat(f"race {n}") for n in range(3)]
    for delivery in rows:
        tokens = run_in_threads(lambda i, pk=delivery.pk: claim_lease(Delivery, pk), 8)
        assert len([t for t in tokens if t]) == 1
        assert Delivery.objects.get(pk=delivery.pk).attempts == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_control_a_claim_that_reads_then_writes_has_several_winners(one_seat):
    """Beside the test above: the same claimers with a read, then an unconditional write."""
    import threading

    delivery = one_seat("race")
    barrier = threading.Barrier(8)

    def naive(i: int) -> bool:
        row = Delivery.objects.get(pk=delivery.pk)
        barrier.wait(timeout=30)
        if row.status != "pending" or row.attempts >= max_attempts():
            return False
        Delivery.objects.filter(pk=delivery.pk).update(status="running", attempts=row.attempts + 1)
        return True

    assert sum(run_in_threads(naive, 8, barrier=False)) > 1


@pytest.mark.postgres
def test_a_wake_reads_about_its_window_however_long_the_conversation(one_seat, org):
    """The scan behind thousands of rows read per post-and-wake: the history window's
    query walked the whole conversation (or the whole request table) when the planner's
    statistics were taken while the conversation was small. Statistics are taken now
    (beside 500 other sessions and their requests), then 2,000 earlier turns are written, and one
    wake must read at most 200 rows (the window's 50 requests and their items, the
    claim, the slot and what the turn writes)."""
    assert do_deliver(one_seat("first").pk) == "done"
    conversation = Session.objects.get(session_id="eng.m:eng.lead")
    # Other sessions and their requests, so the statistics believe the conversation small
    # (and the session table is not so small that reading it whole is the cheapest plan).
    others = Session.objects.bulk_create(
        Session(organization=org, session_id=f"other.{n}", flow_kind="agent", user_id="u_owner") for n in range(500)
    )
    Request.objects.bulk_create(
        Request(organization=org, session=other, action=ON_MAILBOX_POST, user_id="u_owner", status="completed")
        for other in others
        for _ in range(6)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE workforce_item; ANALYZE workforce_request; ANALYZE workforce_session")
    turns = Request.objects.bulk_create(
        Request(organization=org, session=conversation, action=ON_MAILBOX_POST, user_id="u_owner", status="completed")
        for _ in range(2000)
    )
    base = Session.objects.get(pk=conversation.pk).item_seq
    Item.objects.bulk_create(
        Item(session=conversation, request=turn, seq=base + 2 * n + k, type="message", data={"role": role, "text": "earlier"})
        for n, turn in enumerate(turns, start=1)
        for k, role in enumerate(("user", "assistant"))
    )
    Session.objects.filter(pk=conversation.pk).update(item_seq=base + 2 * len(turns) + 2)
    delivery = one_seat("after many")
    by_table = rows_read_by_one_wake(delivery.pk)
    assert sum(by_table.values()) <= 200, by_table
    delivery.refresh_from_db()
    assert delivery.turn_request.status == "completed"


@pytest.mark.postgres
def test_a_wake_reads_about_its_window_on_a_database_never_analyzed(one_seat, org):
    """The growth behind "not flat at 10,000 posts": on a PostgreSQL whose tables were
    never analyzed (autovacuum off, as on this project's CI machine), the claim's read of
    the post's request walked every line of the mailbox by its session index (the
    models' ordering made the planner sort), and the history window read every request
    of the conversation with a bitmap scan and a sort. With 2,000 earlier posts in the
    mailbox and 2,000 earlier turns in the conversation, and no statistics at all, a
    wake must read at most 200 rows, as it does at the start."""
    assert do_deliver(one_seat("first").pk) == "done"
    mailbox = Session.objects.get(session_id="eng.m")
    conversation = Session.objects.get(session_id="eng.m:eng.lead")
    posts = Request.objects.bulk_create(
        Request(organization=org, session=mailbox, action="post", user_id=MEMBER, status="completed") for _ in range(2000)
    )
    Line.objects.bulk_create(
        Line(session=mailbox, seq=mailbox.line_seq + n, line_id=f"earlier-{n}", at=0, principal=MEMBER, body="x", request=post)
        for n, post in enumerate(posts, start=1)
    )
    Session.objects.filter(pk=mailbox.pk).update(line_seq=mailbox.line_seq + len(posts))
    turns = Request.objects.bulk_create(
        Request(organization=org, session=conversation, action=ON_MAILBOX_POST, user_id="u_owner", status="completed")
        for _ in range(2000)
    )
    base = Session.objects.get(pk=conversation.pk).item_seq
    Item.objects.bulk_create(
        Item(session=conversation, request=turn, seq=base + 2 * n + k, type="message", data={"role": role, "text": "earlier"})
        for n, turn in enumerate(turns, start=1)
        for k, role in enumerate(("user", "assistant"))
    )
    Session.objects.filter(pk=conversation.pk).update(item_seq=base + 2 * len(turns) + 2)
    # And a big item table beside it (another session's tool calls): a planner that
    # believes the window small would hash-join all of it.
    other = Session.objects.create(organization=org, session_id="other.big", flow_kind="agent", user_id="u_owner")
    other_turns = Request.objects.bulk_create(
        Request(organization=org, session=other, action=ON_MAILBOX_POST, user_id="u_owner", status="completed")
        for _ in range(2000)
    )
    Item.objects.bulk_create(
        (
            Item(session=other, request=turn, seq=20 * n + k, type="component", data={"tool": "t"})
            for n, turn in enumerate(other_turns)
            for k in range(20)
        ),
        batch_size=5000,
    )
    tables = [model._meta.db_table for model in (Request, Item, Session, Line, Delivery)]
    with connection.cursor() as cursor:
        # Forget the statistics: the state of a table no ANALYZE (nor autovacuum) has seen.
        cursor.execute("DELETE FROM pg_statistic WHERE starelid = ANY(%s::regclass[])", [tables])
        cursor.execute("UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE oid = ANY(%s::regclass[])", [tables])
    # The first wake after the growth may read the conversation once (this process has no
    # floor for it yet: seats.queries._WINDOW_FLOORS); every later one reads its window.
    _WINDOW_FLOORS.clear()
    assert do_deliver(one_seat("after many").pk) == "done"
    delivery = one_seat("and one more")
    by_table = rows_read_by_one_wake(delivery.pk)
    assert sum(by_table.values()) <= 200, by_table
    delivery.refresh_from_db()
    assert delivery.turn_request.status == "completed"
    assert delivery.turn_request.parent_request.action == "post"


# ----------------------------------------------------------------------------- the folds


@pytest.mark.django_db(transaction=True)
def test_the_start_notes_the_delivery_and_the_settle_frees_the_slot_in_their_own_statements(one_seat):
    """Issue 26's folds, statement by statement: on PostgreSQL the delivery's link to
    its turn is a CTE of the start's statement, and the slot's release one of the
    settle's; SQLite keeps each its own statement."""
    assert do_deliver(one_seat("first").pk) == "done"
    delivery = one_seat("second")
    with profile() as rows:
        assert do_deliver(delivery.pk) == "done"
    rows = [(sql, where) for sql, where in rows if not sql.startswith("BEGIN")]
    start = [sql for sql, where in rows if where == ("atomic", 0)]
    settle = [sql for sql, where in rows if where == ("atomic", 1)]
    vendor = connection.vendor
    listing = "\n".join(f"{w} {sql[:150]}" for sql, w in rows)
    assert (len(start), len(settle)) == (START_STATEMENTS[vendor], SETTLE_STATEMENTS[vendor]), listing
    note = [sql for sql in start if 'SET "turn_request_id" = ' in sql]
    freed = [sql for sql in settle if 'UPDATE "seats_turnslot"' in sql]
    assert len(note) == 1 and len(freed) == 1, listing
    if on_postgres():
        assert note[0].startswith('WITH req AS (INSERT INTO "workforce_request"') and "noted AS (UPDATE" in note[0]
        assert freed[0].startswith('WITH settled AS (UPDATE "seats_delivery"') and "freed AS (UPDATE" in freed[0]
    else:
        assert note[0].startswith('UPDATE "seats_delivery"') and freed[0].startswith('UPDATE "seats_turnslot"')
    delivery.refresh_from_db()
    assert delivery.status == "done" and delivery.turn_request.status == "completed"
    assert delivery.conversation.session_id == "eng.m:eng.lead"
    assert Item.objects.filter(request=delivery.turn_request, type="message").count() == 2
    slot = TurnSlot.objects.get(session=delivery.conversation, seat_id="eng.lead")
    assert (slot.claim_token, slot.lease_until, slot.waiting) == ("", None, 0)


def test_a_start_whose_note_matches_nothing_rolls_back_with_its_request(one_seat):
    """A ``StartNote`` that updated no row (the claim is gone): ``missed`` raises inside
    the start, and the caller's transaction rolls the request and its prompt back. On
    PostgreSQL the note is a CTE of the start's statement, elsewhere an UPDATE of its own."""
    delivery = one_seat("note")
    conversation = Session.objects.get(session_id="eng.m")
    before = (Request.objects.count(), Item.objects.count())
    note = _turn_note(delivery, "not-the-claim", conversation)
    with pytest.raises(LeaseLost), transaction.atomic(), CaptureQueriesContext(connection) as captured:
        do_record_running_request_with_item(
            conversation, "", {"role": "user", "text": "x"}, type="message", action="t", input={}, user_id=MEMBER, note=note
        )
    own = [q["sql"] for q in captured.captured_queries if q["sql"].startswith('UPDATE "seats_delivery"')]
    assert len(own) == (0 if on_postgres() else 1)
    assert (Request.objects.count(), Item.objects.count()) == before
    delivery.refresh_from_db()
    assert delivery.turn_request_id is None


def test_a_note_on_its_own_links_the_delivery_to_the_request(one_seat):
    """The hook called on its own (SQLite's start, a kind's ``post_turn``): the same
    UPDATE, the request's id written in."""
    delivery = one_seat("plain")
    conversation = Session.objects.get(session_id="eng.m")
    request = Request.objects.order_by("pk").first()
    Delivery.objects.filter(pk=delivery.pk).update(claim_token="tok")
    _turn_note(delivery, "tok", conversation)(request)
    delivery.refresh_from_db()
    assert (delivery.turn_request_id, delivery.conversation_id) == (request.pk, conversation.pk)
    with pytest.raises(LeaseLost):
        _turn_note(delivery, "gone", conversation)(request)


@pytest.mark.django_db(transaction=True)
def test_a_claim_lost_while_the_turn_ran_settles_nothing_and_the_slot_is_still_freed(one_seat, monkeypatch):
    """The settle's UPDATE matches nothing (another task took the delivery over): it
    raises LeaseLost, the settle's transaction rolls back (the slot's release in the
    same statement with it), the turn's request is aborted, and the slot is freed on its
    own (``free_turn_slot``), waking who waits."""
    from seats import agent, turns

    woken = []
    monkeypatch.setattr(turns, "enqueue", lambda task, *args: woken.append((task, args)))
    assert do_deliver(one_seat("first").pk) == "done"
    delivery = one_seat("second")
    waiting = one_seat("third")
    real_run = agent.StartedPostTurn.run

    def run_then_lose(self):
        assert do_deliver(waiting.pk) == "waiting"  # the slot is ours: the third waits
        Delivery.objects.filter(pk=delivery.pk).update(claim_token="another-task")
        return real_run(self)

    monkeypatch.setattr(agent.StartedPostTurn, "run", run_then_lose)
    assert do_deliver(delivery.pk) == "lease-lost"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.claim_token, delivery.finished_at) == ("running", "another-task", None)
    assert delivery.turn_request.status == "aborted"
    assert not Item.objects.filter(request=delivery.turn_request, data__role="assistant").exists()
    slot = TurnSlot.objects.get(session=delivery.conversation, seat_id="eng.lead")
    assert (slot.claim_token, slot.lease_until, slot.waiting) == ("", None, 0)
    assert woken == [("mailboxes.tasks.deliver_post", (waiting.pk,))]
    assert not TurnWait.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_settle_that_frees_a_slot_someone_waits_for_wakes_the_oldest_once(one_seat, monkeypatch):
    """The slot's ``waiting`` read by the settle's statement (PostgreSQL) or by the
    slot's own (SQLite): the oldest wait is enqueued with the settle, once."""
    from seats import agent, turns

    woken = []
    monkeypatch.setattr(turns, "enqueue", lambda task, *args: woken.append((task, args)))
    assert do_deliver(one_seat("first").pk) == "done"
    delivery = one_seat("second")
    waiting = [one_seat("third"), one_seat("fourth")]
    real_run = agent.StartedPostTurn.run

    def run_with_waits(self):
        for other in waiting:
            assert do_deliver(other.pk) == "waiting"
        return real_run(self)

    monkeypatch.setattr(agent.StartedPostTurn, "run", run_with_waits)
    assert do_deliver(delivery.pk) == "done"
    slot = TurnSlot.objects.get(session__session_id="eng.m:eng.lead", seat_id="eng.lead")
    assert (slot.claim_token, slot.waiting) == ("", 1)
    assert woken == [("mailboxes.tasks.deliver_post", (waiting[0].pk,))]
    assert list(TurnWait.objects.values_list("args", flat=True)) == [[waiting[1].pk]]
    monkeypatch.setattr(agent.StartedPostTurn, "run", real_run)
    assert do_deliver(waiting[0].pk) == "done"  # woken: its wait went with the wake
    assert woken[1:] == [("mailboxes.tasks.deliver_post", (waiting[1].pk,))]
    slot.refresh_from_db()
    assert (slot.claim_token, slot.waiting) == ("", 0)
