"""The model catalog: what the gateway knows of one model at one provider."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from routing.domain.config.vocabulary import Prefill

# The bounds of the global `attempts.timeToFirstTokenMs` and `attempts.streamIdleMs` settings,
# which a catalog entry overrides for its model.
TIMEOUT_OVERRIDE_MIN_MS = 1_000
TIMEOUT_OVERRIDE_MAX_MS = 600_000


def _timeout_validators() -> list[MinValueValidator | MaxValueValidator]:
    return [MinValueValidator(TIMEOUT_OVERRIDE_MIN_MS), MaxValueValidator(TIMEOUT_OVERRIDE_MAX_MS)]


def _price_field(direction: str) -> models.DecimalField[Decimal | None, Decimal | None]:
    return models.DecimalField(
        max_digits=10,
        decimal_places=4,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text=f"List price in USD per million {direction} tokens; empty if unknown.",
    )


class ModelCatalogEntry(models.Model):
    """One model at one provider: its context window, capabilities, prefill support, time limits
    and prices."""

    # A catalog entry only describes its provider's model: it goes with the provider, and never
    # keeps an operator from deleting one (the seeded entries would otherwise block every
    # seeded provider).
    provider = models.ForeignKey(
        "routing.Provider", on_delete=models.CASCADE, related_name="catalog_entries"
    )
    model = models.CharField(
        max_length=200, help_text="The model name as the provider knows it (after `provider/`)."
    )
    context_window = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Tokens; empty if unknown. A request whose estimated prompt plus requested "
        "output exceeds it skips this model.",
    )
    accepts_prefill = models.CharField(
        max_length=8,
        choices=[(p.value, p.value) for p in Prefill],
        default=Prefill.UNKNOWN,
        help_text="Whether the model continues a partial assistant message. On 'yes' a stream "
        "cut after it started is completed by continuing it; on 'no' or 'unknown' the answer is "
        "regenerated and spliced where the client's copy stopped.",
    )
    time_to_first_token_ms = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=_timeout_validators(),
        help_text="Overrides the time-to-first-token limit (attempts.timeToFirstTokenMs) for "
        "this model: reasoning models start late. Empty follows the settings.",
    )
    stream_idle_ms = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=_timeout_validators(),
        help_text="Overrides the idle limit between stream chunks (attempts.streamIdleMs) for "
        "this model. Empty follows the settings.",
    )
    hedge_after_ms = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(TIMEOUT_OVERRIDE_MAX_MS)],
        help_text="How long a stream of this model waits for its first token before the next "
        "target starts beside it, until the model has a learned first-token time "
        "(attempts.hedgeAfterMs for this model); 0 never hedges it. Empty follows the combo or "
        "the settings.",
    )
    supports_tools = models.BooleanField(
        null=True,
        blank=True,
        default=None,
        help_text="Whether the model can call tools. On 'no', requests that let the model call "
        "tools skip it; empty if unknown (it is tried).",
    )
    supports_structured_output = models.BooleanField(
        null=True,
        blank=True,
        default=None,
        help_text="Whether the model answers to a JSON schema or in JSON mode. On 'no', requests "
        "asking for structured output skip it; empty if unknown (it is tried).",
    )
    input_price_per_mtok = _price_field("input")
    output_price_per_mtok = _price_field("output")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("provider_id", "model")
        verbose_name = "model catalog entry"
        verbose_name_plural = "model catalog"
        constraints = [
            models.UniqueConstraint(fields=("provider", "model"), name="uniq_catalog_model")
        ]

    def __str__(self) -> str:
        return f"{self.provider_id}/{self.model}"
