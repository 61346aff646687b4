"""Token authentication under both header keywords (docs/api.md "Endpoints"): with
``WORKFORCE_AUTH=token`` a DRF token is sent as ``Authorization: Token <key>`` (DRF's
keyword) or ``Authorization: Bearer <key>`` (what MCP clients and most HTTP tools send, and
what ``/mcp`` takes, ``mail.mcp_http``). Both name the same tokens; ``TOKEN_AUTHENTICATION``
lists the classes the REST views, and the web server's stream admission
(``workforce_project.admission.has_credentials``), check in that order."""

from __future__ import annotations

from rest_framework.authentication import TokenAuthentication


class BearerTokenAuthentication(TokenAuthentication):
    """DRF's token authentication read from ``Authorization: Bearer <key>``. A header with
    another keyword is not this class's (``authenticate`` returns None), so it sits beside
    ``TokenAuthentication`` without either shadowing the other."""

    keyword = "Bearer"


TOKEN_AUTHENTICATION = (TokenAuthentication, BearerTokenAuthentication)
