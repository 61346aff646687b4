"""A person's own roster over HTTP (seats.api; spec 004 "Who can be a delegate", "What it
won't do"): hire from a WORKER.md text, fork, fire, list and read, with the scope rule
``seats.queries.reachable_seats`` (own, then the organization's, then standard)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from seats.models import Seat
from tests.conftest import hire_tree
from workforce.tools import refusal_code

from .conftest import worker_md

ME, YOU = "u_1", "u_2"
SCRIBE_MD = worker_md("Takes short notes.", model="embedded/echo", body="Take short notes.")
TREE = {
    "teams/support/workers/devices/WORKER.md": worker_md("Phones and laptops.", model="embedded/echo"),
    "teams/support/workers/general/WORKER.md": worker_md("Anything else.", model="embedded/echo"),
}


@pytest.fixture
def client():
    return APIClient()


@pytest.fixture
def standard(make_tree, db):
    """The tree's workers, hired as standard (shared) seats."""
    return hire_tree(make_tree(TREE))


def hire(client, worker_id="u1.scribe", text=SCRIBE_MD, *, user_id=ME):
    return client.post("/api/workers", {"userId": user_id, "id": worker_id, "workerMd": text}, format="json")


def refused(response, status: int, reason: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["status"] == "failed" and body["error"]["reason"] == reason, body
    assert body["error"]["message"].startswith(f"{reason}: ")
    return body["error"]


def test_a_hire_writes_one_row_of_the_callers_own(client, standard, org):
    response = hire(client)
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["id"] == "u1.scribe" and data["flow"] == "agent" and data["scope"] == "own"
    assert data["standard"] is False and data["description"] == "Takes short notes."
    assert data["instructions"] == "Take short notes." and data["model"] == "embedded/echo"
    assert response["Location"].endswith("/api/workers/u1.scribe")
    seat = Seat.objects.get(seat_id="u1.scribe")
    assert (seat.scope, seat.organization_id, seat.owner_user_id) == ("own", org.pk, ME)
    assert client.get("/api/workers/u1.scribe", {"userId": ME}).json() == data


def test_a_refused_hire_names_every_problem_at_once_and_writes_nothing(client, standard):
    text = worker_md("Notes.", colour="blue", flow="nonesuch", model="acme/big", rounds="many")
    error = refused(hire(client, "Bad Id", text), 400, "invalid-worker")
    problems = error["problems"]
    assert len(problems) == 5, problems
    assert problems[0].startswith('id: "Bad Id" is not a worker id')
    assert any('declares "colour", which a worker cannot declare' in p for p in problems)
    assert any("rounds: must be a whole number" in p for p in problems)
    assert any(p.startswith('flow: names the kind "nonesuch", which was not registered') for p in problems)
    assert any(p.startswith("model: ") and '"acme"' in p for p in problems)
    assert error["message"].startswith('invalid-worker: worker "Bad Id" can\'t be hired: 5 problems: ')
    assert error["message"].endswith("Nothing was written.")
    assert not Seat.objects.filter(scope="own").exists()


def test_a_hire_reads_the_file_with_the_trees_strict_parser(client, standard):
    for text, expected in (
        ("no frontmatter here", "the file carries no frontmatter"),
        ("---\ndescription: a\ndescription: b\n---\n", "duplicate key"),
        ("---\ndescription: notes\ninstructions: one\n---\nand a body\n", "a body and instructions: are both given"),
        ("---\ndescription: notes\ntools: [send-email]\n---\n", 'tools: names "send-email", which the agent kind does not offer'),
    ):
        error = refused(hire(client, "u1.x", text), 400, "invalid-worker")
        assert any(expected in p for p in error["problems"]), (text, error)
    assert not Seat.objects.filter(scope="own").exists()


def test_yaml_1_1_words_stay_text(client, standard):
    response = hire(client, "u1.norway", "---\ndescription: no\n---\nSay no.\n")
    assert response.status_code == 201, response.content
    assert response.json()["description"] == "no"


def test_a_malformed_body_is_invalid_input(client, standard):
    refused(client.post("/api/workers", {"userId": ME, "id": "u1.x"}, format="json"), 400, "invalid-input")
    refused(
        client.post("/api/workers", {"userId": ME, "id": "u1.x", "workerMd": SCRIBE_MD, "x": 1}, format="json"),
        400,
        "invalid-input",
    )
    refused(client.post("/api/workers", ["nope"], format="json"), 400, "invalid-input")
    refused(client.post("/api/workers", {"id": "u1.x", "workerMd": SCRIBE_MD}, format="json"), 400, "invalid-input")


def test_an_id_already_on_your_own_roster_is_refused(client, standard):
    assert hire(client).status_code == 201
    error = refused(hire(client, text=worker_md("Another.")), 409, "worker-already-on-roster")
    assert error["message"] == (
        'worker-already-on-roster: "u1.scribe" is already on your roster. Pick another id. Nothing was written.'
    )
    assert Seat.objects.get(seat_id="u1.scribe").description == "Takes short notes."
    assert hire(client, user_id=YOU).status_code == 201  # the same id on someone else's roster is theirs


def test_another_users_worker_is_not_on_your_roster(client, standard):
    assert hire(client).status_code == 201
    sentence = 'worker-not-on-roster: No worker "u1.scribe" on your roster.'
    for response in (
        client.get("/api/workers/u1.scribe", {"userId": YOU}),
        client.delete("/api/workers/u1.scribe?userId=u_2"),
        client.post("/api/workers/u1.scribe/fork", {"userId": YOU}, format="json"),
        client.get("/api/workers/u1.nobody", {"userId": ME}),
    ):
        error = refused(response, 404, "worker-not-on-roster")
        assert error["message"] in (sentence, 'worker-not-on-roster: No worker "u1.nobody" on your roster.')
    assert [w["id"] for w in client.get("/api/workers", {"userId": YOU}).json()["results"]] == [
        "support.devices",
        "support.general",
    ]
    assert Seat.objects.filter(seat_id="u1.scribe").count() == 1


def test_the_roster_lists_your_own_then_the_organizations_then_the_standard_ones(client, standard, org, other_org):
    Seat.objects.create(seat_id="ops", kind="agent", scope="org", organization=org, description="Ours.")
    Seat.objects.create(seat_id="acme.ops", kind="agent", scope="org", organization=other_org)
    assert hire(client, "zed").status_code == 201
    assert hire(client, "support.devices", worker_md("My own devices person.")).status_code == 201  # shadows the standard
    assert hire(client, "u2.notes", user_id=YOU).status_code == 201
    page = client.get("/api/workers", {"userId": ME}).json()
    assert set(page) == {"count", "next", "previous", "results"}
    assert page["count"] == 4 and page["next"] is None and page["previous"] is None
    assert [(w["id"], w["scope"], w["standard"]) for w in page["results"]] == [
        ("support.devices", "own", False),
        ("zed", "own", False),
        ("ops", "org", False),
        ("support.general", "shared", True),
    ]
    assert page["results"][0]["description"] == "My own devices person."
    first = client.get("/api/workers", {"userId": ME, "limit": 2}).json()
    assert [w["id"] for w in first["results"]] == ["support.devices", "zed"] and first["count"] == 4
    assert "offset=2" in first["next"]
    second = client.get(first["next"]).json()
    assert [w["id"] for w in second["results"]] == ["ops", "support.general"] and second["next"] is None
    anonymous = client.get("/api/workers").json()
    assert [w["id"] for w in anonymous["results"]] == ["ops", "support.devices", "support.general"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"limit": -1, "offset": -1}, "limit must be a whole number, not '-1'."),
        ({"limit": 0}, "limit must be between 1 and 1000."),
        ({"offset": -1}, "offset must be a whole number, not '-1'."),
        ({"offset": "1e20"}, "offset must be a whole number, not '1e20'."),
    ],
)
def test_a_limit_or_offset_out_of_range_is_refused(client, standard, query, message):
    refusal = refused(client.get("/api/workers", {"userId": ME, **query}), 400, "invalid-input")
    assert refusal["message"] == f"invalid-input: {message}"


