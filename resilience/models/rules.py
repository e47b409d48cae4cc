"""Status restatement rules and provider error rules: provider quirks as rows.

Built-in rows are seeded from the reference's catalog (migration ``0003_rules``); they can be
disabled but not edited or deleted. Operators add their own, at most ``OPERATOR_RULES_MAX``
per kind. ``clean()`` holds every rule, so the admin form, the services and the API agree.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from resilience.domain.rules import STATUS_MAX, STATUS_MIN, HeaderMatch, RuleReason, RuleScope

OPERATOR_RULES_MAX = 50
BUILTIN_EDITABLE_FIELDS = frozenset({"is_enabled"})
STATUS_VALIDATORS = [MinValueValidator(STATUS_MIN), MaxValueValidator(STATUS_MAX)]
RULE_COOLDOWN_MAX_MS = 7 * 86_400_000  # an operator's cooldown; a lock past the calendar breaks
RETRY_AFTER_MAX_MS = 86_400_000  # reads of the connection's state (and fits every database)


def _choices(enum: type[StrEnum]) -> list[tuple[str, str]]:
    return [(member.value, member.value) for member in enum]


class _Rule(models.Model):
    """Fields and checks shared by both kinds of rule."""

    provider = models.SlugField(
        max_length=64, help_text="Provider slug, lower-case (the provider need not exist yet)."
    )
    rule_id = models.SlugField(max_length=100, help_text="Unique per provider.")
    position = models.IntegerField(default=0, help_text="Lower is tried first.")
    is_builtin = models.BooleanField(default=False, editable=False)
    is_enabled = models.BooleanField(default=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.provider}/{self.rule_id}"

    def clean_fields(self, exclude: Collection[str] | None = None) -> None:
        self.provider = (self.provider or "").strip().lower()  # before the slug check
        super().clean_fields(exclude)

    def clean(self) -> None:
        self._check_builtin_unchanged()
        self._check_operator_cap()

    def _check_builtin_unchanged(self) -> None:
        stored = self._stored()
        was_builtin = bool(stored and stored["is_builtin"])
        if self.is_builtin != was_builtin:
            raise ValidationError("Only the seed migration makes built-in rules.")
        if stored is None or not was_builtin:
            return
        changed = {
            f.name
            for f in self._meta.concrete_fields
            if f.attname in stored and stored[f.attname] != getattr(self, f.attname)
        } - BUILTIN_EDITABLE_FIELDS
        if changed:
            raise ValidationError(
                "Built-in rules cannot be edited, only enabled or disabled "
                f"(changed: {', '.join(sorted(changed))})."
            )

    def _stored(self) -> Mapping[str, object] | None:
        if self.pk is None:
            return None
        return type(self)._default_manager.filter(pk=self.pk).values().first()

    def _check_operator_cap(self) -> None:
        if self.is_builtin or not self._state.adding:
            return
        if type(self)._default_manager.filter(is_builtin=False).count() >= OPERATOR_RULES_MAX:
            raise ValidationError(
                f"At most {OPERATOR_RULES_MAX} operator rules of this kind; "
                "delete or edit one instead."
            )


class StatusRestatementRule(_Rule):
    """Restates a provider's misstated error status (e.g. agentrouter 403 "额度不足" → 429)."""

    from_statuses = models.JSONField(
        default=list, help_text="Statuses to restate, e.g. [403, 400]."
    )
    to_status = models.PositiveSmallIntegerField(validators=STATUS_VALIDATORS)
    text_markers = models.JSONField(
        default=list, help_text="Any of these substrings (case-insensitive) must be present."
    )
    exclude_markers = models.JSONField(
        default=list, blank=True, help_text="None of these substrings may be present."
    )
    default_retry_after_ms = models.PositiveIntegerField(
        default=60_000,
        validators=[MaxValueValidator(RETRY_AFTER_MAX_MS)],
        help_text="Told to the client when the upstream gave no retry-after. At most a day.",
    )

    class Meta:
        ordering = ("provider", "position", "id")
        constraints = [
            models.UniqueConstraint(fields=("provider", "rule_id"), name="uniq_restatement_rule")
        ]

    def clean(self) -> None:
        super().clean()
        errors: dict[str, str] = {}
        if not _is_status_list(self.from_statuses):
            errors["from_statuses"] = f"A non-empty list of statuses {STATUS_MIN}–{STATUS_MAX}."
        if not _is_text_list(self.text_markers) or not self.text_markers:
            errors["text_markers"] = "A non-empty list of non-empty strings."
        if not _is_text_list(self.exclude_markers):
            errors["exclude_markers"] = "A list of non-empty strings."
        if errors:
            raise ValidationError(errors)


class ProviderErrorRule(_Rule):
    """Reclassifies a provider's error (status, body substring, header) as reason and scope."""

    status = models.PositiveSmallIntegerField(
        null=True, blank=True, validators=STATUS_VALIDATORS, help_text="Empty matches any status."
    )
    match = models.CharField(
        max_length=500,
        blank=True,
        help_text="Plain substring of the body, case-insensitive (never a regex). Empty: any.",
    )
    header_name = models.CharField(max_length=100, blank=True)
    header_value = models.CharField(max_length=200, blank=True)
    header_match = models.CharField(
        max_length=16, choices=_choices(HeaderMatch), default=HeaderMatch.EQUALS.value
    )
    scope = models.CharField(
        max_length=16, choices=_choices(RuleScope), default=RuleScope.CONNECTION.value
    )
    reason = models.CharField(
        max_length=32, choices=_choices(RuleReason), default=RuleReason.QUOTA_EXHAUSTED.value
    )
    cooldown_ms = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(RULE_COOLDOWN_MAX_MS)],
        help_text="Empty: the default. At most 7 days.",
    )
    parse_reset_countdown = models.BooleanField(
        default=False,
        help_text='Cooldown from "resets in N days/hours/minutes/seconds" in the body; '
        "without one the rule does not match.",
    )

    class Meta:
        ordering = ("provider", "is_builtin", "position", "id")
        constraints = [
            models.UniqueConstraint(fields=("provider", "rule_id"), name="uniq_error_rule")
        ]

    def clean(self) -> None:
        super().clean()
        self.header_name = self.header_name.strip().lower()
        errors: dict[str, str] = {}
        if bool(self.header_name) != bool(self.header_value):
            errors["header_value"] = "Give both the header's name and its value, or neither."
        if self.parse_reset_countdown and self.cooldown_ms is not None:
            errors["cooldown_ms"] = "A countdown rule takes its cooldown from the body."
        if not (self.status or self.match or self.header_name or self.parse_reset_countdown):
            errors["status"] = "Give at least a status, a substring or a header to match."
        if errors:
            raise ValidationError(errors)


def _is_status_list(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(s, int) and not isinstance(s, bool) and STATUS_MIN <= s <= STATUS_MAX
            for s in value
        )
    )


def _is_text_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(s, str) and s.strip() for s in value)
