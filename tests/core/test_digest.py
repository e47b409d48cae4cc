"""The request path's SHA-256 (omniroute.core.digest): the same digests as ``hashlib``, from
CPython's own implementation where the interpreter has it."""

from __future__ import annotations

import hashlib
import importlib.util

from hypothesis import given
from hypothesis import strategies as st

from omniroute.core import digest
from omniroute.core.digest import sha256_hex


@given(st.binary(max_size=4096))
def test_the_digest_is_hashlibs(data: bytes) -> None:
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_known_vectors() -> None:
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_hex(b"abc") == (
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )


def test_cpythons_own_implementation_is_used_where_there_is_one() -> None:
    builtin = any(importlib.util.find_spec(name) for name in ("_sha2", "_sha256"))
    assert (digest._sha256 is not hashlib.sha256) is builtin
