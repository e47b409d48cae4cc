"""The gateway's settings for the test suite and the type checker.

The production settings refuse to load without ``OMNIROUTE_SECRET_KEY`` when debug is off (its
default); here a throwaway key fills in when none is set. Gateway processes the end-to-end
tests start set their own key.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMNIROUTE_SECRET_KEY", "omniroute-test-suite-only-not-a-secret")

from omniroute.settings import *  # noqa: F403
