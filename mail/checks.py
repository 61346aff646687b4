"""``manage.py check`` (run by ``serve`` at start) asks the forge what the office's token
may do, when mail is kept on a forge (``WORKFORCE_MAIL_STORE=mail.forgejo.forgejo_store``):
a token without the scopes the office needs would fail later, mail by mail (README
"Mail on a Forgejo or Gitea server")."""

from __future__ import annotations

from django.conf import settings
from django.core import checks

FORGE_STORE = "mail.forgejo.forgejo_store"
HINT = (
    "Give the office's token the scopes read:user, write:organization, write:repository and write:issue "
    "(README: Mail on a Forgejo or Gitea server)."
)


@checks.register("workforce")
def check_forge_token(app_configs=None, **kwargs):
    """mail.E001: the forge token lacks scopes (named); mail.E002: the forge backend is
    not configured; mail.E003: the forge refuses the token; mail.W001: the forge did not
    answer (the token was not checked). Nothing for the embedded vault."""
    if settings.WORKFORCE_MAIL_STORE != FORGE_STORE:
        return []
    from .forgejo import ForgeTokenRefused, forgejo_store
    from .store import StoreError

    try:
        store = forgejo_store()
    except StoreError as exc:
        return [checks.Error(str(exc), id="mail.E002")]
    try:
        lacking = store.missing_scopes()
    except ForgeTokenRefused as exc:
        return [checks.Error(f"WORKFORCE_FORGE_TOKEN: {exc}", hint=HINT, id="mail.E003")]
    except StoreError as exc:
        return [checks.Warning(f"the forge did not answer, so its token was not checked: {exc}", id="mail.W001")]
    finally:
        store.client.close()
    if lacking:
        return [
            checks.Error(
                f"WORKFORCE_FORGE_TOKEN lacks {', '.join(lacking)} on {settings.WORKFORCE_FORGE_URL}", hint=HINT, id="mail.E001"
            )
        ]
    return []
