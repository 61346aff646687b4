"""Settings for the workforce server, read from the environment (docs/architecture.md
"Settings and reason codes").

Every setting has an embedded default, so ``python manage.py serve`` runs on a fresh
machine with no configuration: SQLite under ``var/``, the example tree, the django-q2
ORM broker and the embedded models.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from workforce_project.secret_key import load_or_create_secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("WORKFORCE_VAR_DIR", BASE_DIR / "var"))


TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


def env_bool(name: str, default: bool) -> bool:
    """A yes/no setting from the environment variable ``name``.

    ``1/true/yes/on`` and ``0/false/no/off`` (any case, surrounding spaces ignored); unset or
    empty gives ``default``. Anything else (``ture``) stops start-up naming the variable, as
    healthchecks' ``envbool`` does: a typo must not quietly mean "off".

    Raises:
        ImproperlyConfigured: the value is none of those words.
    """
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a yes/no value: write true or false (also 1/0, yes/no, on/off).")


def _env_number(name: str, default, kind=int):
    """A number from the environment; a value that isn't one stops start-up naming it."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return kind(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a {'whole number' if kind is int else 'number'}.") from None


def _env_rate(name: str, default: str) -> str:
    """A throttle rate ("60/min") from the environment; empty turns it off. A value that
    isn't one stops start-up naming it."""
    raw = os.environ.get(name)
    value = default if raw is None else raw.strip()
    if value and not re.fullmatch(r"\d+/(s|sec|second|m|min|minute|h|hour|d|day)", value):
        raise ImproperlyConfigured(
            f"{name}={value!r} is not a rate: write <count>/<period>, the period one of s, min, hour, day."
        )
    return value


# One deployment on more than one machine (docs/nodes.md): several web nodes (serve
# --no-cluster) and worker nodes (manage.py work) on one PostgreSQL and one Redis broker.
# Set it on every node; each command then refuses a setup that cannot work across
# machines (workforce_project.nodes) and runs its task cluster without the one-cluster-
# per-database lock (the Redis broker hands each task to one worker, whichever node).
WORKFORCE_MULTI_NODE = env_bool("WORKFORCE_MULTI_NODE", False)

# Tasks are signed with this key: with none set, each installation makes its own on first
# start (VAR_DIR/secret_key, mode 0600), read by the web server and the cluster alike.
# Across machines the key must be one for every node: without DJANGO_SECRET_KEY serve and
# work refuse to start (workforce_project.nodes), so nothing is written meanwhile and any
# other command runs with a key of its own process.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or (
    secrets.token_urlsafe(50) if WORKFORCE_MULTI_NODE else load_or_create_secret_key(VAR_DIR / "secret_key")
)
# Off unless asked for: a 500 under DEBUG hands the caller the traceback and settings.
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if h]
# Origins besides the server's own that may post forms and call /mcp from a browser
# (https://office.example.org, https://*.example.org); comma-separated.
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served locally (no CDN)
    "django_q",
    "workforce",
    "boards",
    "mailboxes",
    "seats",
    "coordinators",
    "mail",
    "web",  # the pages (docs/pages.md "The pages")
    "django_htmx",
    "workforce_project",  # the composition root: boot and the serve command
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "workforce.api.middleware.ApiHygieneMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",  # request.htmx on the pages' views
]

# A CSRF failure on an /api/ path answers JSON in the contract's shape.
CSRF_FAILURE_VIEW = "workforce.api.errors.csrf_failure"

ROOT_URLCONF = "workforce_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "web.context.workforce",
            ],
        },
    }
]
WSGI_APPLICATION = "workforce_project.wsgi.application"
ASGI_APPLICATION = "workforce_project.asgi.application"

