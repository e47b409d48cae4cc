"""The gateway's settings for the test suite and the type checker.

The production settings refuse to load without ``OMNIROUTE_SECRET_KEY`` and
``OMNIROUTE_ENCRYPTION_KEY`` when debug is off (its default); here throwaway keys fill in when
none is set. Gateway processes the end-to-end
tests start set their own key.

A test run writes only to what it made: under PostgreSQL its test database has a name of its
own (created and dropped by pytest-django), and under Redis its keys live under a prefix of its
own unless ``OMNIROUTE_REDIS_PREFIX`` names one (``tests/databases.py`` deletes them at the end).
"""

from __future__ import annotations

import os
import secrets

os.environ.setdefault("OMNIROUTE_SECRET_KEY", "omniroute-test-suite-only-not-a-secret")
# The test suite's own encryption key (the gateways the end-to-end tests start get their own).
os.environ.setdefault("OMNIROUTE_ENCRYPTION_KEY", "yeh6il2Z49NZncAlHjkRsjWxYa_6wLA3loXFgGngBp8=")
# Debug stays off and a developer's ``data/dev.env`` (``make run``'s keys) is never read: the
# suite, and the processes it starts, see only what they set.
os.environ.setdefault("OMNIROUTE_DEBUG", "0")
# In the environment, so processes the tests start write under the same prefix.
os.environ.setdefault(
    "OMNIROUTE_REDIS_PREFIX", f"omniroute-test-{os.getpid()}-{secrets.token_hex(4)}:"
)

from omniroute.settings import *  # noqa: F403
from omniroute.settings import DATABASES, env

if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["TEST"] = {"NAME": f"test_omniroute_{os.getpid()}_{secrets.token_hex(4)}"}

# The suite drives the development tools (fake upstream, load generator...) with debug off too.
if "omniroute.tools" not in INSTALLED_APPS:  # noqa: F405
    INSTALLED_APPS.append("omniroute.tools")  # noqa: F405

# The request log's writer thread would write into the test database beside the test's own
# transaction: off in the suite's process unless asked for. The gateways the end-to-end tests
# start turn it on (tests/e2e/conftest.py), each with its own database.
REQUEST_LOG_ENABLED = env.bool("OMNIROUTE_REQUEST_LOG", default=False)
# A child process cannot see the test run's own database: in-process tests write in the thread.
REQUEST_LOG_PROCESS = env.bool("OMNIROUTE_REQUEST_LOG_PROCESS", default=False)
