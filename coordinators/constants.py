"""The coordinator's wire names, limits and sentences (spec 004), in one place.

Every sentence a person or a model reads is the spec's, word for word; reason codes are
ours (the spec names none) and map to HTTP statuses in ``workforce.refusals``.
"""

from __future__ import annotations

KIND = "coordinator"
COORDINATOR_ROUTE = "coordinator-route"  # the record's component name
COORDINATOR_JUDGMENT = "coordinator-judgment"  # the coordinator's own replies' agentName prefix
MAX_DELEGATES = 25
MAX_ROUNDS = 3
MAX_OPEN_ROUNDS = 50
DEFAULT_ROUND_DEADLINE_MS = 300_000
ROUTE_BLOCK = "coordinator-route"  # best fit's evaluator block name (mock resolvers script by it)
ROUTE_QUESTION = "delegate"
ROUTE_QUESTION_TEXT = "Which delegate should take this post?"

# routing:
JUDGMENT = "judgment"
BEST_FIT = "best-fit"
ROUND_ROBIN = "round-robin"
EVERYONE = "everyone"
POLICIES = (JUDGMENT, BEST_FIT, ROUND_ROBIN, EVERYONE)
DEFAULT_POLICY = JUDGMENT

# by: how the delegates were found
BY_JUDGMENT = "judgment"
BY_HELD = "held"
BY_EVALUATED = "evaluated"
BY_FALLBACK = "fallback"
BY_ROUND_ROBIN = "round-robin"
BY_EVERYONE = "everyone"
BY_UNPLACED = "unplaced"

# a delegate's outcome in a record
DELIVERED = "delivered"
SKIPPED = "skipped"
FAILED = "failed"

# actions and tools (the same names)
RUN = "run"
ADD_DELEGATE = "addDelegate"
REMOVE_DELEGATE = "removeDelegate"
SET_FALLBACK = "setFallback"
LIST_DELEGATES = "listDelegates"
HAND_OFF = "handOff"
REPORT = "onDelegateReport"  # internal: a delegate's turn ended
CLOSE_ROUND = "closeRound"  # internal: a round's deadline passed
ROUTE_ACTION = "route"  # recorded requests of decisions made by a job
JUDGMENT_ACTION = "judgment"  # recorded requests of the coordinator's own turns

# reason codes (ours) of the refusals below
NOT_ON_ROSTER = "worker-not-on-roster"
CANNOT_TAKE_WORK = "delegate-cannot-take-work"
ALREADY_A_DELEGATE = "delegate-already-listed"
DELEGATES_FULL = "delegates-full"
NOT_A_DELEGATE = "delegate-not-listed"
FALLBACK_NOT_A_DELEGATE = "fallback-not-a-delegate"
STATE_FIELD_RESERVED = "state-field-reserved"
COORDINATOR_NOT_FOUND = "coordinator-not-found"
RESERVED_STATE_FIELDS = ("delegates", "fallback")


# ---------------------------------------------------------------- the spec's sentences


def no_worker_on_roster(worker: str) -> str:
    return f'No worker "{worker}" on your roster.'


def takes_neither(worker: str, flow: str) -> str:
    return f'Worker "{worker}" runs on flow "{flow}", which takes neither a delegated post nor a task.'


def already_a_delegate(worker: str) -> str:
    return f'"{worker}" is already a delegate in this conversation.'


def delegates_full() -> str:
    return f"This conversation already has {MAX_DELEGATES} delegates, the most it can hold. Remove one first."


def not_a_delegate(worker: str) -> str:
    return f'"{worker}" isn\'t a delegate in this conversation.'


def not_a_delegate_to_hand(worker: str) -> str:
    """Why a hand-off to a worker not on the list is skipped (the coordinator's handOff)."""
    return f'"{worker}" isn\'t a delegate in this conversation. Add it first.'


def fallback_not_a_delegate(worker: str) -> str:
    return f"\"{worker}\" isn't a delegate in this conversation, so it can't be the fallback."


def cannot_take_post(worker: str, flow: str) -> str:
    return f'Worker "{worker}" runs on flow "{flow}", which can\'t take a delegated post.'


def state_field_reserved(field: str) -> str:
    return f'Session state field "{field}" is written only by flow "{KIND}"; a caller cannot set it.'


def nobody_best_fit(error: str) -> str:
    return f"Nobody took this post: best fit couldn't place it, and the coordinator's own turn failed: {error}."


NOBODY_REACHABLE = "Nobody took this post: no delegate in this conversation can be reached."


def nobody_judgment(error: str) -> str:
    return f"Nobody took this post: the coordinator's own turn failed: {error}."


DELEGATE_CANCELLED = "its turn failed: its run was cancelled"  # a cancelled delegate's report
ANSWERED_ITSELF = "the coordinator handed it to no delegate"
ALREADY_HANDED = "it was already handed this post in this round"


def nothing_to_pass_on(round_number: int) -> str:
    return f"no other delegate answered in round {round_number}"


def rounds_full_note(round_number: int) -> str:
    """The record's note when a round could not be opened (50 already wait for answers)."""
    return (
        f"this conversation already has {MAX_OPEN_ROUNDS} rounds waiting for answers, "
        f"so answers in round {round_number} go no further"
    )


def turn_text(writer: str, coordinator: str, post: str) -> str:
    """What a delegate's door is handed: ``<from>, through <coordinator>: <post>``."""
    return f"{writer}, through {coordinator}: {post}"


def judgment_agent_name(coordinator: str) -> str:
    """The agentName of a reply the coordinator writes itself: starts with
    ``coordinator-judgment``."""
    return f"{COORDINATOR_JUDGMENT}:{coordinator}"