# --- Database -------------------------------------------------------------------------
# SQLite is the embedded default; DATABASE_URL selects PostgreSQL (postgres://...).
_default_sqlite = f"sqlite:///{VAR_DIR / 'workforce.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(os.environ.get("DATABASE_URL", _default_sqlite))}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web server read while the cluster writes; IMMEDIATE takes the write
    # lock at BEGIN so two writers queue on the busy timeout instead of deadlocking.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    DATABASES["default"].setdefault("TEST", {})
# PostgreSQL: server-side parameter binding, and statements a connection sends twice
# prepared (psycopg's prepare_threshold): the planner's work is done once per connection
# and statement instead of on every execution (bench/cycle_statements.py: the database's
# CPU per post-and-answer cycle about 35 % lower). On by default (the whole suite and the
# end-to-end suite pass with it); raw SQL must then give every parameter a type the
# server can infer (``%s::text`` where it cannot). false: client-side binding, nothing
# prepared, for a pooler that cannot carry prepared statements (PgBouncer in transaction
# mode before 1.21; docs/running.md).
WORKFORCE_DB_PREPARED = env_bool("WORKFORCE_DB_PREPARED", True)
if WORKFORCE_DB_PREPARED and DATABASES["default"]["ENGINE"].endswith("postgresql"):
    DATABASES["default"].setdefault("OPTIONS", {}).update({"server_side_binding": True, "prepare_threshold": 2})
