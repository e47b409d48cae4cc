"""Combos: one client-facing model name over ordered provider targets."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from resilience.domain.attempt_overrides import attempt_overrides_validate
from resilience.domain.settings import ROOT_FIELD, SettingsError
from routing.domain.vocabulary import IMPLEMENTED_STRATEGIES, Strategy


def validate_strategy(value: str) -> None:
    """Refuse strategies the attempt loop cannot run yet, with a clear message."""
    if value not in IMPLEMENTED_STRATEGIES:
        available = ", ".join(sorted(IMPLEMENTED_STRATEGIES))
        raise ValidationError(f"Strategy '{value}' is not available yet (available: {available}).")


class Combo(models.Model):
    """A named route over ordered targets, tried by its strategy."""

    name = models.CharField(max_length=120, unique=True, help_text="The model name clients send.")
    strategy = models.CharField(
        max_length=32,
        choices=[(s.value, s.value) for s in Strategy],
        default=Strategy.PRIORITY,
        validators=[validate_strategy],
    )
    is_active = models.BooleanField(default=True)
    description = models.CharField(max_length=300, blank=True)
    attempt_overrides = models.JSONField(
        default=dict,
        blank=True,
        help_text='This combo\'s own values for keys of the "attempts" settings, e.g. '
        '{"retriesPerTarget": 0}; the keys left out follow the global settings.',
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Check the attempt overrides against the settings' own bounds (and store them as the
        integers they stand for: 5.0 is 5)."""
        raw = {} if self.attempt_overrides is None else self.attempt_overrides
        try:
            self.attempt_overrides = attempt_overrides_validate(raw)
        except SettingsError as exc:
            messages = [
                message if key == ROOT_FIELD else f"{key}: {message}"
                for key, message in exc.errors.items()
            ]
            raise ValidationError({"attempt_overrides": messages}) from None


class ComboTarget(models.Model):
    """One step of a combo: `provider/model`, optionally pinned to a connection."""

    combo = models.ForeignKey(Combo, on_delete=models.CASCADE, related_name="targets")
    position = models.PositiveIntegerField(default=0)
    provider = models.ForeignKey("routing.Provider", on_delete=models.PROTECT, related_name="+")
    model = models.CharField(max_length=200)
    connection = models.ForeignKey(
        "routing.ProviderConnection",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
    )
    weight = models.PositiveIntegerField(default=1, validators=[MinValueValidator(0)])

    class Meta:
        ordering = ("combo_id", "position", "id")

    def __str__(self) -> str:
        return f"{self.provider_id}/{self.model}"

    def clean(self) -> None:
        if (
            self.connection_id
            and self.connection
            and self.connection.provider_id != self.provider_id
        ):
            raise ValidationError(
                {"connection": "The pinned connection belongs to another provider."}
            )
