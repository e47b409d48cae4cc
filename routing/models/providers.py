"""Providers (the catalog) and provider connections (one account or key each)."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

import httpx
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, URLValidator
from django.db import models
from django.utils.deconstruct import deconstructible

from omniroute.core.bounds import has_unstorable_text
from routing.crypto import decrypt_secret, encrypt_secret, mask_secret
from routing.domain.config.vocabulary import AuthType, ProviderCategory, TestStatus, WireFormat
from routing.domain.quota.rate_limits import check_overrides


@deconstructible
class UpstreamUrl(URLValidator):
    """An upstream's or an outbound proxy's URL, as the upstream client will use it.

    URLField alone accepts what every attempt would then fail on inside the gateway, counted
    against the provider: another scheme (``ftp://``), a host the client cannot encode (not a
    valid international name), a port outside 1..65535. A ``base`` URL (the endpoint's path is
    appended to it) also takes no query or fragment: the path would land inside them.
    """

    def __init__(self, *, base: bool = False) -> None:
        super().__init__(schemes=["http", "https"], message="Enter an http:// or https:// URL.")
        self.base = base

    def __call__(self, value: Any) -> None:
        super().__call__(value)
        try:
            url = httpx.URL(value)
        except httpx.InvalidURL:
            raise ValidationError(
                "The gateway's HTTP client cannot use this URL (its host or a character).",
                code="invalid",
            ) from None
        if url.port is not None and not 1 <= url.port <= 65_535:
            raise ValidationError("A port is 1 to 65535.", code="invalid")
        if self.base and (url.query or url.fragment):
            raise ValidationError(
                "A base URL takes no query or fragment: each endpoint's path is appended to it.",
                code="invalid",
            )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UpstreamUrl) and self.base == other.base and super().__eq__(other)


def _json_storable(value: Any) -> bool:
    """Whether parsed JSON ``value`` holds no NaN or infinity (a 1e400 in a request body)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_json_storable(item) for item in value.values())
    if isinstance(value, list):
        return all(_json_storable(item) for item in value)
    return True


def _choices(enum: type[StrEnum]) -> list[tuple[str, str]]:
    return [(member.value, member.value) for member in enum]


class Provider(models.Model):
    """An upstream LLM service; its quirks are data (flags), not code."""

    slug = models.SlugField(max_length=64, primary_key=True, help_text="Used as `slug/model`.")
    name = models.CharField(max_length=120)
    category = models.CharField(max_length=16, choices=_choices(ProviderCategory))
    base_url = models.URLField(
        max_length=500, validators=[UpstreamUrl(base=True)], help_text="Default base URL, e.g. …/v1"
    )
    wire_format = models.CharField(
        max_length=16, choices=_choices(WireFormat), default=WireFormat.OPENAI
    )
    full_text_rules = models.BooleanField(default=False)
    honors_rule_scope = models.BooleanField(default=False)
    egress_bucketed_lock = models.BooleanField(default=False)
    per_model_quota = models.BooleanField(default=True)
    max_concurrent = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Requests in flight at once over all of this provider's connections; empty "
        "for no cap.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("slug",)

    def __str__(self) -> str:
        return self.slug


class ProviderConnection(models.Model):
    """One account or API key at a provider, with its durable cooldown and error state."""

    provider = models.ForeignKey(Provider, on_delete=models.PROTECT, related_name="connections")
    name = models.CharField(max_length=120)
    priority = models.IntegerField(default=100, help_text="Lower is tried first.")
    is_active = models.BooleanField(default=True)
    auth_type = models.CharField(
        max_length=16, choices=_choices(AuthType), default=AuthType.API_KEY
    )
    base_url = models.URLField(
        max_length=500,
        blank=True,
        validators=[UpstreamUrl(base=True)],
        help_text="Overrides the provider's.",
    )
    secret_encrypted = models.TextField(blank=True, editable=False)
    refresh_secret_encrypted = models.TextField(blank=True, editable=False)
    served_models = models.JSONField(
        default=list, blank=True, help_text="Models this connection serves; empty serves any."
    )
    max_concurrent = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)]
    )
    rate_limit_protection = models.BooleanField(
        default=False,
        help_text="Send this connection's requests through the local request queue (rate, "
        "spacing and concurrency from the requestQueue settings and the overrides below).",
    )
    rate_limit_overrides = models.JSONField(
        default=dict,
        blank=True,
        help_text="Per-connection limits: rpm, minTime, maxConcurrent, maxWaitMs (0 = the "
        "settings' value) and modelConcurrency {model: cap 1..10000}.",
    )
    rate_limited_until = models.DateTimeField(null=True, blank=True)
    test_status = models.CharField(
        max_length=24, choices=_choices(TestStatus), default=TestStatus.ACTIVE
    )
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    last_error_type = models.CharField(max_length=64, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    backoff_level = models.PositiveIntegerField(default=0)
    expired_retry_count = models.PositiveIntegerField(
        default=0, help_text="Failed re-checks of an expired OAuth connection."
    )
    expired_retry_at = models.DateTimeField(
        null=True, blank=True, help_text="When the next expired re-check is due."
    )
    disable_cooling = models.BooleanField(default=False)
    proxy_url = models.URLField(
        max_length=500,
        blank=True,
        validators=[UpstreamUrl()],
        help_text="Outbound proxy for this connection's upstream requests; its egress identity.",
    )
    extras = models.JSONField(default=dict, blank=True, help_text="Per-connection settings.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("provider_id", "priority", "id")
        constraints = [
            models.UniqueConstraint(fields=("provider", "name"), name="uniq_connection_name")
        ]

    def __str__(self) -> str:
        return f"{self.provider_id}/{self.name}"

    def clean(self) -> None:
        super().clean()
        problems = check_overrides(self.rate_limit_overrides)
        if problems:
            raise ValidationError({"rate_limit_overrides": problems})
        if not _json_storable(self.extras):  # the database's JSON check would refuse it
            raise ValidationError({"extras": "Holds a number JSON cannot store (NaN or infinity)."})
        if has_unstorable_text(self.extras):  # stored, no read of the row could encode it
            raise ValidationError(
                {"extras": "Holds text a JSON column cannot keep (a NUL or a lone surrogate)."}
            )

    def set_secret(self, plaintext: str) -> None:
        """Store ``plaintext`` encrypted; an empty string clears it."""
        self.secret_encrypted = encrypt_secret(plaintext) if plaintext else ""

    def set_refresh_secret(self, plaintext: str) -> None:
        """Store an OAuth refresh token encrypted; an empty string clears it."""
        self.refresh_secret_encrypted = encrypt_secret(plaintext) if plaintext else ""

    def get_secret(self) -> str | None:
        """The decrypted secret, for the upstream request only."""
        return decrypt_secret(self.secret_encrypted)

    @property
    def has_secret(self) -> bool:
        return bool(self.secret_encrypted)

    @property
    def masked_secret(self) -> str:
        return mask_secret(self.get_secret()) if self.has_secret else ""

    @property
    def effective_base_url(self) -> str:
        return (self.base_url or self.provider.base_url).rstrip("/")
