"""Seats are rows, visible in the admin; deliveries are read-only there."""

from __future__ import annotations

from django.urls import reverse

from mailboxes.models import Delivery
from seats.models import Seat, TurnSlot


def test_seats_and_deliveries_show_in_the_admin(admin_client, wired, post):
    wired()
    post("eng.incidents", "hello")
    seats = admin_client.get(reverse("admin:seats_seat_changelist")).content.decode()
    assert "eng.lead" in seats and "eng.analyst" in seats
    seat = Seat.objects.get(seat_id="eng.lead")
    assert admin_client.get(reverse("admin:seats_seat_change", args=[seat.pk])).status_code == 200
    deliveries = admin_client.get(reverse("admin:mailboxes_delivery_changelist")).content.decode()
    assert "eng.lead" in deliveries
    delivery = Delivery.objects.get(member="eng.lead")
    page = admin_client.get(reverse("admin:mailboxes_delivery_change", args=[delivery.pk]))
    assert page.status_code == 200
    assert admin_client.post(reverse("admin:mailboxes_delivery_change", args=[delivery.pk]), {}).status_code == 403


def test_turn_slots_show_in_the_admin_read_only(admin_client, wired, post):
    wired()
    post("eng.incidents", "hello")
    slot = TurnSlot.objects.get(seat_id="eng.lead", session__session_id="eng.incidents:eng.lead")
    assert "eng.lead" in admin_client.get(reverse("admin:seats_turnslot_changelist")).content.decode()
    page = admin_client.get(reverse("admin:seats_turnslot_change", args=[slot.pk]))
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert admin_client.get(reverse("admin:seats_turnslot_add")).status_code == 403
