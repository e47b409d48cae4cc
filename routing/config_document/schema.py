"""The document's sections: each one's natural key, fields, defaults and order (pure).

A section is a list of objects identified by natural keys, never by generated ids. A field a
file leaves out takes its default, so a document describes each object whole; only a
connection's secrets are different: left out, the stored secret stays (the API never shows
secrets, so a document could not repeat them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from resilience.domain.rules import HeaderMatch, RuleReason, RuleScope
from routing.config_document import values as v
from routing.config_document.errors import ConfigError, Problem
from routing.config_document.paths import NO_LINES, Lines, Path

DOCUMENT_VERSION = 1
REQUIRED = object()  # a field without a default


@dataclass(frozen=True)
class Field:
    """One field of an object: its name, how its value is checked, and its default."""

    name: str
    normalize: v.Normalize
    default: Any = REQUIRED
    write_only: bool = False  # a secret: absent means "keep", never compared when absent


@dataclass(frozen=True)
class Section:
    """A list of objects of one kind, sorted by ``order`` (the natural key unless told)."""

    name: str
    key: tuple[str, ...]
    fields: tuple[Field, ...]
    order: tuple[str, ...] = ()

    def identity(self, item: Mapping[str, Any]) -> tuple[Any, ...]:
        """The natural key of ``item``."""
        return tuple(item[name] for name in self.key)

    def sort_key(self, item: Mapping[str, Any]) -> tuple[str, ...]:
        """Where ``item`` goes in the section (for a readable, stable diff)."""
        return tuple(str(item[name]) for name in (self.order or self.key))

    def label(self, identity: tuple[Any, ...]) -> str:
        """``provider/name``-style text of a natural key."""
        return "/".join(str(part) for part in identity)


def _f(name: str, normalize: v.Normalize, default: Any = REQUIRED, **kw: Any) -> Field:
    return Field(name, normalize, default, **kw)


TARGET_FIELDS = (
    _f("provider", v.optional_text, None),
    _f("model", v.text, ""),
    _f("connection", v.optional_text, None),  # a connection's name within the provider
    _f("combo", v.optional_text, None),  # a nested combo, instead of provider and model
    _f("weight", v.integer, 1),
    _f("fallback_only_on_quota_exhaustion", v.boolean, False),
)

PROVIDERS = Section(
    "providers",
    ("slug",),
    (
        _f("slug", v.required_text),
        _f("name", v.required_text),
        _f("category", v.required_text),
        _f("base_url", v.required_text),
        _f("wire_format", v.text, "openai"),
        _f("full_text_rules", v.boolean, False),
        _f("honors_rule_scope", v.boolean, False),
        _f("egress_bucketed_lock", v.boolean, False),
        _f("per_model_quota", v.boolean, True),
        _f("max_concurrent", v.optional_integer, None),
    ),
)
CONNECTIONS = Section(
    "connections",
    ("provider", "name"),
    (
        _f("provider", v.required_text),
        _f("name", v.required_text),
        _f("priority", v.integer, 100),
        _f("is_active", v.boolean, True),
        _f("auth_type", v.text, "api_key"),
        _f("base_url", v.text, ""),
        _f("served_models", v.text_list, []),
        _f("max_concurrent", v.optional_integer, None),
        _f("rate_limit_protection", v.boolean, False),
        _f("rate_limit_overrides", v.mapping, {}),
        _f("disable_cooling", v.boolean, False),
        _f("proxy_url", v.text, ""),
        _f("extras", v.mapping, {}),
        _f("secret", v.optional_text, None, write_only=True),
        _f("refresh_secret", v.optional_text, None, write_only=True),
    ),
)
MODEL_CATALOG = Section(
    "model_catalog",
    ("provider", "model"),
    (
        _f("provider", v.required_text),
        _f("model", v.required_text),
        _f("context_window", v.optional_integer, None),
        _f("supports_tools", v.optional_boolean, None),
        _f("supports_structured_output", v.optional_boolean, None),
        _f("accepts_prefill", v.text, "unknown"),
        _f("time_to_first_token_ms", v.optional_integer, None),
        _f("stream_idle_ms", v.optional_integer, None),
        _f("hedge_after_ms", v.optional_integer, None),
        _f("input_price_per_mtok", v.price, None),
        _f("output_price_per_mtok", v.price, None),
    ),
)
COMBOS = Section(
    "combos",
    ("name",),
    (
        _f("name", v.required_text),
        _f("strategy", v.text, "priority"),
        _f("is_active", v.boolean, True),
        _f("description", v.text, ""),
        _f("attempt_overrides", v.mapping, {}),
        _f("options", v.mapping, {}),
        _f("targets", lambda raw: raw, []),  # checked item by item (``TARGET_FIELDS``)
    ),
)
CLIENT_KEYS = Section(
    "client_keys",
    ("key_hash",),
    (
        _f("name", v.required_text),
        _f("key_hash", v.required_text),  # the stored SHA-256; the key is recreated with it
        _f("prefix", v.text, ""),
        _f("scopes", v.text_list, []),
        _f("allowed_models", v.text_list, []),
        _f("allowed_connections", v.text_list, []),  # ``provider/name`` of each connection
        _f("is_active", v.boolean, True),
        _f("expires_at", v.moment, None),
        _f("revoked", v.boolean, False),
    ),
    order=("name", "key_hash"),
)
_RULE_KEY = (_f("provider", v.required_text), _f("rule_id", v.required_text))
ERROR_RULES = Section(
    "error_rules",
    ("provider", "rule_id"),
    (
        *_RULE_KEY,
        _f("position", v.integer, 0),
        _f("is_enabled", v.boolean, True),
        _f("status", v.optional_integer, None),
        _f("match", v.text, ""),
        _f("header_name", v.text, ""),
        _f("header_value", v.text, ""),
        _f("header_match", v.text, HeaderMatch.EQUALS.value),
        _f("scope", v.text, RuleScope.CONNECTION.value),
        _f("reason", v.text, RuleReason.QUOTA_EXHAUSTED.value),
        _f("cooldown_ms", v.optional_integer, None),
        _f("parse_reset_countdown", v.boolean, False),
    ),
)
RESTATEMENT_RULES = Section(
    "restatement_rules",
    ("provider", "rule_id"),
    (
        *_RULE_KEY,
        _f("position", v.integer, 0),
        _f("is_enabled", v.boolean, True),
        _f("from_statuses", v.integer_list),
        _f("to_status", v.integer),
        _f("text_markers", v.text_list),
        _f("exclude_markers", v.text_list, []),
        _f("default_retry_after_ms", v.integer, 60_000),
    ),
)
# Built-in rules come with the gateway; a document only says which ones are switched off.
BUILTIN_RULES = Section(
    "builtin_rules",
    ("kind", "provider", "rule_id"),
    (_f("kind", v.required_text), *_RULE_KEY, _f("is_enabled", v.boolean)),
)
FEATURE_FLAGS = Section(
    "feature_flags",
    ("name",),
    (_f("name", v.required_text), _f("enabled", v.boolean, True), _f("value", v.text, "")),
)

SECTIONS = (
    PROVIDERS,
    CONNECTIONS,
    MODEL_CATALOG,
    COMBOS,
    CLIENT_KEYS,
    ERROR_RULES,
    RESTATEMENT_RULES,
    BUILTIN_RULES,
    FEATURE_FLAGS,
)
SETTINGS_SECTION = "settings"  # the settings document as stored (camelCase, like /api/resilience)
BUILTIN_KINDS = ("error", "restatement")


@dataclass(frozen=True)
class Document:
    """A normalised document: each present section's objects (in the order given), and the
    settings.

    A section the document leaves out is ``None``: importing it changes nothing there.
    """

    sections: Mapping[str, list[dict[str, Any]] | None]
    settings: dict[str, Any] | None

    def items(self, section: Section) -> list[dict[str, Any]] | None:
        """The objects of ``section``, or ``None`` when the document leaves it out."""
        return self.sections.get(section.name)


def document_read(raw: Any, lines: Lines = NO_LINES) -> Document:
    """``raw`` (parsed YAML or JSON) checked and normalised; every problem found is raised
    together in one ``ConfigError``."""
    problems: list[Problem] = []
    if not isinstance(raw, Mapping):
        raise ConfigError([lines.problem((), "the document must be a mapping")])
    known = {s.name for s in SECTIONS} | {SETTINGS_SECTION, "version"}
    for name in raw:
        if name not in known:
            problems.append(lines.problem((str(name),), "unknown section"))
    if raw.get("version", DOCUMENT_VERSION) != DOCUMENT_VERSION:
        problems.append(lines.problem(("version",), f"must be {DOCUMENT_VERSION}"))
    sections = {
        s.name: _section_read(s, raw[s.name], lines, problems) for s in SECTIONS if s.name in raw
    }
    settings = _settings_read(raw, lines, problems)
    if problems:
        raise ConfigError(problems)
    return Document(sections, settings)


def _settings_read(raw: Mapping[str, Any], lines: Lines, problems: list[Problem]) -> Any:
    if SETTINGS_SECTION not in raw:
        return None
    try:
        return v.mapping(raw[SETTINGS_SECTION] or {})
    except ValueError as error:
        problems.append(lines.problem((SETTINGS_SECTION,), str(error)))
        return None


def _section_read(
    section: Section, raw: Any, lines: Lines, problems: list[Problem]
) -> list[dict[str, Any]]:
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        problems.append(lines.problem((section.name,), "must be a list"))
        return []
    items: list[dict[str, Any]] = []
    seen: dict[tuple[Any, ...], int] = {}
    for index, entry in enumerate(raw):
        path: Path = (section.name, index)
        item = object_read(section.fields, entry, path, lines, problems)
        if item is None:
            continue
        if section is COMBOS:
            item["targets"] = _targets_read(item["targets"], (*path, "targets"), lines, problems)
        identity = section.identity(item)
        if identity in seen:
            first = f"{section.name}[{seen[identity]}]"
            problems.append(lines.problem(path, f"{section.label(identity)} repeats {first}"))
        seen.setdefault(identity, index)
        items.append(item)
    return items  # in the file's order, so an index still finds its line


def _targets_read(raw: Any, path: Path, lines: Lines, problems: list[Problem]) -> list[Any]:
    if not isinstance(raw, list):
        problems.append(lines.problem(path, "must be a list"))
        return []
    read = (
        object_read(TARGET_FIELDS, entry, (*path, index), lines, problems)
        for index, entry in enumerate(raw)
    )
    return [target for target in read if target is not None]


def object_read(
    fields: tuple[Field, ...], raw: Any, path: Path, lines: Lines, problems: list[Problem]
) -> dict[str, Any] | None:
    """One object: every field normalised (defaults filled), in the schema's order; ``None``
    (with the problems noted) when a field is missing, unknown or of the wrong kind."""
    if not isinstance(raw, Mapping):
        problems.append(lines.problem(path, "must be a mapping"))
        return None
    before = len(problems)
    names = {f.name for f in fields}
    problems.extend(lines.problem((*path, str(k)), "unknown field") for k in raw if k not in names)
    item: dict[str, Any] = {}
    for spec in fields:
        if spec.name not in raw:
            if spec.default is REQUIRED:
                problems.append(lines.problem((*path, spec.name), "is required"))
            elif not spec.write_only:
                item[spec.name] = _copy(spec.default)
            continue
        try:
            item[spec.name] = spec.normalize(raw[spec.name])
        except ValueError as error:
            problems.append(lines.problem((*path, spec.name), str(error)))
    return item if len(problems) == before else None


def _copy(default: Any) -> Any:
    return type(default)() if isinstance(default, list | dict) else default
