"""The forge's issue webhook (``POST /api/mail/webhook``; spec "How mail becomes work":
"The vault's issue webhook tells the office, which queues a mail run").

A Forgejo or Gitea server signs the raw body with HMAC-SHA256 and the hook's shared
secret (``WORKFORCE_FORGE_WEBHOOK_SECRET``), hex, in ``X-Forgejo-Signature`` /
``X-Gitea-Signature``. A call with no secret configured, no signature or a wrong one is
refused with 401 (``webhook-signature-invalid``) and nothing is written. An ``issues``
or ``issue_comment`` event on a repository the vault rule names is acted on once per
delivery id (``X-Forgejo-Delivery`` / ``X-Gitea-Delivery``): the issue is read back from
the forge (a label change does not say which label changed) and handed to the one
handler the embedded vault uses too (``mail.events.do_handle_store_event``). Anything
else answers 202 and is ignored.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import IntegrityError, transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from workforce.refusals import Refusal

from .events import do_handle_store_event
from .models import WebhookDelivery
from .queries import office_organization
from .store import SharedStore, StoreError, StoreEvent, current_store

logger = logging.getLogger(__name__)

SIGNATURES = ("X-Forgejo-Signature", "X-Gitea-Signature")
DELIVERIES = ("X-Forgejo-Delivery", "X-Gitea-Delivery")
EVENTS = ("X-Forgejo-Event", "X-Gitea-Event")
# "edited": a title or body changed (a collaborator's edit): the office reads the issue
# again and marks it edited when it is no longer what the office wrote (``mail.index``).
ACTIONS = {
    "opened": "opened",
    "edited": "edited",
    "label_updated": "label_updated",
    "label_cleared": "label_updated",
    "closed": "closed",
}


def _header(request: HttpRequest, names: tuple[str, ...]) -> str:
    return next((request.headers[n] for n in names if request.headers.get(n)), "")


def signature_ok(secret: str, body: bytes, signature: str) -> bool:
    """True when ``signature`` is the hex HMAC-SHA256 of ``body`` with ``secret``; never
    for an empty secret or signature, nor for one that is not ASCII (``compare_digest``
    raises TypeError on a non-ASCII str, which must read as a bad signature, not a 500)."""
    if not secret or not signature:
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    given = signature.strip().lower().encode("utf-8", "surrogateescape")
    return hmac.compare_digest(expected.encode(), given)


def _refused(refusal: Refusal) -> JsonResponse:
    return JsonResponse({"requestId": None, "status": "failed", "error": refusal.as_error()}, status=refusal.http_status)


def do_take_webhook(*, body: bytes, event: str, delivery: str) -> str:
    """Act on one verified delivery. Returns ``taken``, ``already-taken`` or
    ``ignored``. Raises Refusal (``invalid-input``, ``vault-unavailable``); nothing is
    recorded then. A forge never redelivers a failed hook (and a replay from its UI has
    a new delivery id): the forge sweep (``mail.forge_repair``) takes in what it missed."""
    if event not in ("issues", "issue_comment"):
        return "ignored"
    try:
        payload = json.loads(body)
        action = payload["action"]
        number = int(payload["issue"]["number"])
        full_name = payload["repository"]["full_name"]
        pull_request = payload["issue"].get("pull_request")
    except (ValueError, KeyError, TypeError, OverflowError, AttributeError) as exc:
        raise Refusal("invalid-input", f"not an issue webhook payload: {type(exc).__name__}") from None
    # The fields the office keeps, checked as the forge sends them (text, a positive number).
    if not isinstance(action, str) or not isinstance(full_name, str) or len(action) > 40 or len(full_name) > 300:
        raise Refusal("invalid-input", "not an issue webhook payload: action and repository.full_name are short text.")
    if not 0 < number < 2**31:
        raise Refusal("invalid-input", "not an issue webhook payload: issue.number is not an issue number.")
    if len(event) > 40 or len(delivery) > 200:
        raise Refusal("invalid-input", "the event or delivery header is longer than a forge sends (40 and 200 characters).")
    if any(part in ("", ".", "..") for part in full_name.split("/")):
        return "ignored"  # no vault is named like that
    if pull_request:
        return "ignored"
    kind = "commented" if event == "issue_comment" else ACTIONS.get(action)
    store = current_store()
    vault = store.vault_of(full_name) if hasattr(store, "vault_of") else None
    if kind is None or vault is None:
        return "ignored"
    org_id, slug = vault
    if isinstance(store, SharedStore) and store.shared:
        # On a shared forge only the office's vaults are vaults (mail.services.do_reindex_mail).
        try:
            if office_organization(org_id) is None or not store.is_vault(org_id, slug):
                return "ignored"
        except StoreError as exc:
            raise Refusal("vault-unavailable", str(exc)) from exc
    if not delivery:
        raise Refusal("invalid-input", f"the delivery has no {' or '.join(DELIVERIES)} header.")
    try:
        with transaction.atomic():
            WebhookDelivery.objects.create(delivery=delivery, event=event, action=action, repository=full_name)
            try:
                issue = store.get_issue(org_id, slug, number)
            except StoreError as exc:
                raise Refusal("vault-unavailable", str(exc)) from exc
            extra = {}
            if kind == "opened":
                # Admission reads the labels the issue was opened with too, not only
                # later ones (its run may have moved mail:new on already); the index
                # takes the labels as the forge holds them now (the office may have set
                # mail:new again after the forge dropped a stale label id: mail.forgejo).
                opened = payload["issue"].get("labels")
                extra["openedLabels"] = (
                    [label.get("name") for label in opened if isinstance(label, dict)] if isinstance(opened, list) else []
                )
            told = StoreEvent(action=kind, org_id=org_id, vault=slug, issue=issue, delivery=delivery, extra=extra)
            do_handle_store_event(told)
    except IntegrityError:
        return "already-taken"
    return "taken"


@csrf_exempt
def forge_webhook(request: HttpRequest) -> JsonResponse:
    """Receive a Forgejo or Gitea issue webhook (HMAC-SHA256 signed with the hook's
    secret; an unsigned or wrongly signed call is 401 and writes nothing; a delivery
    sent twice is acted on once)."""
    if request.method != "POST":
        response = _refused(Refusal("method-not-allowed", f"{request.method} is not allowed here; POST a webhook."))
        response["Allow"] = "POST"
        return response
    try:
        body = request.body
    except RequestDataTooBig:
        return _refused(Refusal("payload-too-large", "the webhook's body is larger than the server takes."))
    if not signature_ok(settings.WORKFORCE_FORGE_WEBHOOK_SECRET, body, _header(request, SIGNATURES)):
        return _refused(
            Refusal("webhook-signature-invalid", "the call is not signed with the hook's secret; nothing was written.")
        )
    try:
        outcome = do_take_webhook(body=body, event=_header(request, EVENTS), delivery=_header(request, DELIVERIES))
    except Refusal as refusal:
        return _refused(refusal)
    return JsonResponse({"status": outcome}, status=200 if outcome != "ignored" else 202)


# For the API index (a plain view's methods can't be read): the attribute
# workforce.api.index reads off the view function.
forge_webhook.__dict__["http_methods"] = ["POST"]