def test_a_worker_of_your_own_is_granted_no_capability(client, standard):
    """mail.send is the team's: a person without the mail.send permission must not mail
    through a worker of their own."""
    text = "---\ndescription: Mails.\nmodel: embedded/echo\ncapabilities:\n  mail.send: ['*']\nrun:\n  triggers: [chat]\n---\nx\n"
    error = refused(hire(client, "u1.mailer", text), 400, "invalid-worker")
    assert (
        "capabilities: a worker of your own is granted no capability; capabilities: (mail.send) are declared in the workforce tree"
        in error["message"]
    )
    assert not Seat.objects.filter(scope=Seat.Scope.OWN).exists()


def test_the_principal_the_mailboxes_run_as_hires_and_forks_nobody(client, standard, settings):
    """Its own worker would be the one every mailbox it runs reaches, in place of the
    standard seat."""
    office = settings.WORKFORCE_OPEN_USER
    error = refused(hire(client, "support.devices", user_id=office), 403, "office-has-no-roster")
    assert error["message"] == (
        f'office-has-no-roster: "{office}" is the principal the mailboxes run as; a worker of its own would answer in '
        "every mailbox. Hire as yourself. Nothing was written."
    )
    refused(client.post("/api/workers/support.devices/fork", {"userId": office}, format="json"), 403, "office-has-no-roster")
    assert not Seat.objects.filter(scope=Seat.Scope.OWN).exists()


