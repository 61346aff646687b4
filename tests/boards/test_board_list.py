"""``GET /api/boards``: the organization's boards, filtered and paged in DRF's usual shape
(``{count, next, previous, results}``), read by each board's mailbox's rule."""

from __future__ import annotations

import pytest

from boards.models import TaskStatus
from mailboxes.queries import list_boards

from ..conftest import MEMBER, OWNER, open_mailboxes
from .conftest import BOARD_TREE, ESCALATIONS, FOLLOWUPS, HELP_ESCALATIONS, force_status

ALL_BOARDS = [ESCALATIONS, FOLLOWUPS, HELP_ESCALATIONS]


def _ids(page: dict) -> list[str]:
    return [board["id"] for board in page["results"]]


def test_the_boards_of_the_opened_mailboxes_with_their_counts(client, boards_open, file_row):
    done = file_row(FOLLOWUPS)
    force_status(done, TaskStatus.COMPLETED)
    file_row(FOLLOWUPS)
    response = client.get("/api/boards")
    assert response.status_code == 200
    page = response.json()
    assert set(page) == {"count", "next", "previous", "results"}
    assert page["count"] == 3 and page["next"] is None and page["previous"] is None
    assert _ids(page) == ALL_BOARDS
    followups = next(b for b in page["results"] if b["id"] == FOLLOWUPS)
    assert followups["mailbox"] == "eng.incidents" and followups["name"] == "followups" and followups["declared"] is True
    assert followups["counts"] == {status: 0 for status in TaskStatus.values} | {"pending": 1, "completed": 1}
    assert followups["tasks"] == f"http://testserver/api/boards/{FOLLOWUPS}/tasks"
    assert client.get(followups["tasks"]).json()["boardId"] == FOLLOWUPS


def test_filters(client, boards_open, file_row):
    file_row(HELP_ESCALATIONS)
    assert _ids(client.get("/api/boards?mailbox=eng.incidents").json()) == [ESCALATIONS, FOLLOWUPS]
    assert _ids(client.get("/api/boards?mailbox=nobody").json()) == []
    assert _ids(client.get("/api/boards?status=pending").json()) == [HELP_ESCALATIONS]
    assert _ids(client.get("/api/boards?status=completed").json()) == []
    response = client.get("/api/boards?status=done")
    assert response.status_code == 400 and response.json()["error"]["reason"] == "invalid-input"


def test_paging(client, boards_open):
    first = client.get("/api/boards?limit=2").json()
    assert first["count"] == 3 and _ids(first) == ALL_BOARDS[:2] and first["previous"] is None
    second = client.get(first["next"]).json()
    assert _ids(second) == ALL_BOARDS[2:] and second["next"] is None and second["previous"] is not None


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("limit=-1&offset=-5", "limit must be a whole number, not '-1'."),
        ("limit=0", "limit must be between 1 and 1000."),
        ("limit=1001", "limit must be between 1 and 1000."),
        ("limit=1e20&offset=1e20", "limit must be a whole number, not '1e20'."),
        ("offset=-5", "offset must be a whole number, not '-5'."),
        ("offset=1e20", "offset must be a whole number, not '1e20'."),
        ("offset=99999999999999998999", "offset must be at most 999999999999999999."),
    ],
)
def test_a_limit_or_offset_out_of_range_is_refused_like_the_other_lists(client, boards_open, query, message):
    response = client.get(f"/api/boards?{query}")
    assert response.status_code == 400
    assert response.json()["error"] == {"reason": "invalid-input", "message": f"invalid-input: {message}"}


def test_the_largest_offset_is_an_empty_page(client, boards_open):
    page = client.get("/api/boards?limit=2&offset=999999999999999999").json()
    assert page["count"] == 3 and _ids(page) == [] and page["next"] is None
    assert "offset=999999999999999997" in page["previous"]


def test_a_ledger_kept_from_before_is_listed_as_not_declared(client, open_tree, org, file_row):
    open_tree()  # the standard tree: eng.incidents holds followups only
    file_row("eng.incidents.retired")
    page = client.get("/api/boards?mailbox=eng.incidents").json()
    assert [(b["id"], b["declared"]) for b in page["results"]] == [
        ("eng.incidents.followups", True),
        ("eng.incidents.retired", False),
    ]


def test_another_organization_s_boards_are_not_listed(client, make_tree, other_org, file_row):
    open_mailboxes(make_tree(BOARD_TREE), other_org, user_id=OWNER)
    file_row(FOLLOWUPS, in_org=other_org)
    # Opened and filed on in acme only: the default organization (no authentication) has no boards.
    assert client.get("/api/boards", {"userId": MEMBER}).json()["count"] == 0


def test_the_list_costs_two_queries_whatever_the_number_of_boards(boards_open, org, file_row, django_assert_num_queries):
    for board_id in ALL_BOARDS:
        file_row(board_id)
    with django_assert_num_queries(2):  # the rows per status, the mailboxes' sessions
        boards = list_boards(org, reader=MEMBER)
    assert [b.board_id for b in boards] == ALL_BOARDS
