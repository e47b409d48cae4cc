"""Settings for the OmniRoute gateway, read once from the environment.

Every variable is optional: with none set the gateway runs on SQLite in ``data/``, the in-memory
state store and the in-memory channel layer. ``DATABASE_URL`` and ``REDIS_URL`` are how it scales
past one process. Malformed values fail loudly at start-up (``ImproperlyConfigured``).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from omniroute.core.origins import parse_trusted_origins  # pure: no Django import
from omniroute.devenv import dev_env_to_read
from routing.domain.config.encryption_keys import DEV_ENCRYPTION_KEY, parse_encryption_keys
from routing.domain.plan.fallback import parse_emergency_fallback  # pure: no Django import

BASE_DIR = Path(__file__).resolve().parent.parent
DEV_SECRET_KEY = "omniroute-dev-insecure-secret-do-not-use-in-production"

env = environ.Env()
# The development keys ``make run`` wrote to ``data/dev.env`` (omniroute.devenv): read only when
# the file exists and OMNIROUTE_DEBUG is not explicitly false; it never overrides a variable
# already set. A deployment has no such file (docs/configuration.md).
_dev_env = dev_env_to_read(os.environ)
if _dev_env is not None:
    environ.Env.read_env(_dev_env)


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    """An integer variable at least ``minimum``; anything else refuses to start."""
    try:
        value = int(env.int(name, default=default))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer") from exc
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


def env_float(name: str, default: float, *, minimum: float = 0.0) -> float:
    """A float variable at least ``minimum``; anything else refuses to start."""
    try:
        value = float(env.float(name, default=default))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number") from exc
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


# Off unless asked for (``make run`` turns it on for the demo): with it on, an error page shows
# settings, routes and the request, caller's key included.
DEBUG = env.bool("OMNIROUTE_DEBUG", default=False)
SECRET_KEY = env.str("OMNIROUTE_SECRET_KEY", default="") or (DEV_SECRET_KEY if DEBUG else "")
if not SECRET_KEY:
    raise ImproperlyConfigured(
        "OMNIROUTE_SECRET_KEY is not set: the gateway needs a secret key when OMNIROUTE_DEBUG is "
        "off. Set one, e.g. OMNIROUTE_SECRET_KEY=$(python -c 'import secrets; "
        "print(secrets.token_urlsafe(50))'), or OMNIROUTE_DEBUG=1 for a local demo."
    )
if not DEBUG and SECRET_KEY == DEV_SECRET_KEY:
    raise ImproperlyConfigured(
        "OMNIROUTE_DEBUG is off but OMNIROUTE_SECRET_KEY is the development key: set a real secret."
    )
# The keys that encrypt provider secrets, newest first (routing.domain.config.encryption_keys);
# apart
# from SECRET_KEY, which only decrypts secrets written before this variable existed.
try:
    ENCRYPTION_KEYS = parse_encryption_keys(env.str("OMNIROUTE_ENCRYPTION_KEY", default=""))
except ValueError as _error:
    raise ImproperlyConfigured(f"OMNIROUTE_ENCRYPTION_KEY: {_error}") from _error
if not ENCRYPTION_KEYS and DEBUG:
    ENCRYPTION_KEYS = (DEV_ENCRYPTION_KEY,)
if not DEBUG and (not ENCRYPTION_KEYS or DEV_ENCRYPTION_KEY in ENCRYPTION_KEYS):
    raise ImproperlyConfigured(
        "OMNIROUTE_DEBUG is off but OMNIROUTE_ENCRYPTION_KEY is unset or holds the development "
        "key: set one or more Fernet keys, comma-separated, newest first (docs/configuration.md)."
    )
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
# Behind a TLS-terminating proxy (docs/deploying.md, "Behind a TLS proxy"). The origins a
# browser may post from (the admin's login and forms) and open the dashboard socket from,
# besides the request's own: needed when the proxy hands the gateway another host name than the
# browser's ("https://gateway.example,https://*.example.org").
try:
    CSRF_TRUSTED_ORIGINS = parse_trusted_origins(
        env.str("OMNIROUTE_CSRF_TRUSTED_ORIGINS", default="")
    )
except ValueError as _error:
    raise ImproperlyConfigured(f"OMNIROUTE_CSRF_TRUSTED_ORIGINS: {_error}") from _error
# Believe X-Forwarded-Proto: https (the request came in over TLS). Only when every request
# reaches the gateway through a proxy that sets that header itself, overwriting the client's:
# anyone who can reach the gateway directly could otherwise claim https. Off, the scheme is the
# connection's own (plain http under ``manage.py serve``).
if env.bool("OMNIROUTE_SECURE_PROXY_SSL_HEADER", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
DATA_DIR = Path(env.str("OMNIROUTE_DATA_DIR", default=str(BASE_DIR / "data")))
LOG_LEVEL = env.str("OMNIROUTE_LOG_LEVEL", default="INFO").upper()
LOG_FORMAT = env.str("OMNIROUTE_LOG_FORMAT", default="plain").lower()
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"OMNIROUTE_LOG_FORMAT must be plain or json, got {LOG_FORMAT!r}")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "resilience",
    "routing",
    "leases",
    "omniroute.dashboard",
    "omniroute.core.observability.requestlog",
]
# The development tools (fake upstream, bench, soak, chaos...) are an app of their own that the
# production image leaves out: installed only with debug on, and only where the package exists.
if DEBUG and importlib.util.find_spec("omniroute.tools") is not None:
    INSTALLED_APPS.append("omniroute.tools")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files (admin, browsable API, API docs) in every mode, straight after security.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Outside the session and CSRF middleware, so it sees the cookies they set: Secure over https.
    "omniroute.secure_cookies.SecureCookiesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "omniroute.urls"
ASGI_APPLICATION = "omniroute.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # omniroute/templates links to the top-level templates/: pip install . ships them as
        # the package's data, and a checkout reads them through the link (tests/test_packaging.py).
        "DIRS": [Path(__file__).resolve().parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'omniroute.sqlite3'}")
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    # WAL lets the admin write while the gateway reads; a busy timeout instead of "locked".
    # IMMEDIATE transactions take the write lock at BEGIN: a deferred one that read first and
    # then writes fails at once ("database is locked") when the background write-through of
    # breaker and connection state committed in between, whatever the timeout.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL: str | None = env.str("REDIS_URL", default="") or None
REDIS_PREFIX = env.str("OMNIROUTE_REDIS_PREFIX", default="omniroute:")
# Traces of the /v1 proxy go to this OTLP/HTTP collector (omniroute.core.observability.tracing).
OTEL_EXPORTER_OTLP_ENDPOINT = env.str("OTEL_EXPORTER_OTLP_ENDPOINT", default="")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "prefix": f"{REDIS_PREFIX}asgi"},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# The gateway's own knobs.
MAX_BODY_BYTES = env_int("OMNIROUTE_MAX_BODY_BYTES", 10 * 1024 * 1024, minimum=1024)
# Seconds the gateway waits for the next part of a request body; a client that sends nothing for
# longer gets a 408 (omniroute/body_timeout.py).
BODY_TIMEOUT_SECONDS = env_float("OMNIROUTE_BODY_TIMEOUT_SECONDS", 30.0, minimum=0.1)
# How deep a request body's JSON may nest, on /v1 and /api alike; deeper is a 400.
MAX_JSON_DEPTH = env_int("OMNIROUTE_MAX_JSON_DEPTH", 64, minimum=2)
# With debug off, the API root, schema and docs page need a staff session or a manage key;
# true shows them to anyone.
PUBLIC_API_DOCS = env.bool("OMNIROUTE_PUBLIC_API_DOCS", default=False)
# When set, GET /metrics needs "Authorization: Bearer <this token>".
METRICS_TOKEN = env.str("OMNIROUTE_METRICS_TOKEN", default="")
UPSTREAM_CONNECT_TIMEOUT_SECONDS = env_float(
    "OMNIROUTE_UPSTREAM_CONNECT_TIMEOUT", 10.0, minimum=0.001
)
UPSTREAM_READ_TIMEOUT_SECONDS = env_float("OMNIROUTE_UPSTREAM_READ_TIMEOUT", 120.0, minimum=0.001)
UPSTREAM_MAX_CONNECTIONS = env_int("OMNIROUTE_UPSTREAM_MAX_CONNECTIONS", 1000, minimum=1)
CONFIG_POLL_SECONDS = env_float("OMNIROUTE_CONFIG_POLL_SECONDS", 1.0)
# Allocations between two young-generation garbage collections of a serving process (Python's
# own default, 700, collected several times per request); what the process allocated while
# starting is frozen out of collections (omniroute/collector.py, docs/configuration.md).
GC_GEN0_THRESHOLD = env_int("OMNIROUTE_GC_GEN0_THRESHOLD", 50_000, minimum=100)
# A non-streaming upstream body larger than this is a failed attempt: garbage is a failure.
MAX_UPSTREAM_BODY_BYTES = env_int(
    "OMNIROUTE_MAX_UPSTREAM_BODY_BYTES", 32 * 1024 * 1024, minimum=1024
)
# One server-sent event of an upstream stream larger than this is a failed attempt.
MAX_SSE_EVENT_BYTES = env_int("OMNIROUTE_MAX_SSE_EVENT_BYTES", 4 * 1024 * 1024, minimum=1024)
# The model that serves a request once every target has failed, per wire format:
# "openai=provider/model,anthropic=provider/model" (either part optional). The admin's feature
# flags override it at runtime.
EMERGENCY_FALLBACK = env.str("OMNIROUTE_EMERGENCY_FALLBACK", default="")
try:
    parse_emergency_fallback(EMERGENCY_FALLBACK)
except ValueError as _error:
    raise ImproperlyConfigured(f"OMNIROUTE_EMERGENCY_FALLBACK: {_error}") from _error
# Every state-store call is bounded by this; past it the process-local fallback serves.
STORE_TIMEOUT_MS = env_int("OMNIROUTE_STORE_TIMEOUT_MS", 50, minimum=1)

# The request log (docs/operating.md, "Request log"): one row per finished /v1 request, queued
# and written by a background thread; a full queue drops records (and counts them). Rows older
# than the age or beyond the count are pruned in the background.
REQUEST_LOG_ENABLED = env.bool("OMNIROUTE_REQUEST_LOG", default=True)
REQUEST_LOG_QUEUE_SIZE = env_int("OMNIROUTE_REQUEST_LOG_QUEUE_SIZE", 10_000, minimum=1)
REQUEST_LOG_MAX_AGE_DAYS = env_float("OMNIROUTE_REQUEST_LOG_MAX_AGE_DAYS", 7.0, minimum=0.001)
REQUEST_LOG_MAX_ROWS = env_int("OMNIROUTE_REQUEST_LOG_MAX_ROWS", 100_000, minimum=1)
REQUEST_LOG_PRUNE_SECONDS = env_float("OMNIROUTE_REQUEST_LOG_PRUNE_SECONDS", 60.0, minimum=0.1)
# The log's inserts in a child process of each serving process, off its interpreter lock
# (docs/operating.md, "Request log"); off, the writer thread inserts them itself.
REQUEST_LOG_PROCESS = env.bool("OMNIROUTE_REQUEST_LOG_PROCESS", default=True)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
# Times to the second everywhere in the admin (omniroute/formats).
FORMAT_MODULE_PATH = ["omniroute.formats"]
TIME_ZONE = env.str("OMNIROUTE_TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("OMNIROUTE_STATIC_ROOT", default=str(DATA_DIR / "static")))
# WhiteNoise serves what ``collectstatic`` put in STATIC_ROOT (``manage.py serve`` runs it). The
# plain storage: a manifest would make every template naming a static file fail until
# ``collectstatic`` ran (tests included), and compressing every file again on each start costs
# seconds; an unchanged file is not copied again.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "routing.api.auth.ClientKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["routing.api.auth.IsOperator"],
    # DRF's three, with JSON bounded in nesting (a deep body was a RecursionError, a 500).
    "DEFAULT_PARSER_CLASSES": [
        "omniroute.core.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "routing.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "OmniRoute API",
    "DESCRIPTION": "The OmniRoute gateway's client APIs (`/v1`) and its management API.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The docs page's assets come from the installed sidecar package, never from a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Request bodies get their own components, which say what a request must hold (a name
    # that may not be blank has minLength 1; read-only fields are left out).
    "COMPONENT_SPLIT_REQUEST": True,
    # Every operation's error answers (400, 401, 403, 404) in the one error shape; the /v1
    # client APIs; every operation's area and summary.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "routing.api.openapi.document_errors",
        "routing.api.openapi.describe_client_apis",
        "routing.api.openapi.tag_by_area",
    ],
}

# One handler, on the root logger: every other logger propagates to it. Django's own default
# configuration gives ``django`` a console handler too (which printed each of its warnings
# twice) and ``django.server`` another: both are emptied here.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "omniroute.core.logging.JsonFormatter"},
    },
    # Nothing credential-shaped reaches the log.
    "filters": {"scrub": {"()": "omniroute.core.logging.ScrubbingFilter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["scrub"]}
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django": {"handlers": [], "level": LOG_LEVEL, "propagate": True},
        "django.server": {"handlers": [], "propagate": True},
        "daphne": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "django.channels.server": {"level": "WARNING"},
    },
}
