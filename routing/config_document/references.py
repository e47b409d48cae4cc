"""Secret references: what a document holds in place of a connection's secrets (pure).

An export never writes a secret. A connection's secret, its OAuth refresh token and a proxy
URL with a password are written as ``${ENV:OMNIROUTE_PROVIDER_SECRET_<NAME>}``, the NAME made
of the provider's slug and the connection's name. Only ``manage.py importconfig`` resolves a
reference, and only from a variable with that prefix, so a document cannot read any other
part of the environment; ``PUT /api/config`` refuses references and takes secret values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from routing.config_document.errors import Problem
from routing.config_document.paths import Lines

SECRET_VARIABLE_PREFIX = "OMNIROUTE_PROVIDER_SECRET_"
REFERENCE = re.compile(r"\$\{ENV:([^}]*)\}")
# The fields of a connection that may hold a secret, and the suffix of each one's variable.
SECRET_FIELDS = {"secret": "", "refresh_secret": "_REFRESH", "proxy_url": "_PROXY_URL"}


def secret_variable(provider: str, connection: str) -> str:
    """``OMNIROUTE_PROVIDER_SECRET_ACME__PRIMARY`` for connection ``primary`` of ``acme``
    (letters and digits kept, upper-cased; anything else becomes ``_``)."""
    name = re.sub(r"[^A-Za-z0-9]", "_", f"{provider}__{connection}").upper()
    return SECRET_VARIABLE_PREFIX + name


def reference(variable: str) -> str:
    """The reference text for ``variable``."""
    return "${ENV:" + variable + "}"


def holds_secret(field: str, value: str | None) -> bool:
    """Whether ``value`` of a connection's ``field`` is a secret (a proxy URL only with a
    password)."""
    if not value:
        return False
    return field != "proxy_url" or urlsplit(value).password is not None


def variables_assign(connections: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """A variable stem per connection, in the order given, such that no two connections share
    a variable: two whose names read the same once upper-cased (``a-b`` and ``a_b``) get
    ``_2``, ``_3``..., and so does one whose stem is another's with a suffix (``x refresh``
    beside ``x``, whose refresh token is ``..._X_REFRESH``)."""
    taken: set[str] = set()
    stems: dict[tuple[str, str], str] = {}
    for provider, name in connections:
        stem, count = secret_variable(provider, name), 1
        chosen = stem
        while any(chosen + suffix in taken for suffix in SECRET_FIELDS.values()):
            count += 1
            chosen = f"{stem}_{count}"
        taken.update(chosen + suffix for suffix in SECRET_FIELDS.values())
        stems[(provider, name)] = chosen
    return stems


def references_write(connection: dict[str, Any], stem: str) -> dict[str, Any]:
    """``connection`` (with plaintext secrets, from the database) as it is exported: each
    secret replaced by its reference, an absent secret left out."""
    written = dict(connection)
    for field, suffix in SECRET_FIELDS.items():
        value = written.get(field)
        if holds_secret(field, value):
            written[field] = reference(stem + suffix)
        elif field != "proxy_url":
            written.pop(field, None)
    return written


@dataclass(frozen=True)
class Resolver:
    """Resolves the references of a document: from ``environment`` when references are
    allowed (``importconfig``), else each reference is a problem (``PUT /api/config``)."""

    environment: Mapping[str, str] | None

    def resolve(self, connections: list[dict[str, Any]], lines: Lines) -> list[Problem]:
        """Replace each reference in ``connections`` (in place) by its value; the problems."""
        problems: list[Problem] = []
        for index, connection in enumerate(connections):
            for field in SECRET_FIELDS:
                value = connection.get(field)
                if isinstance(value, str) and "${" in value:
                    path = ("connections", index, field)
                    try:
                        connection[field] = self._value(value)
                    except ValueError as error:
                        problems.append(lines.problem(path, str(error)))
        return problems

    def _value(self, text: str) -> str:
        if self.environment is None:
            raise ValueError(
                "a secret reference is not accepted here: give the secret's value (write-only)"
            )
        match = REFERENCE.fullmatch(text)
        if match is None:
            raise ValueError("a secret reference is written ${ENV:OMNIROUTE_PROVIDER_SECRET_...}")
        variable = match.group(1)
        if not variable.startswith(SECRET_VARIABLE_PREFIX):
            raise ValueError(
                f"a secret reference may only name {SECRET_VARIABLE_PREFIX}* variables"
            )
        if variable not in self.environment:
            raise ValueError(f"the environment variable {variable} is not set")
        return self.environment[variable]
