"""Running routing: the route model check, the route sweeper, the admin."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from mailboxes.checks import check_route_model
from mailboxes.models import Route
from mailboxes.routing import do_sweep_routes

from .conftest import DEVICES, route_items, route_of


def test_a_route_model_nobody_knows_stops_the_server(settings):
    settings.WORKFORCE_ROUTE_MODEL = "embedded/nope"
    (error,) = check_route_model()
    assert error.id == "workforce.E003" and "embedded/lexical" in error.msg
    settings.WORKFORCE_ROUTE_MODEL = "openai/gpt-4o-mini"
    assert check_route_model() == []
    settings.WORKFORCE_ROUTE_MODEL = ""
    assert check_route_model() == []


def test_the_sweeper_enqueues_a_dropped_route_again_once(routed, post, django_capture_on_commit_callbacks):
    routed()
    post("my printer is jammed", run=False)  # the broker lost the route task
    route = route_of("my printer is jammed")
    assert do_sweep_routes() == []  # not overdue yet
    later = timezone.now() + timedelta(hours=1)
    with django_capture_on_commit_callbacks(execute=True):
        assert do_sweep_routes(now=later) == [route.pk]
    assert do_sweep_routes(now=later) == []  # decided now
    assert [(i["member"], i["by"]) for i in route_items()] == [(DEVICES, "evaluated")]
    assert Route.objects.get().decided_at is not None


def test_the_admin_shows_routes_read_only(routed, post, admin_client):
    routed()
    post("my printer is jammed")
    page = admin_client.get("/admin/mailboxes/route/")
    assert page.status_code == 200 and b"support.devices" in page.content
    assert admin_client.get("/admin/mailboxes/routeledger/").status_code == 200
    assert admin_client.get("/admin/mailboxes/route/add/").status_code == 403
