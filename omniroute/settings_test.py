"""The gateway's settings for the test suite and the type checker.

The production settings refuse to load without ``OMNIROUTE_SECRET_KEY`` and
``OMNIROUTE_ENCRYPTION_KEY`` when debug is off (its default); here throwaway keys fill in when
none is set. Gateway processes the end-to-end
tests start set their own key.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMNIROUTE_SECRET_KEY", "omniroute-test-suite-only-not-a-secret")
# The test suite's own encryption key (the gateways the end-to-end tests start get their own).
os.environ.setdefault("OMNIROUTE_ENCRYPTION_KEY", "yeh6il2Z49NZncAlHjkRsjWxYa_6wLA3loXFgGngBp8=")

from omniroute.settings import *  # noqa: F403
