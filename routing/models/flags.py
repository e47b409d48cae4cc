"""Feature flags: runtime overrides of settings that otherwise come from the environment."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models

from routing.domain.plan.fallback import parse_emergency_fallback


class FeatureFlag(models.Model):
    """One runtime override; while ``enabled`` its ``value`` replaces the environment's."""

    class Name(models.TextChoices):
        EMERGENCY_FALLBACK = "emergency_fallback", "Emergency fallback model"

    name = models.CharField(max_length=64, unique=True, choices=Name.choices)
    enabled = models.BooleanField(
        default=True,
        help_text="While on, the value below replaces the environment's setting; off, the "
        "environment's setting applies again.",
    )
    value = models.CharField(
        max_length=500,
        blank=True,
        help_text="For the emergency fallback: openai=provider/model,anthropic=provider/model "
        "(either part optional; empty turns the fallback off while this flag is on). It serves "
        "a request once every target has failed. Replaces OMNIROUTE_EMERGENCY_FALLBACK.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.get_name_display()

    def clean(self) -> None:
        if self.name == self.Name.EMERGENCY_FALLBACK:
            try:
                parse_emergency_fallback(self.value)
            except ValueError as error:
                raise ValidationError({"value": str(error)}) from error
