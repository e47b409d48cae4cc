"""Combos: one client-facing model name over ordered provider targets."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models

from omniroute.core.settings import ROOT_FIELD, SettingsError
from routing.domain.config.combo_options import ComboOptionsError, combo_options_validate
from routing.domain.config.vocabulary import Strategy
from routing.domain.plan.resolution import MAX_COMBO_DEPTH
from routing.domain.settings.overrides import attempt_overrides_validate


def validate_strategy(value: str) -> None:
    """Refuse an unknown strategy, naming the known ones."""
    known_values = {s.value for s in Strategy}
    if value not in known_values:
        known = ", ".join(sorted(known_values))
        raise ValidationError(f"Unknown strategy '{value}' (known: {known}).")


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
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text='Options of this combo\'s strategy, e.g. {"stickyRoundRobinLimit": 3}; the '
        "keys left out keep their defaults. Every strategy takes compatFilterFailOpen: when the "
        "model catalog says no target supports the tools or structured output a request asks "
        "for, try them anyway instead of refusing the request.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Check the attempt overrides against the settings' own bounds and the options against
        the strategy's keys (storing both normalised: 5.0 is 5)."""
        errors: dict[str, list[str]] = {}
        raw = {} if self.attempt_overrides is None else self.attempt_overrides
        try:
            self.attempt_overrides = attempt_overrides_validate(raw)
        except SettingsError as exc:
            errors["attempt_overrides"] = [
                message if key == ROOT_FIELD else f"{key}: {message}"
                for key, message in exc.errors.items()
            ]
        try:
            self.options = combo_options_validate(self.strategy, self.options)
        except ComboOptionsError as exc:
            errors["options"] = exc.messages()
        if errors:
            raise ValidationError(errors)


class ComboTarget(models.Model):
    """One step of a combo: `provider/model` (optionally pinned to a connection), or another
    combo whose targets stand in its place."""

    combo = models.ForeignKey(Combo, on_delete=models.CASCADE, related_name="targets")
    position = models.PositiveIntegerField(default=0)
    provider = models.ForeignKey(
        "routing.Provider", on_delete=models.PROTECT, related_name="+", null=True, blank=True
    )
    model = models.CharField(
        max_length=200,
        blank=True,
        help_text="The provider's model name; `*` and `?` make it a pattern over the models its "
        "connections declare and the model catalog lists (e.g. `gpt-4*`).",
    )
    # A referenced combo cannot be deleted while a step names it (the step would silently vanish).
    combo_ref = models.ForeignKey(
        Combo,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="referenced_by",
        verbose_name="nested combo",
        help_text="Instead of a provider and model: another combo, whose targets are tried in "
        f"this step's place with this step's weight (up to {MAX_COMBO_DEPTH} combos deep; "
        "inactive ones add nothing).",
    )
    connection = models.ForeignKey(
        "routing.ProviderConnection",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
    )
    weight = models.PositiveIntegerField(default=1, validators=[MinValueValidator(0)])
    fallback_only_on_quota_exhaustion = models.BooleanField(
        default=False,
        help_text="Tried only when the targets before it failed because their quota ran out "
        "(priority strategy).",
    )

    class Meta:
        ordering = ("combo_id", "position", "id")

    def __str__(self) -> str:
        if self.combo_ref_id is not None:
            return f"combo:{self.combo_ref_id}"
        return f"{self.provider_id}/{self.model}"

    def clean(self) -> None:
        """Exactly one of a provider (with its model) and a nested combo; never the combo
        itself; a pinned connection of the step's own provider."""
        if self.combo_ref_id is not None:
            self._clean_reference()
        elif self.provider_id is None:
            raise ValidationError("A target names a provider and model, or a nested combo.")
        elif not self.model:
            raise ValidationError({"model": "A provider's target needs its model."})
        elif self.connection is not None and self.connection.provider_id != self.provider_id:
            raise ValidationError(
                {"connection": "The pinned connection belongs to another provider."}
            )

    def _clean_reference(self) -> None:
        if self.provider_id is not None or self.model or self.connection_id is not None:
            raise ValidationError(
                {
                    "combo_ref": "A nested combo stands alone: leave provider, model and "
                    "connection empty."
                }
            )
        if self.combo_ref_id == self.combo_id:
            raise ValidationError({"combo_ref": "A combo cannot contain itself."})