def test_a_fork_copies_a_standard_worker_into_your_own(client, standard):
    response = client.post("/api/workers/support.devices/fork", {"userId": ME, "id": "u1.devices"}, format="json")
    assert response.status_code == 201, response.content
    fork = response.json()
    source = client.get("/api/workers/support.devices", {"userId": ME}).json()
    assert fork["scope"] == "own" and fork["forkedFrom"] == "support.devices" and source["scope"] == "shared"
    for key in ("flow", "description", "model", "tools", "instructions", "settings"):
        assert fork[key] == source[key], key
    same = client.post("/api/workers/support.devices/fork", {"userId": ME}, format="json")
    assert same.status_code == 201 and same.json()["id"] == "support.devices"  # your own now wins for you
    assert client.get("/api/workers/support.devices", {"userId": ME}).json()["scope"] == "own"
    assert client.get("/api/workers/support.devices", {"userId": YOU}).json()["scope"] == "shared"
    refused(client.post("/api/workers/support.devices/fork", {"userId": ME}, format="json"), 409, "worker-already-on-roster")
    bad = refused(
        client.post("/api/workers/support.general/fork", {"userId": ME, "id": "A B"}, format="json"), 400, "invalid-worker"
    )
    assert bad["problems"][0].startswith('id: "A B" is not a worker id')
    assert Seat.objects.get(seat_id="support.devices", scope="shared").forked_from == ""  # the standard one is untouched


def test_firing_deletes_your_own_and_nothing_else(client, standard):
    assert hire(client).status_code == 201
    assert client.delete("/api/workers/u1.scribe?userId=u_1").status_code == 204
    assert not Seat.objects.filter(seat_id="u1.scribe").exists()
    refused(client.get("/api/workers/u1.scribe", {"userId": ME}), 404, "worker-not-on-roster")
    refused(client.delete("/api/workers/u1.scribe?userId=u_1"), 404, "worker-not-on-roster")
    error = refused(client.delete("/api/workers/support.devices?userId=u_1"), 409, "worker-not-your-own")
    assert error["message"] == (
        'worker-not-your-own: "support.devices" is a standard worker, which you can\'t fire. Fork it to get a worker of your own.'
    )
    # Firing your own copy of a standard worker puts the standard one back on your roster.
    assert client.post("/api/workers/support.devices/fork", {"userId": ME}, format="json").status_code == 201
    assert client.delete("/api/workers/support.devices", {"userId": ME}, format="json").status_code == 204
    assert client.get("/api/workers/support.devices", {"userId": ME}).json()["scope"] == "shared"
    assert Seat.objects.filter(seat_id="support.devices").count() == 1


def test_your_own_coordinator_may_name_workers_on_your_roster_only(client, standard):
    assert hire(client, "u2.secret", user_id=YOU).status_code == 201
    assert hire(client).status_code == 201
    coordinator = "---\ndescription: My desk.\nflow: coordinator\ndelegates: [u1.scribe, support.devices]\n---\nRoute it.\n"
    response = hire(client, "u1.desk", coordinator)
    assert response.status_code == 201, response.content
    assert response.json()["settings"]["delegates"] == ["u1.scribe", "support.devices"]
    theirs = "---\ndescription: My desk.\nflow: coordinator\ndelegates: [u2.secret]\n---\n"
    error = refused(hire(client, "u1.desk2", theirs), 400, "invalid-worker")
    assert any('delegates: names "u2.secret"' in p for p in error["problems"])