# The web process (serve) takes its PostgreSQL connections from a pool sized by
# WORKFORCE_WEB_CONCURRENCY (workforce_project.deployment.web_pool_options).
WORKFORCE_DB_POOL = env_bool("WORKFORCE_DB_POOL", True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = os.environ.get("DJANGO_STATIC_ROOT") or None  # only for collectstatic
# Serve admin and browsable-API assets straight from the apps, no collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# A login with no ?next= lands on the home page (Django's default, /accounts/profile/, is no page here).
LOGIN_REDIRECT_URL = "web:home"

APPEND_SLASH = False  # one form for the whole API: no trailing slashes (APPEND_SLASH cannot redirect a POST body)

# --- Workforce -------------------------------------------------------------------------
WORKFORCE_ROOT = os.environ.get("WORKFORCE_ROOT", str(BASE_DIR / "examples" / "support-desk"))
WORKFORCE_AUTH = os.environ.get("WORKFORCE_AUTH", "none")  # "none" (development) or "token"
if WORKFORCE_AUTH not in {"none", "token"}:
    raise ImproperlyConfigured(f'WORKFORCE_AUTH={WORKFORCE_AUTH!r}: use "none" (development) or "token".')
WORKFORCE_OPEN_USER = os.environ.get("WORKFORCE_OPEN_USER", "workforce")
# Requests the web server runs at once; more wait their turn. Each running request holds a
# database connection, so this bounds connections (PostgreSQL's default max is 100).
WORKFORCE_WEB_CONCURRENCY = _env_number("WORKFORCE_WEB_CONCURRENCY", 16, int)
# Live streams (GET /api/sessions/{id}/stream): at most this many open at once, apart from
# WORKFORCE_WEB_CONCURRENCY's slots; a comment heartbeat after this many idle seconds; on
# SQLite a stream re-reads this often (PostgreSQL wakes it with LISTEN/NOTIFY).
WORKFORCE_STREAM_LIMIT = _env_number("WORKFORCE_STREAM_LIMIT", 100, int)
# Back-pressure (workforce.backlog): with this many wakes open (deliveries, delegated
# posts, mail and chat runs, pending or running) a client's post, mail or chat is refused
# with 503 backlog-full and Retry-After; 0 turns the bound off. The default is about what
# the cluster clears in 30-60 s at the defaults (bench/saturation.py, bench/README.md).
WORKFORCE_BACKLOG_LIMIT = _env_number("WORKFORCE_BACKLOG_LIMIT", 600, int)
# serve lowers its web server's CPU priority by this many nice steps once its own task
# cluster runs (workforce_project.priority; Linux); 0 leaves it as it is.
WORKFORCE_WEB_NICE = _env_number("WORKFORCE_WEB_NICE", 0, int)
if not 0 <= WORKFORCE_WEB_NICE <= 19:
    raise ImproperlyConfigured(f"WORKFORCE_WEB_NICE={WORKFORCE_WEB_NICE} must be 0-19 (nice steps; 0: off).")
if WORKFORCE_BACKLOG_LIMIT < 0:
    raise ImproperlyConfigured(f"WORKFORCE_BACKLOG_LIMIT={WORKFORCE_BACKLOG_LIMIT} is negative; 0 turns the bound off.")
WORKFORCE_STREAM_HEARTBEAT_SECONDS = _env_number("WORKFORCE_STREAM_HEARTBEAT_SECONDS", 15, float)
WORKFORCE_STREAM_POLL_SECONDS = _env_number("WORKFORCE_STREAM_POLL_SECONDS", 0.25, float)
# What the web server checks before a request takes a web slot or a stream place
# (workforce_project.admission): a body of at most WORKFORCE_MAX_BODY_BYTES (413 beyond,
# by Content-Length or by the bytes read), whole within WORKFORCE_BODY_TIMEOUT_SECONDS
# (408); one client address holds at most WORKFORCE_ADDRESS_LIMIT bodies still arriving
# and streams (waiting reads, MCP calls) open, together (429 beyond).
WORKFORCE_MAX_BODY_BYTES = _env_number("WORKFORCE_MAX_BODY_BYTES", 1_048_576, int)
WORKFORCE_BODY_TIMEOUT_SECONDS = _env_number("WORKFORCE_BODY_TIMEOUT_SECONDS", 10, float)
WORKFORCE_ADDRESS_LIMIT = _env_number("WORKFORCE_ADDRESS_LIMIT", 20, int)
DATA_UPLOAD_MAX_MEMORY_SIZE = WORKFORCE_MAX_BODY_BYTES  # the same cap where Django reads a body itself
# Longest text an action takes (a post's body, a task's goal, a coordinator message).
WORKFORCE_MAX_TEXT_CHARS = _env_number("WORKFORCE_MAX_TEXT_CHARS", 32_000, int)
WORKFORCE_HISTORY_WINDOW = _env_number("WORKFORCE_HISTORY_WINDOW", 50, int)
WORKFORCE_MODEL = os.environ.get("WORKFORCE_MODEL", "embedded/echo")
WORKFORCE_ROUTE_MODEL = os.environ.get("WORKFORCE_ROUTE_MODEL", "embedded/lexical")
WORKFORCE_BROKER_URL = os.environ.get("WORKFORCE_BROKER_URL", "")
# With the ORM broker, the pusher is woken at each enqueue's commit (NOTIFY on PostgreSQL,
# a local datagram on SQLite) and looks anyway after Q_CLUSTER["poll"], doubling while the
# queue stays empty up to this (seconds; workforce.broker).
WORKFORCE_BROKER_IDLE_SECONDS = _env_number("WORKFORCE_BROKER_IDLE_SECONDS", 30.0, float)
# Seats (spec "Waking agent seats"). Each model call and each whole turn has a deadline; the turn's must
# stay below Q_CLUSTER["timeout"] (a system check says so).
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")  # empty: the openai client's default
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
WORKFORCE_MODEL_TIMEOUT = _env_number("WORKFORCE_MODEL_TIMEOUT", 60, float)
# Most retries of one openai/<name> call after its first attempt (429, 5xx, timeouts,
# dropped connections; honouring Retry-After), all within the call's own timeout.
WORKFORCE_MODEL_RETRIES = _env_number("WORKFORCE_MODEL_RETRIES", 6, int)
# A route's evaluator call (mailbox routing, a coordinator's best fit); default: a model call's.
WORKFORCE_ROUTE_TIMEOUT = _env_number("WORKFORCE_ROUTE_TIMEOUT", WORKFORCE_MODEL_TIMEOUT, float)
WORKFORCE_TURN_TIMEOUT = _env_number("WORKFORCE_TURN_TIMEOUT", 100, float)
WORKFORCE_TURN_MAX_STEPS = _env_number("WORKFORCE_TURN_MAX_STEPS", 8, int)
# Tool calls one turn may make (each past it is refused tool-call-limit), and seconds one
# call to a tool server may take (docs/tools.md).
WORKFORCE_TURN_MAX_TOOL_CALLS = _env_number("WORKFORCE_TURN_MAX_TOOL_CALLS", 16, int)
WORKFORCE_TOOL_CALL_TIMEOUT = _env_number("WORKFORCE_TOOL_CALL_TIMEOUT", 30, float)
# Characters of a tool server's answer (its JSON) a seat keeps; a longer one is refused.
WORKFORCE_TOOL_RESULT_CHARS = _env_number("WORKFORCE_TOOL_RESULT_CHARS", 100_000, int)
# Dispatch handed to an external queue with no shared lease backend: flow-to-flow posts
# are refused (external-dispatcher) and a client post wakes nobody.
WORKFORCE_EXTERNAL_DISPATCHER = env_bool("WORKFORCE_EXTERNAL_DISPATCHER", False)
WORKFORCE_DELIVERY_MAX_ATTEMPTS = _env_number("WORKFORCE_DELIVERY_MAX_ATTEMPTS", 3, int)
WORKFORCE_SWEEP_SECONDS = _env_number("WORKFORCE_SWEEP_SECONDS", 15, float)
# While sweep passes find nothing and no task is enqueued, the wait between them doubles
# up to this (seconds), and a timer with nothing scheduled sleeps this long (docs/running.md "Idle").
WORKFORCE_SWEEP_IDLE_SECONDS = _env_number("WORKFORCE_SWEEP_IDLE_SECONDS", 120, float)
# How long serve takes to stop (web server and cluster); work still running then is
# killed and left to its lease (a positive number of seconds; checked).
WORKFORCE_STOP_SECONDS = _env_number("WORKFORCE_STOP_SECONDS", 10, float)
# serve on one machine runs up to this many committed deliveries, routes and delegated posts
# in its web process itself, right after the commit, and hands the rest to the cluster;
# 0: every task goes to the cluster (workforce.inline).
WORKFORCE_INLINE_TURNS = _env_number("WORKFORCE_INLINE_TURNS", 2, int)
if WORKFORCE_INLINE_TURNS < 0:
    raise ImproperlyConfigured(f"WORKFORCE_INLINE_TURNS={WORKFORCE_INLINE_TURNS} is negative; 0 sends every turn to the cluster.")
# A task known lost is re-enqueued no sooner than this after its enqueue (0: Q_CLUSTER
# retry), then twice that, ... up to the max (0: 16 times); see workforce.leases.
WORKFORCE_REQUEUE_SECONDS = _env_number("WORKFORCE_REQUEUE_SECONDS", 0, float)
WORKFORCE_REQUEUE_MAX_SECONDS = _env_number("WORKFORCE_REQUEUE_MAX_SECONDS", 0, float)
# How a task-cluster process boots itself (hire the tree's seats, wire the notify block).
WORKFORCE_BOOT = os.environ.get("WORKFORCE_BOOT", "workforce_project.boot.boot_process")
# Mailbox kinds of your own: {"my-mailbox": "myapp.flows.build_my_mailbox"} (spec
# "Registering a kind of your own"); the built-in "mailbox" kind is always there.
WORKFORCE_MAILBOX_KINDS: dict[str, str] = {}
# Coordinators (spec 004 "Setting one up"): how long a round waits for its answers
# (milliseconds; a positive whole number), best fit's evaluator (default: the route
# model), and the flows a post can be delivered to.
WORKFORCE_COORDINATOR_ROUND_DEADLINE_MS = _env_number("WORKFORCE_COORDINATOR_ROUND_DEADLINE_MS", 300_000, int)
WORKFORCE_COORDINATOR_ROUTE_MODEL = os.environ.get("WORKFORCE_COORDINATOR_ROUTE_MODEL", "")
WORKFORCE_COORDINATOR_DELEGATE_FLOWS = ["agent"]

# Mail (spec "Where mail lives"): the backend (a dotted path to a factory of a
# mail.store.MailStore; default the embedded git vaults) and where the vaults live.
WORKFORCE_MAIL_STORE = os.environ.get("WORKFORCE_MAIL_STORE", "mail.vault.embedded_store")
WORKFORCE_VAULT_DIR = os.environ.get("WORKFORCE_VAULT_DIR", str(VAR_DIR / "vaults"))
# How long the MCP tools agent_chat and agent_chat_reply wait for the agent's reply
# before answering it unfinished (seconds): under the 60 s request timeout of hosts built
# on the TypeScript SDK (mail.mcp_server; docs/mcp.md).
WORKFORCE_MCP_CHAT_WAIT_SECONDS = _env_number("WORKFORCE_MCP_CHAT_WAIT_SECONDS", 45, float)
# The vault sweep packs an embedded vault's loose objects (about 37 a mail) into a git
# pack once it holds this many (mail.vault.VaultStore.pack_vault; 0 never packs).
WORKFORCE_VAULT_PACK_LOOSE = _env_number("WORKFORCE_VAULT_PACK_LOOSE", 1024, int)
# The forgejo backend (WORKFORCE_MAIL_STORE=mail.forgejo.forgejo_store): a Forgejo or Gitea
# server, the office's token, the vault naming rule (owner/repository), and the issue
# webhook's shared secret (empty: every webhook call is refused).
WORKFORCE_FORGE_URL = os.environ.get("WORKFORCE_FORGE_URL", "")
WORKFORCE_FORGE_TOKEN = os.environ.get("WORKFORCE_FORGE_TOKEN", "")
WORKFORCE_FORGE_VAULT = os.environ.get("WORKFORCE_FORGE_VAULT", "{org}/{agent}")
# The office account's login on the forge; empty reads it from GET /api/v1/user.
WORKFORCE_FORGE_USER = os.environ.get("WORKFORCE_FORGE_USER", "")
WORKFORCE_FORGE_WEBHOOK_SECRET = os.environ.get("WORKFORCE_FORGE_WEBHOOK_SECRET", "")
# manage.py mcp with WORKFORCE_AUTH=token: the API token of the user the MCP server acts as.
WORKFORCE_MCP_TOKEN = os.environ.get("WORKFORCE_MCP_TOKEN", "")

# --- Task queue (django-q2) -----------------------------------------------------------
# timeout < retry, or a task still running is handed out again; max_attempts is finite,
# or a failing task is redelivered forever by the ORM broker. A system check enforces both.
# save_limit -1: a task that succeeded leaves no django-q2 result row. Nothing reads them
# (the work's own rows, deliveries and board rows, say what was done), and keeping a
# bounded number made every result's save re-read all of them (its CPU grew with the
# rows kept). A failure is still saved (django-q2's Failure admin) and acknowledged
# (ack_failures): the work's row and its sweeper decide whether it runs again.
# bulk: tasks one dequeue claims, in one statement on PostgreSQL (workforce.broker).
# workers: 1 by default, run in the sentinel's own process (serve's cluster is then one
# process: docs/running.md "Memory"); serve's web process runs up to
# WORKFORCE_INLINE_TURNS turns itself beside it. 2 or more: each a process of its own.
_Q_WORKERS = _env_number("WORKFORCE_Q_WORKERS", 1, int)
Q_CLUSTER = {
    "name": "workforce",
    "workers": _Q_WORKERS,
    "timeout": _env_number("WORKFORCE_Q_TIMEOUT", 120, int),
    "retry": _env_number("WORKFORCE_Q_RETRY", 180, int),
    "max_attempts": _env_number("WORKFORCE_Q_MAX_ATTEMPTS", 3, int),
    "ack_failures": True,
    "catch_up": False,
    "poll": 0.2,
    # The sentinel's round of its processes (timeouts, a dead worker replaced): 0.5 s by
    # default, 5 s here: an idle cluster is not woken twice a second for it.
    "guard_cycle": _env_number("WORKFORCE_Q_GUARD_SECONDS", 5, float),
    "save_limit": -1,
    "bulk": _env_number("WORKFORCE_Q_BULK", max(1, _Q_WORKERS), int),
    "label": "Task queue",
}
# Fair scheduling of deliveries (mailboxes.fairness): a mailbox session, and an
# organization, has at most this many deliveries released to the queue at once (queued,
# running or waiting for their seat); the rest are held as rows and released oldest first,
# round-robin across sessions, as those finish. 0: no bound.
# Defaults: a session can keep every worker busy and no more of its tasks wait in line
# (bench/flood_fairness.py); an organization twice that. At least 2: with one cluster
# worker, serve's web process runs turns too (WORKFORCE_INLINE_TURNS).
_TURN_RUNNERS = max(2, _Q_WORKERS)
WORKFORCE_DELIVERY_SESSION_TASKS = _env_number("WORKFORCE_DELIVERY_SESSION_TASKS", _TURN_RUNNERS, int)
WORKFORCE_DELIVERY_ORG_TASKS = _env_number("WORKFORCE_DELIVERY_ORG_TASKS", 2 * _TURN_RUNNERS, int)
# The cluster's processes keep their database connections this many seconds (Django's
# CONN_MAX_AGE, with health checks; 0: a new connection for every task and poll, as
# django-q2 does by default). The web process pools its own (WORKFORCE_DB_POOL).
WORKFORCE_CLUSTER_CONN_MAX_AGE = _env_number("WORKFORCE_CLUSTER_CONN_MAX_AGE", 600, float)
if WORKFORCE_BROKER_URL.startswith("redis://") or WORKFORCE_BROKER_URL.startswith("rediss://"):
    # A broker that does not answer fails an enqueue in seconds instead of hanging it.
    _sep = "&" if "?" in WORKFORCE_BROKER_URL else "?"
    Q_CLUSTER["redis"] = (
        WORKFORCE_BROKER_URL
        if "socket_connect_timeout=" in WORKFORCE_BROKER_URL
        else f"{WORKFORCE_BROKER_URL}{_sep}socket_connect_timeout=5"
    )
    # django-q2's Redis broker; the cluster's processes keep their connections.
    Q_CLUSTER["broker_class"] = "workforce.broker_redis.ClusterRedis"
else:
    Q_CLUSTER["orm"] = "default"
    # django-q2's ORM broker, woken by LISTEN/NOTIFY on PostgreSQL (unchanged on SQLite).
    Q_CLUSTER["broker_class"] = "workforce.broker.ListeningORM"

# A cache every web node shares (redis://HOST:6379/1), for the API's throttles and the
# login limits; unset, each process counts in its own memory (docs/nodes.md).
WORKFORCE_CACHE_URL = os.environ.get("WORKFORCE_CACHE_URL", "")
if WORKFORCE_CACHE_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": WORKFORCE_CACHE_URL,
            "KEY_PREFIX": "workforce",
        }
    }

