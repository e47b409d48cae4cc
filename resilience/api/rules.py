"""``/api/error-rules/`` and ``/api/restatement-rules/``: the rules the admin edits.

Operator rules are listed, created, updated and deleted; every rule is enabled or disabled
with ``POST …/<id>/enable/`` and ``…/disable/``. A built-in rule (the seeded catalog) is read
and enabled or disabled like any other, but as in the admin nothing else of it changes: an
update touching another field, or a delete, answers 403. Every write goes through
``resilience.services.rules``, the admin's write path.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from omniroute.core.listing import ConfigListMixin
from resilience.models.rules import (
    BUILTIN_EDITABLE_FIELDS,
    ProviderErrorRule,
    StatusRestatementRule,
)
from resilience.services.rules import (
    error_rule_delete,
    error_rule_save,
    restatement_rule_delete,
    restatement_rule_save,
    rule_set_enabled,
)

Rule = TypeVar("Rule", ProviderErrorRule, StatusRestatementRule)
BUILTIN_FROZEN = "{rule} is built in: it can only be enabled or disabled, not {verb}."
RULE_FIELDS = ("id", "provider", "rule_id", "position", "is_enabled", "is_builtin")


class ProviderErrorRuleSerializer(serializers.ModelSerializer[ProviderErrorRule]):
    """A provider error rule: what it matches and what it makes of the error."""

    class Meta:
        model = ProviderErrorRule
        fields = (
            *RULE_FIELDS,
            "status",
            "match",
            "header_name",
            "header_match",
            "header_value",
            "scope",
            "reason",
            "cooldown_ms",
            "parse_reset_countdown",
        )
        read_only_fields = ("is_builtin",)


class StatusRestatementRuleSerializer(serializers.ModelSerializer[StatusRestatementRule]):
    """A status restatement rule: which statuses, with which markers, become which status."""

    from_statuses = serializers.ListField(child=serializers.IntegerField(), allow_empty=False)
    text_markers = serializers.ListField(child=serializers.CharField(), allow_empty=False)
    exclude_markers = serializers.ListField(child=serializers.CharField(), required=False)

    class Meta:
        model = StatusRestatementRule
        fields = (
            *RULE_FIELDS,
            "from_statuses",
            "to_status",
            "text_markers",
            "exclude_markers",
            "default_retry_after_ms",
        )
        read_only_fields = ("is_builtin",)


RULE_FILTERS = {
    "provider": "provider",
    "is_builtin": "is_builtin",
    "is_enabled": "is_enabled",
}


class _RuleViewSet(ConfigListMixin, viewsets.ModelViewSet[Rule], Generic[Rule]):
    """Shared by both kinds: built-in rows frozen but for ``is_enabled``, enable/disable."""

    def _save(self, rule: Rule, fields: dict[str, Any]) -> Rule:
        raise NotImplementedError

    def _delete(self, rule: Rule) -> None:
        raise NotImplementedError

    def perform_create(self, serializer: BaseSerializer[Rule]) -> None:
        rule = self.get_queryset().model()
        serializer.instance = self._save(rule, dict(serializer.validated_data))

    def perform_update(self, serializer: BaseSerializer[Rule]) -> None:
        rule = serializer.instance
        assert rule is not None
        fields = dict(serializer.validated_data)
        if rule.is_builtin:
            _refuse_builtin_changes(rule, fields)
        self._save(rule, fields)

    def perform_destroy(self, instance: Rule) -> None:
        if instance.is_builtin:
            raise exceptions.PermissionDenied(BUILTIN_FROZEN.format(rule=instance, verb="deleted"))
        self._delete(instance)

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def enable(self, request: Request, pk: str | None = None) -> Response:
        """Turn the rule on (built-in rules too)."""
        rule = rule_set_enabled(rule=self.get_object(), enabled=True)
        return Response(self.get_serializer(rule).data)

    @extend_schema(request=None)
    @action(detail=True, methods=["post"])
    def disable(self, request: Request, pk: str | None = None) -> Response:
        """Turn the rule off (built-in rules too): the classifier skips it."""
        rule = rule_set_enabled(rule=self.get_object(), enabled=False)
        return Response(self.get_serializer(rule).data)


def _refuse_builtin_changes(rule: Rule, fields: dict[str, Any]) -> None:
    changed = sorted(
        name
        for name, value in fields.items()
        if name not in BUILTIN_EDITABLE_FIELDS and getattr(rule, name) != value
    )
    if changed:
        verb = f"edited (changed: {', '.join(changed)})"
        raise exceptions.PermissionDenied(BUILTIN_FROZEN.format(rule=rule, verb=verb))


FORBIDDEN = {403: OpenApiResponse(description="A built-in rule: only enable/disable it.")}


@extend_schema(tags=["rules"])
class ProviderErrorRuleViewSet(_RuleViewSet[ProviderErrorRule]):
    """Provider error rules; operator rules are tried before the built-in catalog."""

    queryset = ProviderErrorRule.objects.order_by("provider", "is_builtin", "position", "id")
    serializer_class = ProviderErrorRuleSerializer
    filter_fields = {**RULE_FILTERS, "scope": "scope", "reason": "reason"}
    search_fields = ("provider", "rule_id", "match", "header_name")

    def _save(self, rule: ProviderErrorRule, fields: dict[str, Any]) -> ProviderErrorRule:
        return error_rule_save(rule=rule, fields=fields)

    def _delete(self, rule: ProviderErrorRule) -> None:
        error_rule_delete(rule=rule)

    @extend_schema(responses={200: ProviderErrorRuleSerializer, **FORBIDDEN})
    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().update(request, *args, **kwargs)

    @extend_schema(responses={200: ProviderErrorRuleSerializer, **FORBIDDEN})
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().partial_update(request, *args, **kwargs)

    @extend_schema(responses={204: None, **FORBIDDEN})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().destroy(request, *args, **kwargs)


@extend_schema(tags=["rules"])
class StatusRestatementRuleViewSet(_RuleViewSet[StatusRestatementRule]):
    """Status restatement rules: a misstated upstream status becomes the real one."""

    queryset = StatusRestatementRule.objects.order_by("provider", "position", "id")
    serializer_class = StatusRestatementRuleSerializer
    filter_fields = RULE_FILTERS
    search_fields = ("provider", "rule_id")

    def _save(self, rule: StatusRestatementRule, fields: dict[str, Any]) -> StatusRestatementRule:
        return restatement_rule_save(rule=rule, fields=fields)

    def _delete(self, rule: StatusRestatementRule) -> None:
        restatement_rule_delete(rule=rule)

    @extend_schema(responses={200: StatusRestatementRuleSerializer, **FORBIDDEN})
    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().update(request, *args, **kwargs)

    @extend_schema(responses={200: StatusRestatementRuleSerializer, **FORBIDDEN})
    def partial_update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().partial_update(request, *args, **kwargs)

    @extend_schema(responses={204: None, **FORBIDDEN})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().destroy(request, *args, **kwargs)
