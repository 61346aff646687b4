"""Who is calling (spec "Which organization a mailbox runs in").

Without authentication (``WORKFORCE_AUTH=none``) the caller names itself with ``userId``
and runs in ``DEFAULT_ORG_ID``, the development case. With authentication the principal
is the authenticated user and the organization its membership names; a ``userId`` that
names someone else is refused (403).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.sessions.models import Session as LoginSession
from django.db.models import Exists, OuterRef
from django.http import Http404
from django.utils import timezone
from rest_framework.authtoken.models import Token

from .models import DEFAULT_ORG_ID, Membership, Organization
from .posted_by import PostedBy, as_posted_by, seat_posted_by, user_posted_by
from .refusals import Refusal
from .sessions import ensure_organization
from .wire import MAX_USER_ID_LENGTH

# Set on a DRF request by the API's org throttle (workforce.api.throttles.token_membership).
MEMBERSHIP_ATTR = "_workforce_membership"

# A user id names a person the way the spec's principals do ("u_42", an email for
# "human:<email>"; a Django user name in token mode): ASCII letters and digits, then also
# "." "_" "@" "+" "-". Nothing else: a ":" could spell another user's session id
# ("<worker>:<user>"), a "/" would make a conversation's URL unreachable, and control
# characters, spaces and look-alike letters would put names in ids and logs that read as
# someone else's. It starts with a letter or digit, so it is never "." or "..".
USER_ID_RULE = "ASCII letters, digits and . _ @ + - only, starting with a letter or digit, at most 200 characters"
_USER_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]*")


def user_id_problem(value: object, *, label: str = "userId") -> str | None:
    """Why ``value`` is not a user id (``USER_ID_RULE``), as one sentence naming
    ``label``; None when it is one. Never raises."""
    if not isinstance(value, str) or not value.strip():
        return f"{label} must be a non-empty string."
    if ":" in value:
        # Session ids are built from user ids ("<worker>:<user>"): the rule's most
        # likely breach gets its own sentence.
        return f'{label} can\'t contain ":" (session ids are built from user ids): {USER_ID_RULE}.'
    if len(value) > MAX_USER_ID_LENGTH or _USER_ID_PATTERN.fullmatch(value) is None:
        shown = ascii(value[:40]) + ("..." if len(value) > 40 else "")
        return f"{label} {shown} is not a user id: {USER_ID_RULE}."
    return None


def check_user_id(value: object, *, label: str = "userId") -> str:
    """``value`` when it is a user id (``USER_ID_RULE``): every ``userId`` a caller sends
    (REST, pages, streams, the MCP server: all through ``resolve_principal``) and every
    user a caller names as someone else (a project's ``members``, ``member``).

    Raises:
        Refusal("invalid-input"): 400, saying what the rule is.
    """
    problem = user_id_problem(value, label=label)
    if problem is not None or not isinstance(value, str):  # user_id_problem refuses a non-str
        raise Refusal("invalid-input", problem or f"{label} is not a user id: {USER_ID_RULE}.")
    return value


@dataclass(frozen=True)
class Principal:
    """A verified caller: ``user_id`` and the organization it acts in.

    ``anonymous`` is True for a read without authentication that named nobody: it acts
    as ``"anonymous"`` but reads as nobody (``reader`` is None), so it never reads a
    private session, even one a user named "anonymous" owns.
    """

    user_id: str
    org: Organization
    anonymous: bool = False
    # True when authentication established ``user_id`` (token or login), False when the
    # caller named itself (``WORKFORCE_AUTH=none``) or a server command acts as it.
    authenticated: bool = False

    @property
    def reader(self) -> str | None:
        """The user id reads are checked against (``workforce.privacy.may_read``)."""
        return None if self.anonymous else self.user_id

    @property
    def posted_by(self) -> PostedBy:
        """What a line this principal posts records as its ``postedBy``."""
        return user_posted_by(self.user_id, verified=self.authenticated)


def resolve_principal(http_request, claimed_user_id: object, *, require_user: bool = True) -> Principal:
    """The principal for an HTTP request.

    Args:
        http_request: the DRF request (``.user`` is set when authentication is on).
        claimed_user_id: the body's or query's ``userId`` (may be None).
        require_user: reads pass False: without authentication they need no ``userId``.

    Raises:
        Refusal("invalid-input"): no authentication and no ``userId``, or a ``userId``
            that breaks ``USER_ID_RULE`` (in either mode), or an authenticated user whose
            username breaks it.
        Refusal("not-authenticated"): authentication is on and the caller has none.
        Refusal("principal-mismatch"): ``userId`` names someone other than the caller.
        Refusal("not-a-member"): an authenticated user with no organization membership.
    """
    # The one place a caller's userId is read: the same rule for every path.
    claimed = None if claimed_user_id is None else check_user_id(claimed_user_id)
    if settings.WORKFORCE_AUTH == "none":
        if not claimed:
            if not require_user:
                return Principal(user_id="anonymous", org=ensure_organization(DEFAULT_ORG_ID), anonymous=True)
            raise Refusal("invalid-input", "userId is required: without authentication the caller names itself.")
        return Principal(user_id=claimed, org=ensure_organization(DEFAULT_ORG_ID))
    user = getattr(http_request, "user", None)
    if user is None or not user.is_authenticated:
        raise Refusal("not-authenticated", "Authentication credentials were not provided.")
    user_id = user.get_username()
    problem = user_id_problem(user_id, label="This account's username")
    if problem is not None:
        # A username acts as the user id in session ids ("<worker>:<user>"): one that
        # breaks the rule (made by hand, or by the admin's wider username alphabet) could
        # take another person's conversation id, so it acts nowhere until renamed.
        raise Refusal("invalid-input", f"{problem} Rename the account (the admin) to act with it.")
    if claimed and claimed != user_id:
        raise Refusal("principal-mismatch", f'userId "{claimed}" is not the authenticated caller.')
    # The API's throttle read it already for this request (workforce.api.throttles).
    cached = getattr(http_request, MEMBERSHIP_ATTR, False)
    membership = (
        cached
        if cached is None or isinstance(cached, Membership)
        else Membership.objects.select_related("organization").filter(user=user).first()
    )
    if membership is None:
        # Never fall back to the default organization: that would hand an authenticated
        # stranger the development tenant's mailboxes.
        raise Refusal("not-a-member", f'"{user_id}" belongs to no organization; add a Membership in the admin.')
    return Principal(user_id=user_id, org=membership.organization, authenticated=True)


def access_held(http_request, principal: Principal, *rechecks: Callable[[], object]) -> Callable[[], bool]:
    """For a long read opened by ``principal`` (a live stream): a check, run again while
    it is open, that the caller still holds what let it in.

    The check (blocking, one query) is True while the account is active, still a member of
    the organization the read was opened in, and still holds the credential it came with:
    the API token (``Authorization: Token …``) or the login session (a page, or the API
    with a session cookie) not logged out or expired. So an account moved to another
    organization, deactivated, deleted, logged out or whose token was deleted stops
    reading (docs/api.md "Watching a session live"). Nothing of that is checked for a
    caller that did not authenticate (``WORKFORCE_AUTH=none``). Then each of
    ``rechecks`` runs: the read's own authorization rule again (``access_session``, a
    room's membership), which raises ``Refusal`` or ``Http404`` when it no longer holds.

    Args:
        http_request: the request that opened the read (DRF's or Django's), after
            ``resolve_principal``.
        rechecks: callables that raise ``Refusal`` or ``Http404`` when the read is no
            longer the caller's.
    """
    user = getattr(http_request, "user", None)
    user_pk, org_pk = getattr(user, "pk", None), principal.org.pk
    token = getattr(http_request, "auth", None)
    token_key = getattr(token, "key", None) if isinstance(token, Token) else None
    login = getattr(http_request, "session", None)
    login_key = getattr(login, "session_key", None) if token_key is None else None

    authenticated = settings.WORKFORCE_AUTH != "none" and principal.authenticated

    def held() -> bool:
        if authenticated:
            if user_pk is None:
                return False
            members = Membership.objects.filter(user_id=user_pk, user__is_active=True, organization_id=org_pk)
            if token_key is not None:
                members = members.filter(Exists(Token.objects.filter(key=token_key, user_id=OuterRef("user_id"))))
            elif login_key is not None and settings.SESSION_ENGINE == "django.contrib.sessions.backends.db":
                members = members.filter(
                    Exists(LoginSession.objects.filter(session_key=login_key, expire_date__gt=timezone.now()))
                )
            if not members.exists():
                return False
        try:
            for recheck in rechecks:
                recheck()
        except (Refusal, Http404):
            return False
        return True

    return held


def org_principal(org_id: str, user_id: str) -> Principal:
    """A principal for server-side callers (commands, tasks) acting as ``user_id``."""
    return Principal(user_id=user_id, org=ensure_organization(org_id))


__all__ = [
    "access_held",
    "PostedBy",
    "user_posted_by",
    "seat_posted_by",
    "as_posted_by",
    "Principal",
    "resolve_principal",
    "org_principal",
    "check_user_id",
    "user_id_problem",
    "USER_ID_RULE",
    "Organization",
]
