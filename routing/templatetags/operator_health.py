"""``{% health_summary %}``: the admin index's one-line health summary (see
``routing.admin.health``)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils import timezone

from routing.admin.health import health_summary as summary

register = template.Library()


@register.inclusion_tag("admin/health_summary.html")
def health_summary() -> dict[str, Any]:
    return {"figures": summary(timezone.now())}
