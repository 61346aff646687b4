"""The ``forgejo`` mail backend: mail as issues on a Forgejo or Gitea server, which
share the API (spec "Where mail lives": "Mail is stored on your forge, as an issue on
the recipient's vault repo, created by the office with its admin token").

It speaks the REST API (``/api/v1``) through httpx with ``Authorization: token
<WORKFORCE_FORGE_TOKEN>`` at ``WORKFORCE_FORGE_URL``: a vault is the repository the
naming rule ``WORKFORCE_FORGE_VAULT`` gives (default ``{org}/{agent}``: owner the
organization's id, repository the agent's slug); ``ensure_vault`` creates it in its
owner organization when missing and makes sure the four mail labels exist; an issue is
opened with its labels (by id), commented on, its labels replaced and closed. The forge
tells the office of each change through its issue webhook (``mail.webhook``), never
this client, so the office's logic is the one ``mail.events`` handler either way.

Anyone with write access to a vault repository can open an issue or comment by hand,
with a body that imitates the office's header. The forge says who wrote each one
(``user.login``), so an issue or comment is the office's (``Issue.by_office`` /
``Comment.by_office``) only when its author is the office's own account: the login of
the token's owner (``GET /api/v1/user``, read once per store object), or
``WORKFORCE_FORGE_USER`` when set.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime

import httpx
from django.conf import settings

from workforce.models import DEFAULT_ORG_ID

from .constants import LABEL_COLORS, LABELS
from .store import Comment, Issue, StoreError

PAGE = 50
# The scopes the office's token needs (Gitea and Forgejo access-token scopes): its login
# (read:user), the vault repositories it creates in their organizations
# (write:organization), reads and writes in them (write:repository) and their issues,
# labels and comments (write:issue). In the order ``check`` names them.
SCOPES = ("read:user", "read:repository", "write:organization", "write:repository", "write:issue")
NOT_A_VAULT_SECONDS = 600
# A repository name no vault has: the scope probes name it, so they change nothing.
PROBE = "workforce-scope-check"
_SCOPE = re.compile(r"\b(?:read|write):[a-z_]+\b")


@dataclass(frozen=True)
class IssueSummary:
    """One issue as a forge's issue list gives it: number, label names, state, how many
    comments, when it last changed (aware datetime)."""

    number: int
    labels: tuple[str, ...]
    state: str
    comments: int
    updated_at: datetime


# A list is read page by page until X-Total-Count items came (or an empty page): at most
# this many pages, so a forge that keeps answering cannot hold a caller for ever.
MAX_PAGES = 10_000


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _forge_answers(method):
    """A ``MailStore`` method whose every failure is a ``StoreError`` (answered 503
    ``vault-unavailable``): the forge unreachable, or an answer that is not the API's
    (a proxy's page, JSON of another shape)."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except StoreError:
            raise
        except httpx.HTTPError as exc:
            raise StoreError(f"the forge did not answer: {exc}") from exc
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            raise StoreError(f"the forge's answer is not its API's ({type(exc).__name__}: {exc})") from exc

    return call


class ForgejoStore:
    """The ``MailStore`` on a Forgejo or Gitea server.

    Args:
        base_url: the forge's address (``https://forge.example.org``).
        token: an access token of the office's account (an administrator of the vaults'
            owners).
        vault_rule: ``"{org}/{agent}"``-style format giving ``owner/repository``.
        timeout: seconds one call may take.
        office_user: the office account's login; empty reads it from the forge
            (``GET /api/v1/user``) on first need.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        vault_rule: str = "{org}/{agent}",
        *,
        timeout: float = 10.0,
        office_user: str = "",
    ):
        if not base_url:
            raise StoreError("WORKFORCE_FORGE_URL is not set: the forgejo backend needs the forge's address")
        if vault_rule.count("/") != 1 or "{agent}" not in vault_rule.split("/")[1]:
            raise StoreError(
                f"WORKFORCE_FORGE_VAULT={vault_rule!r} must read owner/repository and name {{agent}} in the repository"
            )
        self.base = base_url.rstrip("/") + "/api/v1"
        self.rule = vault_rule
        self.client = httpx.Client(headers={"Authorization": f"token {token}", "Accept": "application/json"}, timeout=timeout)
        self._labels: dict[str, dict[str, int]] = {}
        # Repositories found to be no vault, until when (monotonic seconds): the forge
        # sweep asks again only after NOT_A_VAULT_SECONDS.
        self._not_vaults: dict[str, float] = {}
        self._lock = threading.Lock()
        self._office_user = office_user.strip()

    # ------------------------------------------------------------------ naming

    def repo(self, org_id: str, vault: str) -> str:
        """``owner/repository`` of ``vault`` in ``org_id``."""
        return self.rule.format(org=org_id, agent=vault)

    def vault_of(self, full_name: str) -> tuple[str, str] | None:
        """``(org id, agent slug)`` for a repository the rule names; None for another. A
        rule without ``{org}`` names the default organization's vaults."""
        pattern = re.escape(self.rule).replace(r"\{org\}", "(?P<org>[^/]+?)").replace(r"\{agent\}", "(?P<agent>[^/]+?)")
        match = re.fullmatch(pattern, full_name)
        if match is None:
            return None
        return match.groupdict().get("org") or DEFAULT_ORG_ID, match["agent"]

    # ------------------------------------------------------------------ calls

    def _request(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            response = self.client.request(method, self.base + path, **kwargs)
        except httpx.HTTPError as exc:
            raise StoreError(f"the forge did not answer {method} {path}: {exc}") from exc
        if response.status_code >= 400:
            raise StoreError(f"the forge answered {response.status_code} to {method} {path}: {response.text[:300]}")
        return response

    @staticmethod
    def _json(response: httpx.Response, method: str, path: str):
        try:
            return response.json() if response.content else None
        except ValueError as exc:  # a proxy's error page, say
            raise StoreError(f"the forge's answer to {method} {path} is not JSON: {response.text[:200]!r}") from exc

    def _call(self, method: str, path: str, **kwargs):
        return self._json(self._request(method, path, **kwargs), method, path)

    def _list(self, path: str, params: dict | None = None, *, key: str | None = None) -> list:
        """Every item of a list endpoint, page by page. A forge caps a page at its
        ``MAX_RESPONSE_ITEMS`` (Gitea: 50 by default, maybe fewer) whatever ``limit``
        asks, so a short page is not the last one: read until ``X-Total-Count`` items
        came, or, when the forge sends no count, until a page shorter than asked or an
        empty one. ``key``: the items' key in an object answer (``/repos/search``)."""
        found: list = []
        for page in range(1, MAX_PAGES + 1):
            response = self._request("GET", path, params={**(params or {}), "page": page, "limit": PAGE})
            answer = self._json(response, "GET", path)
            batch = (answer or {}).get(key) or [] if key else answer or []
            if not isinstance(batch, list):
                raise StoreError(f"the forge's answer to GET {path} is not a list")
            found.extend(batch)
            total = response.headers.get("X-Total-Count", "")
            if not batch or (len(found) >= int(total) if total.isdigit() else len(batch) < PAGE):
                break
        return found

    def _label_ids(self, org_id: str, vault: str) -> dict[str, int]:
        repo = self.repo(org_id, vault)
        with self._lock:
            if repo in self._labels:
                return self._labels[repo]
        found = {label["name"]: label["id"] for label in self._list(f"/repos/{repo}/labels")}
        for name in LABELS:
            if name not in found:
                label = self._call("POST", f"/repos/{repo}/labels", json={"name": name, "color": LABEL_COLORS[name]})
                found[name] = label["id"]
        with self._lock:
            self._labels[repo] = found
        return found

    def _ids(self, org_id: str, vault: str, labels: list[str]) -> list[int]:
        ids = self._label_ids(org_id, vault)
        return [ids[name] for name in labels]

    # Other repositories than vaults live on a forge: the reindex and the webhook ask
    # ``is_vault`` (mail.services.do_reindex_mail).
    shared = True

    @_forge_answers
    def is_vault(self, org_id: str, vault: str) -> bool:
        """True when the repository the rule names for ``vault`` holds the four mail
        labels the office creates with every vault (a repository of the same name that
        someone else made does not). Read once per repository and store object when
        true, and again ``NOT_A_VAULT_SECONDS`` after it was false."""
        repo = self.repo(org_id, vault)
        with self._lock:
            if repo in self._labels:
                return True
            if self._not_vaults.get(repo, 0.0) > time.monotonic():
                return False
        found = {label["name"]: label["id"] for label in self._list(f"/repos/{repo}/labels")}
        if not all(name in found for name in LABELS):
            with self._lock:
                self._not_vaults[repo] = time.monotonic() + NOT_A_VAULT_SECONDS
            return False
        with self._lock:
            self._labels[repo] = found
        return True

    def _forget_labels(self, org_id: str, vault: str) -> None:
        with self._lock:
            self._labels.pop(self.repo(org_id, vault), None)

    def _labels_set(self, org_id: str, vault: str, number: int, labels: list[str], answered: list[dict] | None) -> None:
        """Make sure issue ``number`` carries exactly ``labels``. A forge drops label ids
        it does not know without an error (Gitea v1.26.3), so ids cached before the
        labels were recreated on the forge would leave a mail without ``mail:new``:
        check what the forge answered (``answered``, its label objects), and when it
        differs read the ids again (creating missing labels) and set them once more.

        Raises:
            StoreError: the forge still does not carry ``labels`` after the retry.
        """
        if answered is not None and sorted(str(label.get("name")) for label in answered) == sorted(labels):
            return
        self._forget_labels(org_id, vault)
        repo = self.repo(org_id, vault)
        answer = self._call("PUT", f"/repos/{repo}/issues/{number}/labels", json={"labels": self._ids(org_id, vault, labels)})
        got = sorted(label.get("name") for label in answer or []) if isinstance(answer, list) else None
        if got != sorted(labels):
            raise StoreError(f"the forge did not set the labels {labels} on {repo}#{number} (it answered {got})")

    def office_user(self) -> str:
        """The office account's login: ``office_user`` when given, else the token
        owner's (``GET /api/v1/user``), read once per store object. Raises StoreError
        when the forge does not answer it."""
        with self._lock:
            if self._office_user:
                return self._office_user
        answer = self._call("GET", "/user")
        login = answer.get("login") if isinstance(answer, dict) else None
        if not isinstance(login, str) or not login:
            raise StoreError("the forge named no login for the office's token (GET /api/v1/user)")
        with self._lock:
            self._office_user = login
        return login

    def _by_office(self, data: dict) -> bool:
        # Forge logins are unique regardless of case; no author at all is not the office.
        login = (data.get("user") or {}).get("login")
        return isinstance(login, str) and login.casefold() == self.office_user().casefold()

    def _issue(self, data: dict, comments: list[dict]) -> Issue:
        return Issue(
            number=data["number"],
            title=data["title"],
            body=data.get("body") or "",
            labels=tuple(label["name"] for label in data.get("labels") or ()),
            state=data["state"],
            created_at=_when(data["created_at"]),
            comments=tuple(
                Comment(id=i, body=c.get("body") or "", created_at=_when(c["created_at"]), by_office=self._by_office(c))
                for i, c in enumerate(comments, 1)
            ),
            by_office=self._by_office(data),
        )

    def _comments(self, repo: str, number: int) -> list[dict]:
        return sorted(self._call("GET", f"/repos/{repo}/issues/{number}/comments"), key=lambda c: (c["created_at"], c["id"]))

    # ------------------------------------------------------------------ MailStore

    @_forge_answers
    def ensure_vault(self, org_id: str, vault: str) -> None:
        """The vault's repository (created in its owner organization when missing), with
        the four labels."""
        repo = self.repo(org_id, vault)
        with self._lock:
            self._not_vaults.pop(repo, None)
        owner, _, name = repo.partition("/")
        try:
            response = self.client.get(self.base + f"/repos/{repo}")
        except httpx.HTTPError as exc:
            raise StoreError(f"the forge did not answer GET /repos/{repo}: {exc}") from exc
        if response.status_code == 404:
            self._call("POST", f"/orgs/{owner}/repos", json={"name": name, "private": True, "description": f"{vault}'s vault"})
        elif response.status_code >= 400:
            raise StoreError(f"the forge answered {response.status_code} for {repo}")
        self._label_ids(org_id, vault)

    @_forge_answers
    def create_issue(self, org_id: str, vault: str, *, title: str, body: str, labels: list[str]) -> Issue:
        self.ensure_vault(org_id, vault)
        repo = self.repo(org_id, vault)
        data = self._call(
            "POST", f"/repos/{repo}/issues", json={"title": title, "body": body, "labels": self._ids(org_id, vault, labels)}
        )
        if sorted(label["name"] for label in data.get("labels") or ()) != sorted(labels):
            self._labels_set(org_id, vault, data["number"], labels, None)
            data = {**data, "labels": [{"name": name} for name in labels]}
        return self._issue(data, [])

    @_forge_answers
    def comment(self, org_id: str, vault: str, number: int, body: str) -> Issue:
        repo = self.repo(org_id, vault)
        self._call("POST", f"/repos/{repo}/issues/{number}/comments", json={"body": body})
        return self.get_issue(org_id, vault, number)

    @_forge_answers
    def set_labels(self, org_id: str, vault: str, number: int, labels: list[str]) -> Issue:
        repo = self.repo(org_id, vault)
        answer = self._call("PUT", f"/repos/{repo}/issues/{number}/labels", json={"labels": self._ids(org_id, vault, labels)})
        self._labels_set(org_id, vault, number, labels, answer if isinstance(answer, list) else None)
        return self.get_issue(org_id, vault, number)

    @_forge_answers
    def close(self, org_id: str, vault: str, number: int) -> Issue:
        repo = self.repo(org_id, vault)
        data = self._call("PATCH", f"/repos/{repo}/issues/{number}", json={"state": "closed"})
        return self._issue(data, self._comments(repo, number))

    @_forge_answers
    def get_issue(self, org_id: str, vault: str, number: int) -> Issue:
        repo = self.repo(org_id, vault)
        return self._issue(self._call("GET", f"/repos/{repo}/issues/{number}"), self._comments(repo, number))

    @_forge_answers
    def list_issues(self, org_id: str, vault: str) -> list[Issue]:
        repo = self.repo(org_id, vault)
        found = self._list(f"/repos/{repo}/issues", {"state": "all", "type": "issues"})
        return [self._issue(data, self._comments(repo, data["number"])) for data in sorted(found, key=lambda d: d["number"])]

    def _lacking(self, method: str, path: str, expected: str, **kwargs) -> list[str]:
        """The scopes a forge says the token lacks for ``method path`` (403 "token does
        not have at least one of required scope(s), required=[...]"), else none."""
        try:
            response = self.client.request(method, self.base + path, **kwargs)
        except httpx.HTTPError as exc:
            raise StoreError(f"the forge did not answer {method} {path}: {exc}") from exc
        if response.status_code == 401:
            raise ForgeTokenRefused(f"the forge refused the token (401 to {method} {path}): {response.text[:200]}")
        if response.status_code != 403 or "scope" not in response.text:
            return []  # served, or refused for another reason (no such repository, a body it needs)
        try:
            message = str(response.json().get("message", ""))
        except (ValueError, AttributeError):
            message = response.text
        required = message.partition("required=")[2].partition("token scope")[0]
        return _SCOPE.findall(required) or [expected]

    def missing_scopes(self) -> list[str]:
        """The scopes of ``SCOPES`` the office's token lacks, as the forge answers a probe
        of each (its login, a repository search, and writes that name ``PROBE``, which
        no organization or repository has, with bodies the forge refuses after the scope
        check: nothing is created or changed). A forge that refuses a probe for another
        reason counts as granting it.

        Raises:
            ForgeTokenRefused: the forge does not take the token at all (401).
            StoreError: the forge did not answer.
        """
        owner = self.repo(DEFAULT_ORG_ID, PROBE).partition("/")[0]
        probe = self.repo(DEFAULT_ORG_ID, PROBE)
        found: set[str] = set()
        found.update(self._lacking("GET", "/user", "read:user"))
        found.update(self._lacking("GET", "/repos/search", "read:repository", params={"limit": 1}))
        found.update(self._lacking("POST", f"/orgs/{owner}/repos", "write:organization", json={}))
        found.update(self._lacking("PATCH", f"/repos/{probe}", "write:repository", json={}))
        found.update(self._lacking("POST", f"/repos/{probe}/issues", "write:issue", json={}))
        return [scope for scope in SCOPES if scope in found] + sorted(found - set(SCOPES))

    @_forge_answers
    def changed_issues(self, org_id: str, vault: str, since: datetime | None) -> list[IssueSummary]:
        """The issues of ``vault`` updated at or after ``since`` (every issue when None),
        as the list endpoint gives them, without their comments: what the forge sweep
        (``mail.forge_repair``) compares with the index before reading an issue whole."""
        repo = self.repo(org_id, vault)
        params = {"state": "all", "type": "issues"}
        if since is not None:
            params["since"] = since.isoformat()
        return [
            IssueSummary(
                number=int(data["number"]),
                labels=tuple(label["name"] for label in data.get("labels") or ()),
                state=data["state"],
                comments=int(data.get("comments") or 0),
                updated_at=_when(data.get("updated_at") or data["created_at"]),
            )
            for data in self._list(f"/repos/{repo}/issues", params)
        ]

    @_forge_answers
    def list_vaults(self) -> list[tuple[str, str]]:
        found = []
        for repo in self._list("/repos/search", key="data"):
            vault = self.vault_of(repo["full_name"])
            if vault is not None:
                found.append(vault)
        return sorted(set(found))


class ForgeTokenRefused(StoreError):
    """The forge answered 401 to the office's token."""


def forgejo_store() -> ForgejoStore:
    """``WORKFORCE_MAIL_STORE=mail.forgejo.forgejo_store``: the forge the settings name
    (``WORKFORCE_FORGE_URL``, ``WORKFORCE_FORGE_TOKEN``, ``WORKFORCE_FORGE_VAULT``, and
    ``WORKFORCE_FORGE_USER``, the office's login, read from the forge when empty)."""
    return ForgejoStore(
        settings.WORKFORCE_FORGE_URL,
        settings.WORKFORCE_FORGE_TOKEN,
        settings.WORKFORCE_FORGE_VAULT,
        office_user=getattr(settings, "WORKFORCE_FORGE_USER", ""),
    )
