"""The dashboard page: the admin's look, the first snapshot inline, then the WebSocket."""

from __future__ import annotations

from asgiref.sync import async_to_sync, sync_to_async
from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse

from omniroute.dashboard.snapshot import dashboard_snapshot

__all__ = ["dashboard"]


def dashboard(request: HttpRequest) -> TemplateResponse:
    context = {
        **admin.site.each_context(request),
        "title": "Live dashboard",
        "snapshot": async_to_sync(dashboard_snapshot)(db=sync_to_async),
    }
    return TemplateResponse(request, "admin/dashboard.html", context)
