"""Lists of the management API: pages, filters and search, the same for every app.

Configuration collections (providers, connections, rules, pins...) answer DRF's paginated
envelope ``{"count", "next", "previous", "results"}``: ``?limit=`` (at most
:data:`MAX_PAGE_SIZE`) and ``?offset=``, filtered by the fields their admin list filters on
(``?provider=mock&is_enabled=false``) and searched with ``?search=`` over the admin's search
fields. Collections whose shape the gateway's reference fixes (``{"items"}``,
``{"exclusiveSessions"}``) keep that envelope and take the same ``limit`` and ``offset``
beside a ``total`` (:func:`page_of`). docs/operating.md, "The management API".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from django.db.models import Field, Model, QuerySet
from rest_framework import exceptions
from rest_framework.filters import BaseFilterBackend, SearchFilter
from rest_framework.pagination import BasePagination, LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.views import APIView

if TYPE_CHECKING:
    from rest_framework.generics import BaseFilterProtocol

MAX_ROW_ID = 2**63 - 1  # the largest id a database column holds: a larger one matches nothing
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
# Longer than any name or id a list holds. SQLite refuses a LIKE pattern over 50 000 bytes,
# and that refusal read as the database being down (a 503 inviting retries).
MAX_SEARCH_CHARS = 1000
TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
FALSE_WORDS = frozenset({"false", "0", "no", "off"})

T = TypeVar("T")
M = TypeVar("M", bound=Model)
R = TypeVar("R")


class ConfigPagination(LimitOffsetPagination):
    """``limit``/``offset`` pages of a configuration collection, ``count`` being the total."""

    default_limit = DEFAULT_PAGE_SIZE
    max_limit = MAX_PAGE_SIZE


def _boolean(name: str, raw: str) -> bool:
    word = raw.strip().lower()
    if word in TRUE_WORDS | FALSE_WORDS:
        return word in TRUE_WORDS
    raise exceptions.ValidationError({name: [f"{raw!r} is not true or false."]})


class FieldFilter(BaseFilterBackend):
    """Exact filters named by the view's ``filter_fields``: query parameter → model lookup.

    A lookup ending in ``__isnull`` or naming a boolean field takes ``true``/``false``; a
    leading ``-`` inverts it (``{"revoked": "-revoked_at__isnull"}``: ``revoked=true`` lists
    the rows that have a revocation time). A value the field cannot hold is a 400, never a 500.
    """

    def filter_queryset(
        self, request: Request, queryset: QuerySet[M, R], view: APIView
    ) -> QuerySet[M, R]:
        for name, spec in getattr(view, "filter_fields", {}).items():
            raw = request.query_params.get(name)
            if raw is None or raw == "":
                continue
            lookup = spec.removeprefix("-")
            value: Any = raw
            if _takes_boolean(queryset, lookup):
                value = _boolean(name, raw) != spec.startswith("-")
            queryset = _filtered(queryset, name, lookup, value)
        return queryset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        model = view.get_queryset().model
        return [
            {
                "name": name,
                "required": False,
                "in": "query",
                "description": f"Only the rows whose {name.replace('_', ' ')} is this value.",
                "schema": {
                    "type": "boolean"
                    if _takes_boolean(model.objects.none(), lookup.removeprefix("-"))
                    else "string"
                },
            }
            for name, lookup in getattr(view, "filter_fields", {}).items()
        ]


def _takes_boolean(queryset: QuerySet[Any, Any], lookup: str) -> bool:
    if lookup.endswith("__isnull"):
        return True
    field = queryset.model._meta.get_field(lookup.split("__")[0])
    return field.get_internal_type() == "BooleanField"


def _filtered(queryset: QuerySet[M, R], name: str, lookup: str, value: Any) -> QuerySet[M, R]:
    try:
        field = queryset.model._meta.get_field(lookup.split("__")[0])
        if isinstance(field, Field) and not isinstance(value, bool) and "__" not in lookup:
            field.to_python(value)  # a number field given text is the caller's error
    except Exception as error:
        raise exceptions.ValidationError({name: [f"{value!r} is not a valid value."]}) from error
    return queryset.filter(**{lookup: value})


class BoundedSearchFilter(SearchFilter):
    """DRF's ``?search=``, refusing a term of over :data:`MAX_SEARCH_CHARS` characters (400)."""

    def get_search_terms(self, request: Request) -> list[str]:
        raw = request.query_params.get(self.search_param, "")
        if len(raw) > MAX_SEARCH_CHARS:
            message = f"At most {MAX_SEARCH_CHARS} characters."
            raise exceptions.ValidationError({self.search_param: [message]})
        return list(super().get_search_terms(request))


CONFIG_LIST_BACKENDS: list[type[BaseFilterBackend]] = [FieldFilter, BoundedSearchFilter]


class ConfigListMixin:
    """Pages, filters and ``?search=`` for a configuration viewset.

    The view names its ``filter_fields`` and ``search_fields`` after its admin's list filters
    and search fields; its queryset's ordering ends on a unique column, so pages are stable.
    """

    pagination_class: type[BasePagination] | None = ConfigPagination
    filter_backends: Sequence[type[BaseFilterBackend | BaseFilterProtocol[Any]]] = (
        CONFIG_LIST_BACKENDS
    )
    filter_fields: dict[str, str] = {}
    search_fields: Sequence[str] = ()


def _bound(request: Request, name: str, default: int, maximum: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise exceptions.ValidationError({name: ["A whole number."]}) from None
    if value < 0:
        raise exceptions.ValidationError({name: ["Zero or more."]})
    return min(value, maximum)


def page_of(request: Request, items: Sequence[T]) -> tuple[list[T], int]:
    """The ``limit``/``offset`` window of ``items`` the request asks for, and their total.

    For the collections whose envelope the reference fixes: without ``limit`` every item
    comes back (as before pagination existed), at most :data:`MAX_PAGE_SIZE` with it.
    """
    offset = _bound(request, "offset", 0, len(items))
    limit = _bound(request, "limit", len(items), MAX_PAGE_SIZE)
    if request.query_params.get("limit") in (None, ""):
        return list(items[offset:]), len(items)
    return list(items[offset : offset + limit]), len(items)
