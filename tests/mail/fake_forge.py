"""A fake Forgejo on loopback, used by the tests only: a real HTTP server speaking the
subset of the Forgejo/Gitea REST API the forgejo backend uses (``/api/v1``: repositories,
labels, issues, comments, replacing labels, closing, searching repositories), with token
authentication, and the issue webhook a real forge sends after each change (the payload
shapes and headers of Forgejo's ``issues`` and ``issue_comment`` events, signed with
HMAC-SHA256 of the raw body). Webhooks are queued in ``hooks`` for the test to deliver.
The token's owner is ``login`` (``GET /api/v1/user``); ``hand_issue`` and ``hand_comment``
write as another account would through the forge's web page."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class Page:
    """One page of a list endpoint and the whole list's length (``X-Total-Count``)."""

    def __init__(self, items, total: int):
        self.items, self.total = items, total


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeForge:
    """A forge with owner organizations made on first use. ``requests`` records every
    API call as ``(method, path)``; ``hooks`` the webhooks it would send, as
    ``(headers, raw body)``. ``login`` is the token owner's account (the office)."""

    def __init__(self, *, token: str = "office-token", secret: str = "hook-secret", login: str = "office", max_items: int = 50):
        self.token = token
        # Gitea's [api] MAX_RESPONSE_ITEMS: no list page is longer, whatever "limit" asks.
        self.max_items = max_items
        self.secret = secret
        self.login = login
        # Every account's token: the office's, and collaborators' (``collaborator``).
        self.tokens: dict[str, str] = {token: login}
        # Each token's scopes (Gitea's: read:user, write:issue, ...); "all" when absent.
        self.scopes: dict[str, set[str]] = {}
        self.repos: dict[str, dict] = {}
        self.requests: list[tuple[str, str]] = []
        self.hooks: list[tuple[dict, bytes]] = []
        self.lock = threading.Lock()
        self.ids = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _serve(self, method: str):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                fake.requests.append((method, parts.path))
                auth = self.headers.get("Authorization") or ""
                token = auth.removeprefix("token ") if auth.startswith("token ") else None
                user = fake.tokens.get(token) if token else None
                if user is None:
                    return self._send(401, {"message": "token is required"})
                lacking = fake.lacking(token, method, parts.path)
                if lacking:
                    # As Gitea's tokenRequiresScopes, before the route's own checks.
                    message = f"token does not have at least one of required scope(s), required={lacking}"
                    return self._send(403, {"message": message})
                body = json.loads(raw) if raw else {}
                with fake.lock:
                    status, answer = fake.route(method, parts.path, parse_qs(parts.query), body, user=user)
                self._send(status, answer)

            def _send(self, status: int, answer):
                total = None
                if isinstance(answer, Page):
                    answer, total = answer.items, answer.total
                raw = isinstance(answer, bytes)  # a page that is not JSON (a proxy's)
                data = answer if raw else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html" if raw else "application/json")
                self.send_header("Content-Length", str(len(data)))
                if total is not None:
                    self.send_header("X-Total-Count", str(total))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

            def do_PUT(self):
                self._serve("PUT")

            def do_PATCH(self):
                self._serve("PATCH")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ the API

    def page(self, items: list, query: dict) -> Page:
        """``items`` paged as Gitea v1.26.3 pages a list: ``page`` from 1, ``limit`` 30
        by default and never more than ``max_items`` (MAX_RESPONSE_ITEMS), with the
        whole list's length in ``X-Total-Count``."""
        page = max(int(query.get("page", ["1"])[0]), 1)
        limit = int(query.get("limit", ["0"])[0]) or 30
        limit = min(max(limit, 1), self.max_items)
        return Page(items[(page - 1) * limit : page * limit], len(items))

    def _id(self) -> int:
        self.ids += 1
        return self.ids

    def _repo_json(self, full: str) -> dict:
        owner, name = full.split("/")
        return {"id": self.repos[full]["id"], "name": name, "full_name": full, "owner": {"login": owner}, "private": True}

    def _issue_json(self, repo: dict, issue: dict) -> dict:
        labels = [label for label in repo["labels"] if label["id"] in issue["label_ids"]]
        return {
            "id": issue["id"],
            "number": issue["number"],
            "title": issue["title"],
            "body": issue["body"],
            "labels": labels,
            "state": issue["state"],
            "created_at": issue["created_at"],
            "updated_at": issue["updated_at"],
            "user": {"login": issue.get("user", self.login)},
            "pull_request": None,
            "comments": len(issue["comments"]),
        }

    def recreate_labels(self, full: str) -> None:
        """Delete every label of ``full`` and create them again under new ids, as someone
        tidying the repository's labels on the forge would (issues lose them)."""
        with self.lock:
            repo = self.repos[full]
            old = {label["id"] for label in repo["labels"]}
            repo["labels"] = [{**label, "id": self._id()} for label in repo["labels"]]
            for issue in repo["issues"].values():
                issue["label_ids"] = [i for i in issue["label_ids"] if i not in old]

    def lacking(self, token: str, method: str, path: str) -> list[str]:
        """The scopes ``token`` lacks for ``method path``, as Gitea v1.26.3 requires them:
        per route group a category (``user``, ``organization``, ``repository``, and
        ``issue`` for issues and labels inside a repository), read for GET and write
        otherwise; write implies read."""
        scopes = self.scopes.get(token)
        if scopes is None:
            return []
        level = "read" if method == "GET" else "write"
        if path == "/api/v1/user":
            categories = ["user"]
        elif path.startswith("/api/v1/orgs/"):
            categories = ["organization"]
        elif re.fullmatch(r"/api/v1/repos/[^/]+/[^/]+/(issues|labels).*", path):
            categories = ["repository", "issue"]
        else:
            categories = ["repository"]
        return [f"{level}:{c}" for c in categories if f"{level}:{c}" not in scopes and f"write:{c}" not in scopes]

    def collaborator(self, login: str) -> str:
        """Give ``login`` an account with write access to every repository (a forge
        collaborator) and return its API token."""
        token = f"{login}-token"
        self.tokens[token] = login
        return token

    def hook(self, event: str, event_type: str, full: str, payload: dict, *, sender: str | None = None) -> None:
        payload = {**payload, "repository": self._repo_json(full), "sender": {"login": sender or self.login}}
        raw = json.dumps(payload).encode()
        signature = hmac.new(self.secret.encode(), raw, hashlib.sha256).hexdigest()
        delivery = str(uuid.uuid4())
        headers = {
            "Content-Type": "application/json",
            "X-Forgejo-Event": event,
            "X-Forgejo-Event-Type": event_type,
            "X-Gitea-Event": event,
            "X-Gitea-Event-Type": event_type,
            "X-Forgejo-Delivery": delivery,
            "X-Gitea-Delivery": delivery,
            "X-Forgejo-Signature": signature,
            "X-Gitea-Signature": signature,
        }
        self.hooks.append((headers, raw))

    def hand_issue(self, full: str, *, title: str, body: str, labels=("mail:new",), login: str = "mallory") -> int:
        """Open an issue on ``full`` as ``login`` would by hand (labels by name), queue its
        webhook as the forge sends it, and return its number."""
        with self.lock:
            repo = self.repos[full]
            number = len(repo["issues"]) + 1
            now = _now()
            issue = {
                "id": self._id(),
                "number": number,
                "title": title,
                "body": body,
                "label_ids": [label["id"] for label in repo["labels"] if label["name"] in labels],
                "state": "open",
                "created_at": now,
                "updated_at": now,
                "comments": [],
                "user": login,
            }
            repo["issues"][number] = issue
            payload = {"action": "opened", "number": number, "issue": self._issue_json(repo, issue)}
            self.hook("issues", "issues", full, payload, sender=login)
        return number

    def hand_comment(self, full: str, number: int, body: str, *, login: str = "mallory") -> None:
        """Comment on issue ``number`` of ``full`` as ``login`` would by hand, and queue its
        webhook."""
        with self.lock:
            repo = self.repos[full]
            issue = repo["issues"][number]
            comment = {"id": self._id(), "body": body, "created_at": _now(), "user": {"login": login}}
            issue["comments"].append(comment)
            payload = {"action": "created", "issue": self._issue_json(repo, issue), "comment": comment, "is_pull": False}
            self.hook("issue_comment", "issue_comment", full, payload, sender=login)

    def route(self, method: str, path: str, query: dict, body: dict, *, user: str = ""):
        user = user or self.login
        if method == "GET" and path == "/api/v1/user":
            return 200, {"id": 1, "login": self.login, "username": self.login, "is_admin": True}
        if method == "GET" and path == "/api/v1/repos/search":
            found = self.page(sorted(self.repos), query)
            return 200, Page({"ok": True, "data": [self._repo_json(n) for n in found.items]}, found.total)
        if m := re.fullmatch(r"/api/v1/orgs/([^/]+)/repos", path):
            if not body.get("name"):
                return 422, {"message": "[Name]: Required"}
            full = f"{m[1]}/{body['name']}"
            if full in self.repos:
                return 409, {"message": "repository already exists"}
            self.repos[full] = {"id": self._id(), "labels": [], "issues": {}}
            return 201, self._repo_json(full)
        m = re.fullmatch(r"/api/v1/repos/([^/]+/[^/]+)(/.*)?", path)
        if not m or m[1] not in self.repos:
            return 404, {"message": "The target couldn't be found."}
        full, rest, repo = m[1], m[2] or "", self.repos[m[1]]
        if rest == "" and method == "GET":
            return 200, self._repo_json(full)
        if rest == "/labels":
            if method == "GET":
                return 200, self.page(repo["labels"], query)
            label = {"id": self._id(), "name": body["name"], "color": body["color"].lstrip("#"), "description": ""}
            repo["labels"].append(label)
            return 201, label
        if rest == "/issues" and method == "GET":
            issues = [self._issue_json(repo, i) for i in sorted(repo["issues"].values(), key=lambda i: -i["number"])]
            if "since" in query:  # "only issues updated at or after", as Gitea's
                since = datetime.fromisoformat(query["since"][0].replace("Z", "+00:00"))
                issues = [i for i in issues if datetime.fromisoformat(i["updated_at"].replace("Z", "+00:00")) >= since]
            return 200, self.page(issues, query)
        if rest == "/issues" and method == "POST":
            # As Gitea v1.26.3: label ids the repository does not have are dropped
            # without an error.
            known = {label["id"] for label in repo["labels"]}
            body["labels"] = [i for i in body.get("labels") or [] if i in known]
            number = len(repo["issues"]) + 1
            now = _now()
            issue = {
                "id": self._id(),
                "number": number,
                "title": body["title"],
                "body": body.get("body") or "",
                "label_ids": list(body.get("labels") or []),
                "state": "open",
                "created_at": now,
                "updated_at": now,
                "comments": [],
                "user": user,
            }
            repo["issues"][number] = issue
            self.hook(
                "issues",
                "issues",
                full,
                {"action": "opened", "number": number, "issue": self._issue_json(repo, issue)},
                sender=user,
            )
            if issue["label_ids"]:
                # Gitea v1.26.3 adds the labels after opening: a label_updated hook follows.
                payload = {"action": "label_updated", "number": number, "issue": self._issue_json(repo, issue)}
                self.hook("issues", "issue_label", full, payload, sender=user)
            return 201, self._issue_json(repo, issue)
        if (m3 := re.fullmatch(r"/issues/comments/(\d+)", rest)) and method == "PATCH":
            # As Gitea's EditIssueComment: a collaborator may change any comment's body;
            # its author stays who wrote it.
            for issue in repo["issues"].values():
                for comment in issue["comments"]:
                    if comment["id"] == int(m3[1]):
                        changes = {"body": {"from": comment["body"]}}
                        comment["body"] = body["body"]
                        payload = {"action": "edited", "issue": self._issue_json(repo, issue), "comment": comment}
                        self.hook("issue_comment", "issue_comment", full, {**payload, "changes": changes}, sender=user)
                        return 200, comment
            return 404, {"message": "comment does not exist"}
        m2 = re.fullmatch(r"/issues/(\d+)(/comments|/labels)?", rest)
        if not m2 or int(m2[1]) not in repo["issues"]:
            return 404, {"message": "issue does not exist"}
        issue = repo["issues"][int(m2[1])]
        if m2[2] is None and method == "GET":
            return 200, self._issue_json(repo, issue)
        if m2[2] is None and method == "PATCH":
            # As Gitea's EditIssue: a collaborator may change the title and body of an
            # issue another account opened; the issue's author stays who opened it, and
            # the forge sends "edited" (with what changed) apart from a state change.
            changes = {k: {"from": issue[k]} for k in ("title", "body") if k in body and body[k] != issue[k]}
            for key in changes:
                issue[key] = body[key]
            if changes:
                issue["updated_at"] = _now()
                payload = {"action": "edited", "number": issue["number"], "changes": changes}
                self.hook("issues", "issues", full, {**payload, "issue": self._issue_json(repo, issue)}, sender=user)
            if body.get("state") in ("open", "closed") and body["state"] != issue["state"]:
                issue["state"] = body["state"]
                issue["updated_at"] = _now()
                payload = {"action": body["state"], "number": issue["number"]}
                self.hook("issues", "issues", full, {**payload, "issue": self._issue_json(repo, issue)}, sender=user)
            return 201, self._issue_json(repo, issue)
        if m2[2] == "/comments" and method == "GET":
            return 200, issue["comments"]
        if m2[2] == "/comments" and method == "POST":
            comment = {"id": self._id(), "body": body["body"], "created_at": _now(), "user": {"login": user}}
            issue["comments"].append(comment)
            issue["updated_at"] = comment["created_at"]
            self.hook(
                "issue_comment",
                "issue_comment",
                full,
                {"action": "created", "issue": self._issue_json(repo, issue), "comment": comment, "is_pull": False},
            )
            return 201, comment
        if m2[2] == "/labels" and method == "PUT":
            # Unknown label ids are dropped without an error, as on Gitea.
            known = {label["id"] for label in repo["labels"]}
            issue["label_ids"] = [i for i in body.get("labels") or [] if i in known]
            issue["updated_at"] = _now()
            # A label change does not say which label changed (compare with issue.labels).
            self.hook(
                "issues",
                "issue_label",
                full,
                {"action": "label_updated", "number": issue["number"], "issue": self._issue_json(repo, issue)},
            )
            return 200, self._issue_json(repo, issue)["labels"]
        return 405, {"message": "method not allowed"}
