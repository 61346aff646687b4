"""Kernel services that are not actions: memberships (which organization an
authenticated user acts in)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction

from .models import DEFAULT_ORG_ID, Membership, Organization
from .principals import user_id_problem


class MembershipRefused(Exception):
    """``do_add_member`` did nothing; the message says why and what to do instead."""


@dataclass(frozen=True)
class MembershipOutcome:
    """What ``do_add_member`` did: ``created_user`` when it made the user, and
    ``outcome`` one of ``"added"``, ``"already"`` (nothing changed) or ``"moved"``
    (``previous_org`` names where the user was)."""

    username: str
    org_id: str
    outcome: str
    created_user: bool = False
    previous_org: str | None = None


def do_add_member(username: str, org_id: str, *, create_user: bool = False, move: bool = False) -> MembershipOutcome:
    """Make ``username`` act in organization ``org_id`` under ``WORKFORCE_AUTH=token``
    (a ``Membership``), in one transaction.

    Args:
        username: an existing Django user's username; with ``create_user`` a missing one
            is created (no usable password: it authenticates with a token).
        org_id: an existing organization's id; the default organization always exists.
        move: a user acts in one organization; a user already in another is moved only
            when this is true.

    Raises:
        MembershipRefused: a username that breaks ``USER_ID_RULE``, no such
            organization, no such user (without ``create_user``),
            or the user is in another organization (without ``move``).
    """
    problem = user_id_problem(username, label="username")
    if problem is not None:  # a username is the user id its sessions are named by
        raise MembershipRefused(problem)
    with transaction.atomic():
        found: Organization | None
        if org_id == DEFAULT_ORG_ID:
            found, _ = Organization.objects.get_or_create(id=org_id)
        else:
            found = Organization.objects.filter(id=org_id).first()
        if found is None:
            known = ", ".join(Organization.objects.order_by("id").values_list("id", flat=True)[:20]) or "none"
            raise MembershipRefused(f"no organization {org_id!r} (known: {known}); `open_mailboxes --org {org_id}` creates one")
        org = found
        users = get_user_model()
        user = users.objects.filter(username=username).first()
        created = False
        if user is None:
            if not create_user:
                raise MembershipRefused(f"no user {username!r}; pass --create to create it")
            user = users.objects.create_user(username=username)  # no password: a token authenticates it
            created = True
        membership = Membership.objects.select_for_update().filter(user=user).first()
        if membership is None:
            Membership.objects.create(user=user, organization=org)
            return MembershipOutcome(username, org.id, "added", created_user=created)
        if membership.organization_id == org.id:
            return MembershipOutcome(username, org.id, "already")
        if not move:
            raise MembershipRefused(
                f"{username!r} is a member of {membership.organization_id!r} and a user acts in one organization; "
                "pass --move to move it"
            )
        previous = membership.organization_id
        membership.organization = org
        membership.save(update_fields=["organization"])
        return MembershipOutcome(username, org.id, "moved", previous_org=previous)