# Throttling (workforce.api.throttles; docs/api.md "Limits"): calls per user and per organization,
# "<count>/<period>" (s, min, hour, day) over a sliding window; empty turns one off. Writes
# (any method but GET/HEAD/OPTIONS: posts, actions, mail, chat) and, looser, reads.
WORKFORCE_THROTTLE_USER = _env_rate("WORKFORCE_THROTTLE_USER", "60/min")
WORKFORCE_THROTTLE_ORG = _env_rate("WORKFORCE_THROTTLE_ORG", "600/min")
WORKFORCE_THROTTLE_READ_USER = _env_rate("WORKFORCE_THROTTLE_READ_USER", "600/min")
WORKFORCE_THROTTLE_READ_ORG = _env_rate("WORKFORCE_THROTTLE_READ_ORG", "6000/min")
# Failed logins (the admin's and /accounts/login/; workforce.logins): after this many
# failures for one username, or from one client address, within the window (seconds),
# further attempts are refused (429) until the window has passed; 0 turns one off.
WORKFORCE_LOGIN_FAILURES_PER_USERNAME = _env_number("WORKFORCE_LOGIN_FAILURES_PER_USERNAME", 5, int)
WORKFORCE_LOGIN_FAILURES_PER_ADDRESS = _env_number("WORKFORCE_LOGIN_FAILURES_PER_ADDRESS", 20, int)
WORKFORCE_LOGIN_FAILURE_WINDOW_SECONDS = _env_number("WORKFORCE_LOGIN_FAILURE_WINDOW_SECONDS", 900, int)

