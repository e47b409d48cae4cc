"""``GET/PUT /api/config``: the whole configuration as one document (configuration as code).

GET answers what ``manage.py exportconfig`` writes, as JSON, or as YAML for
``Accept: application/yaml``. PUT applies a document (JSON, or YAML sent as
``application/yaml``, whose errors then name their line) the way ``manage.py importconfig``
does, with ``?dry_run=true`` and ``?prune=true``. A secret reference is refused here: the API
takes a connection's secret only as its value, write-only (docs/configuration.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.http import Http404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from omniroute.core.parsers import BoundedJSONParser
from routing.config_document.applying import config_import
from routing.config_document.errors import ConfigError
from routing.config_document.located import dump_yaml
from routing.config_document.reading import document_export
from routing.config_document.texts import document_from_data, document_from_yaml

YAML_MEDIA_TYPE = "application/yaml"
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


class YamlRenderer(BaseRenderer):
    """The document as YAML, for ``Accept: application/yaml``."""

    media_type = YAML_MEDIA_TYPE
    format = "yaml"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> bytes:
        return dump_yaml(data).encode()


class FormatOrJson(DefaultContentNegotiation):
    """``?format=json|yaml`` or the Accept header; an unknown ``?format=`` answers JSON (DRF
    would make it a 404, as if the document did not exist)."""

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        choices = list(renderers)
        try:
            return super().select_renderer(request, choices, format_suffix)
        except Http404:
            return choices[0], choices[0].media_type


class YamlTextParser(BaseParser):
    """A YAML body kept as text: the view reads it with its lines, for located errors."""

    media_type = YAML_MEDIA_TYPE

    def parse(  # type: ignore[override]  # the text itself: the view reads its lines
        self, stream: Any, media_type: Any = None, parser_context: Any = None
    ) -> str:
        try:
            return bytes(stream.read()).decode("utf-8")
        except UnicodeDecodeError as error:
            raise exceptions.ParseError("The YAML body is not UTF-8.") from error


class ConfigAppliedSerializer(serializers.Serializer[Any]):
    """What a PUT changed (or, on a dry run, would change): one line per object."""

    changes = serializers.ListField(
        child=serializers.CharField(),
        help_text="`+ section key` created, `~ section key: fields` updated, `- section key` "
        "removed; empty when the configuration already matched.",
    )
    dry_run = serializers.BooleanField(help_text="True when nothing was changed.")


def _flag(request: Request, name: str) -> bool:
    return str(request.query_params.get(name, "")).lower() in TRUE_WORDS


def _invalid(error: ConfigError) -> exceptions.ValidationError:
    fields: dict[str, list[str]] = {}
    for problem in error.problems:
        where = f"line {problem.line}: " if problem.line is not None else ""
        fields.setdefault(problem.path or "document", []).append(where + problem.message)
    return exceptions.ValidationError(fields)


class ConfigApi(APIView):
    """The configuration document: GET exports it, PUT applies one."""

    parser_classes = [BoundedJSONParser, YamlTextParser]
    renderer_classes = [JSONRenderer, YamlRenderer]
    content_negotiation_class = FormatOrJson

    def handle_exception(self, exc: Exception) -> Response:
        """Errors answer in the API's one error shape, as JSON, whatever format was asked."""
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return super().handle_exception(exc)

    @extend_schema(
        summary="The whole configuration as one document",
        description="Providers, connections, model catalog, combos, client keys (their stored "
        "hashes), operator rules, switched-off built-in rules, feature flags and the stored "
        "settings; sorted by natural keys, without ids, timestamps or secrets (each secret "
        "is a ${ENV:OMNIROUTE_PROVIDER_SECRET_...} reference).",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request) -> Response:
        return Response(document_export())

    @extend_schema(
        summary="Apply a configuration document",
        description="Creates and updates what differs, in one transaction; sections the "
        "document leaves out are left alone. Secret references are refused: give a "
        "connection's secret as its value (write-only), or leave it out to keep the stored one.",
        parameters=[
            OpenApiParameter("dry_run", bool, description="Report the changes; make none."),
            OpenApiParameter(
                "prune", bool, description="Also remove what a given section no longer lists."
            ),
        ],
        request={"application/json": OpenApiTypes.OBJECT, YAML_MEDIA_TYPE: OpenApiTypes.STR},
        responses={200: ConfigAppliedSerializer},
    )
    def put(self, request: Request) -> Response:
        dry_run = _flag(request, "dry_run")
        try:
            if isinstance(request.data, str):
                document, lines = document_from_yaml(request.data)
            else:
                document, lines = document_from_data(request.data)
            plan = config_import(
                document,
                lines=lines,
                environment=None,
                prune=_flag(request, "prune"),
                dry_run=dry_run,
                now=timezone.now(),
            )
        except ConfigError as error:
            raise _invalid(error) from error
        return Response({"changes": plan.lines(), "dry_run": dry_run})
