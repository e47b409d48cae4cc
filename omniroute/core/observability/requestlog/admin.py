"""Admin of the request log: read-only. The list finds a request (by its
``X-OmniRoute-Request-Id``, key, model, provider, status or time); its page tells what the
gateway did, the decision trail drawn as a timeline; ``request/<request id>/`` leads to a
request's page by its id (the dashboard's events link there). Rows come only from the proxy,
through the log's background writer."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from omniroute.core.admin import BoundedAdmin, Tone, moment, state_badge
from omniroute.core.observability.requestlog.models import RequestLogEntry

ID_SHOWN_CHARS = 12  # enough to tell requests apart; the page and the search take the whole id
# A filter offers the values of the most recent rows only: clients may name any number of
# distinct models, and the log holds up to OMNIROUTE_REQUEST_LOG_MAX_ROWS rows.
RECENT_ROWS = 1000
MAX_CHOICES = 30
STEP_TONES = {"success": Tone.OK, "skipped": Tone.QUIET}


def status_tone(status: int) -> str:
    """A status's badge colour: served, refused by the gateway or the client, or failed."""
    if status < 400:
        return Tone.OK
    return Tone.WARN if status < 500 and status != 499 else Tone.BAD


class RecentValuesFilter(admin.SimpleListFilter):
    """Filter by one column's value, offering those of the most recent rows (a bounded query
    and a short sidebar); any value still filters when given in the URL."""

    field = ""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        recent = RequestLogEntry.objects.order_by("-id").values_list(self.field, flat=True)
        values = sorted({value for value in recent[:RECENT_ROWS] if value})
        return [(value, value) for value in values[:MAX_CHOICES]]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(**{self.field: value}) if value else queryset


class ProviderFilter(RecentValuesFilter):
    title = parameter_name = field = "provider"


class KeyFilter(RecentValuesFilter):
    title, parameter_name, field = "key", "key", "key_name"


class ModelFilter(RecentValuesFilter):
    title = parameter_name = field = "model"


@admin.register(RequestLogEntry)
class RequestLogEntryAdmin(BoundedAdmin):
    """Finished /v1 requests, newest first; nothing to add, change or delete here."""

    # Six columns: the list fits a 1 280-pixel screen (the page has the rest).
    list_display = ("request", "when", "key_name", "model", "answered_by", "status_badge")
    list_filter = ("status", ProviderFilter, KeyFilter, ModelFilter, "started_at")
    search_fields = ("=request_id",)
    date_hierarchy = "started_at"
    show_full_result_count = False  # a count of a large log on every page is a full scan
    fieldsets = (
        (None, {"fields": ("request_id", "started_at", "key", "endpoint", "model")}),
        (
            "Answer",
            {
                "fields": (
                    "answered_by",
                    "status_badge",
                    "error_code",
                    "latency_ms",
                    "time_to_first_token_ms",
                    "tokens_in",
                    "tokens_out",
                    "attempts",
                )
            },
        ),
        ("Decision trail", {"fields": ("timeline",)}),
    )
    readonly_fields = (
        "request_id",
        "started_at",
        "key",
        "endpoint",
        "model",
        "answered_by",
        "status_badge",
        "error_code",
        "latency_ms",
        "time_to_first_token_ms",
        "tokens_in",
        "tokens_out",
        "attempts",
        "timeline",
    )

    def get_urls(self) -> list[URLPattern]:
        by_id = self.admin_site.admin_view(self.by_request_id_view)
        name = f"{self.opts.app_label}_{self.opts.model_name}_by_request_id"
        return [path("request/<str:request_id>/", by_id, name=name), *super().get_urls()]

    def by_request_id_view(self, request: HttpRequest, request_id: str) -> HttpResponseRedirect:
        """To the page of the request with this ``X-OmniRoute-Request-Id``; to the list
        searched for it, with a warning, while it has no row (not written yet, pruned, or
        not logged)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        found = RequestLogEntry.objects.filter(request_id=request_id).values_list("pk", flat=True)
        pk = found.first()
        if pk is not None:
            return HttpResponseRedirect(
                reverse("admin:requestlog_requestlogentry_change", args=[pk])
            )
        self.message_user(
            request,
            f"Request {request_id} is not in the request log: not written yet, pruned, or not "
            "logged.",
            messages.WARNING,
        )
        search = urlencode({"q": request_id})
        return HttpResponseRedirect(
            f"{reverse('admin:requestlog_requestlogentry_changelist')}?{search}"
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # retention prunes the log (docs/operating.md, "Request log")

    @admin.display(description="request", ordering="request_id")
    def request(self, entry: RequestLogEntry) -> str:
        return entry.request_id[:ID_SHOWN_CHARS]

    @admin.display(description="time", ordering="started_at")
    def when(self, entry: RequestLogEntry) -> str:
        return moment(entry.started_at)

    @admin.display(description="key")
    def key(self, entry: RequestLogEntry) -> str:
        return f"{entry.key_name} ({entry.key_prefix})" if entry.key_prefix else "—"

    @admin.display(description="answered by", ordering="provider")
    def answered_by(self, entry: RequestLogEntry) -> str:
        if not entry.provider:
            return "—"
        return f"{entry.provider}/{entry.target_model} @ {entry.connection_name or '?'}"

    @admin.display(description="status", ordering="status")
    def status_badge(self, entry: RequestLogEntry) -> SafeString:
        return state_badge(str(entry.status), status_tone(entry.status), entry.error_code)

    @admin.display(description="timeline")
    def timeline(self, entry: RequestLogEntry) -> SafeString:
        """Every target considered, in order: tried with its outcome, or skipped and why."""
        if not entry.trail:
            return format_html("<p>{}</p>", "No target was considered.")
        items = format_html_join("", "<li>{} {} {}</li>", (_step(s) for s in entry.trail))
        return format_html('<ol class="request-trail">{}</ol>', items)


def _step(step: dict[str, Any]) -> tuple[SafeString, str, str]:
    """One trail step as a timeline item: its badge, its target and what happened."""
    skipped = step.get("kind") == "skipped"
    outcome = str(step.get("outcome", ""))
    tone = STEP_TONES["skipped"] if skipped else STEP_TONES.get(outcome, Tone.BAD)
    badge = state_badge("skipped" if skipped else "tried", tone)
    target = f"{step.get('target', '?')} @ connection {step.get('connection_id', '?')}"
    said = [outcome]
    if step.get("status"):
        said.append(f"HTTP {step['status']}")
    if step.get("latency_ms"):
        said.append(f"{step['latency_ms']} ms")
    if step.get("detail"):
        said.append(str(step["detail"]))
    return badge, target, "— " + ", ".join(said)