# --- REST framework ---------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "workforce.api.schema.WorkforceAutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": (
        [
            "rest_framework.authentication.TokenAuthentication",
            "workforce.api.authentication.BearerTokenAuthentication",  # the same tokens, as MCP takes them
            "rest_framework.authentication.SessionAuthentication",
        ]
        if WORKFORCE_AUTH == "token"
        else []
    ),
    "DEFAULT_PERMISSION_CLASSES": (
        ["rest_framework.permissions.IsAuthenticated"] if WORKFORCE_AUTH == "token" else ["rest_framework.permissions.AllowAny"]
    ),
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_PARSER_CLASSES": ["workforce.api.parsers.SafeJSONParser"],  # the contract is JSON
    "URL_FORMAT_OVERRIDE": None,  # no ?format=: one answer format, JSON (or the browsable API)
    "UNAUTHENTICATED_USER": None,
    "EXCEPTION_HANDLER": "workforce.api.errors.exception_handler",
    # Per user and per organization (WORKFORCE_THROTTLE_*): a JSON 429 with Retry-After.
    "DEFAULT_THROTTLE_CLASSES": ["workforce.api.throttles.UserThrottle", "workforce.api.throttles.OrgThrottle"],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Workforce server",
    "DESCRIPTION": "Mailboxes, boards and coordinators for teams of people and AI agent seats.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Each kind's actions as operations of their own, the token scheme (workforce.api.schema).
    "PREPROCESSING_HOOKS": ["workforce.api.schema.action_endpoints"],
    # Enums stay inline (no shared enum components whose names collide as apps add them).
    "POSTPROCESSING_HOOKS": ["workforce.api.schema.security_schemes"],
    # Swagger UI and Redoc from drf-spectacular-sidecar's static files: the docs page works offline.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No validator badge: Swagger UI would fetch it from the validator's web site.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
}

# The server's log level, in any case; WARNING also silences serve's access log.
WORKFORCE_LOG_LEVEL = os.environ.get("WORKFORCE_LOG_LEVEL", "INFO").strip().upper() or "INFO"
if WORKFORCE_LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise ImproperlyConfigured(
        f"WORKFORCE_LOG_LEVEL={WORKFORCE_LOG_LEVEL!r} is not a log level: use DEBUG, INFO, WARNING, ERROR or CRITICAL."
    )

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(levelname)s %(name)s: %(message)s"}},
    # A 4xx answer is a refusal working as designed: INFO, not WARNING (5xx stays ERROR).
    "filters": {"client_errors_at_info": {"()": "workforce.api.request_log.ClientErrorsAtInfo"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": WORKFORCE_LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "INFO"}, "django.request": {"filters": ["client_errors_at_info"]}},
}
