"""The management API's JSON parser: DRF's, with a bound on nesting.

DRF's own parser recurses once per level and fails with ``RecursionError`` (a 500) near a
thousand; this one answers any body nested deeper than ``MAX_JSON_DEPTH`` levels with a 400
in the API's error shape, as the /v1 proxy does (docs/configuration.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from omniroute.core.bounds import nesting_exceeds


class BoundedJSONParser(JSONParser):
    """JSON, nested at most ``settings.MAX_JSON_DEPTH`` levels deep."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = settings.MAX_JSON_DEPTH
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(f"The request body nests deeper than {limit} levels.") from exc
        if nesting_exceeds(data, limit):
            raise ParseError(f"The request body nests deeper than {limit} levels.")
        return data
