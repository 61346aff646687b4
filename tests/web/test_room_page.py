"""The room page in process (docs/pages.md "The pages", "Projects and rooms"): what it shows,
who may open it (members only; anyone else, or another organization, is 404), the post
form through the person's own talk session (joined first when they have none), and
bodies escaped."""

from __future__ import annotations

from mailboxes.models import RoomLine, TalkListing
from mailboxes.projects import do_create_project
from tests.rooms.conftest import ALICE, BOB, CHARTER, OUTSIDER, SEATS, act, project, room_tree, rooms_runtime  # noqa: F401
from web.views import SESSION_USER


def as_user(client, user_id):
    session = client.session
    session[SESSION_USER] = user_id
    session.save()
    return client


def test_the_room_page_shows_the_project_its_lines_under_their_authors_charter_and_seats(client, project, act):
    _, alice_talk, _ = project
    act(alice_talk, "post", {"body": "What is blocked?"}, user_id=ALICE)
    page = as_user(client, BOB).get("/projects/launch/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<h1>Launch</h1>" in html
    assert f'<span id="members">{ALICE}, {BOB}</span>' in html
    assert CHARTER in html and all(f"<li>{seat}</li>" in html for seat in SEATS)
    lines = list(RoomLine.objects.order_by("seq"))
    assert [line.author or line.user_id for line in lines] == [ALICE, *SEATS]
    for line in lines:
        assert f'id="line-{line.seq}"' in html
    assert '<span class="from">eng.lead</span>' in html and '<span class="from">u_alice</span>' in html
    assert 'sse-connect="/projects/launch/events?since=3%3A3"' in html
    home = client.get("/").content.decode()
    assert 'href="/projects/launch/"' in home


def test_only_members_see_the_room_and_another_organizations_project_is_404(client, project, other_org):
    do_create_project(other_org, owner=BOB, title="Elsewhere", project_id="elsewhere")
    as_user(client, OUTSIDER)
    for path in ("/projects/launch/", "/projects/launch/events", "/projects/nope/", "/projects/elsewhere/"):
        assert client.get(path).status_code == 404, path
    assert client.post("/projects/launch/post", {"body": "let me in"}).status_code == 404
    assert 'href="/projects/launch/"' not in client.get("/").content.decode()
    as_user(client, BOB)
    assert client.get("/projects/elsewhere/").status_code == 404  # a member there, but not in this organization
    assert RoomLine.objects.count() == 0


def test_the_post_form_joins_first_then_posts_through_the_persons_talk_session(
    client, room_tree, org, django_capture_on_commit_callbacks
):
    room_tree()
    do_create_project(org, owner=ALICE, title="Launch", project_id="launch", members=[BOB])
    assert not TalkListing.objects.filter(user_id=BOB).exists()
    as_user(client, BOB)
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post("/projects/launch/post", {"body": "first from Bob"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200 and b"posted" in answer.content
    listing = TalkListing.objects.get(user_id=BOB)
    line = RoomLine.objects.get(seat_authored=False)
    assert (line.user_id, line.body, line.session_id) == (BOB, "first from Bob", listing.session_id)
    assert sorted(RoomLine.objects.filter(seat_authored=True).values_list("author", flat=True)) == sorted(SEATS)
    with django_capture_on_commit_callbacks(execute=True):
        again = client.post("/projects/launch/post", {"body": "second"})
    assert again.status_code == 302 and again["Location"] == "/projects/launch/"
    assert TalkListing.objects.filter(user_id=BOB).count() == 1
    assert RoomLine.objects.get(body="second").session_id == listing.session_id
    page = client.get("/projects/launch/").content.decode()
    assert f"through your talk session {listing.session.session_id}" in page


def test_room_bodies_and_titles_are_escaped(client, project, act):
    _, alice_talk, _ = project
    act(alice_talk, "post", {"body": "<script>alert(1)</script>"}, user_id=ALICE, run=False)
    page = as_user(client, ALICE).get("/projects/launch/").content.decode()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_refused_room_post_keeps_what_was_typed(client, room_tree, org):
    room_tree()
    do_create_project(org, owner=ALICE, title="Launch", project_id="launch", members=[BOB])
    as_user(client, ALICE)
    refused = client.post("/projects/launch/post", {"body": "y" * 33_000}, HTTP_HX_REQUEST="true")
    assert "HX-Trigger" not in refused and b'data-reason="invalid-input"' in refused.content
    assert client.post("/projects/launch/post", {"body": "   "}).status_code == 302
    form = client.get("/projects/launch/").content.decode().split('id="post-form"', 1)[1].split("</form>", 1)[0]
    assert ">   </textarea>" in form and 'data-reason="invalid-input"' in form
    assert not RoomLine.objects.filter(seat_authored=False).exists()