def test_the_schema_documents_the_roster(client, db):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert {"get", "post"} <= set(paths["/api/workers"])
    assert {"get", "delete"} <= set(paths["/api/workers/{worker}"])
    assert "post" in paths["/api/workers/{worker}/fork"]
    assert "400" in paths["/api/workers"]["post"]["responses"]


def test_an_own_seat_fired_after_the_start_is_woken_no_more(wired, post, client, org):
    """A process holds the seats it was handed at start (what ``serve`` hands the notify
    block includes each person's own, ``seats_to_wake``); one fired since has no seat."""
    from mailboxes.models import Delivery
    from tests.conftest import OWNER
    from workforce.llm import use_model_resolver
    from workforce.models import Request
    from workforce.testing import create_mock_model_resolver

    mine = Seat.objects.create(seat_id="eng.lead", kind="agent", scope="own", organization=org, owner_user_id=OWNER)
    wired(extra_seats=[mine])
    assert client.delete("/api/workers/eng.lead", {"userId": OWNER}, format="json").status_code == 204
    with use_model_resolver(create_mock_model_resolver({"*": lambda call: "ok"})):
        post("eng.incidents", "hello")
    woken = dict(Delivery.objects.values_list("member", "seat__scope"))
    assert woken == {"eng.lead": "shared", "eng.analyst": "shared"}  # the standard lead again
    fan_out = Request.objects.get(session__session_id="eng.incidents", action="notify")
    assert fan_out.status == "completed"


def test_your_own_worker_never_posts_as_the_member_it_shadows_in_someone_elses_mailbox(
    wired, org, django_capture_on_commit_callbacks
):
    """A person's own worker with a member's id speaks in a mailbox only where the
    mailbox's principal reaches it; a standard seat is checked by the mailbox as before."""
    from mailboxes.models import Line
    from seats.capabilities import post_to_mailbox
    from seats.turns import SEAT_EXTRA
    from tests.conftest import OWNER
    from workforce.tools import ToolContext

    seats = wired()
    standard = next(s for s in seats if s.seat_id == "eng.lead")
    theirs = Seat.objects.create(seat_id="eng.lead", kind="agent", scope="own", organization=org, owner_user_id=YOU)
    principals = Seat.objects.create(seat_id="eng.lead", kind="agent", scope="own", organization=org, owner_user_id=OWNER)

    def call(seat):
        ctx = ToolContext(org=org, seat_id="eng.lead", extras={SEAT_EXTRA: seat})
        with django_capture_on_commit_callbacks(execute=False):
            return post_to_mailbox(ctx, {"mailbox": "eng.incidents", "body": f"from {seat.scope} {seat.owner_user_id}"})

    answer = call(theirs)
    assert refusal_code(answer) == "author-not-a-member", answer
    assert not Line.objects.exists()
    assert call(principals)["ok"] is True  # the seat the mailbox's principal reaches
    assert call(standard)["ok"] is True  # a standard seat: the mailbox checks the member
    assert [line.body for line in Line.objects.order_by("seq")] == ["from own u_owner", "from shared "]


def test_a_worker_of_your_own_holds_no_board(client, make_tree, db):
    hire_tree(
        make_tree({**TREE, "teams/eng/workers/triage/WORKER.md": worker_md("Triage.", boardTools="[eng.incidents.followups]")})
    )
    text = worker_md("Drains it.", drains="[eng.incidents.followups]", boardTools="[eng.incidents.other]")
    error = refused(hire(client, "u1.drainer", text), 400, "invalid-worker")
    assert [p for p in error["problems"] if "holds no board" in p] == [
        "drains: a worker of your own holds no board; drains: and boardTools: are declared in the workforce tree",
        "boardTools: a worker of your own holds no board; drains: and boardTools: are declared in the workforce tree",
    ]
    fork = client.post("/api/workers/eng.triage/fork", {"userId": ME, "id": "u1.triage"}, format="json").json()
    assert fork["settings"] == {} and fork["forkedFrom"] == "eng.triage"
    assert client.get("/api/workers/eng.triage", {"userId": ME}).json()["settings"] == {"boardTools": ["eng.incidents.followups"]}
