"""SHA-256 hex digests of the short texts hashed on the request path: client keys, session keys,
affinity pins, lease tokens, cache keys.

``hashlib.sha256`` goes through OpenSSL 3, which looks the algorithm up in its provider store
for every new hash. In a tight loop that costs about 0.4 µs; inside a request, between
everything else the process does, about 9 µs, all of it in the lookup. CPython's own SHA-256
(the module ``hashlib`` falls back to without OpenSSL) takes about 3 µs there for a key, and
gives the same digest. It is used when the interpreter has it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

__all__ = ["sha256_hex"]


def _builtin_sha256() -> Callable[[bytes], Any]:
    """CPython's own SHA-256 constructor (``_sha2`` from 3.12, ``_sha256`` before), or
    ``hashlib``'s where neither is there."""
    for module in ("_sha2", "_sha256"):
        try:
            found = __import__(module)
        except ImportError:
            continue
        constructor: Callable[[bytes], Any] = found.sha256
        return constructor
    return hashlib.sha256


_sha256 = _builtin_sha256()


def sha256_hex(data: bytes) -> str:
    """The SHA-256 digest of ``data``, as 64 lower-case hex digits."""
    return str(_sha256(data).hexdigest())
