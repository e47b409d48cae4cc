"""The management API's JSON parser: DRF's, with a bound on nesting, refusing lone surrogates.

DRF's own parser recurses once per level and fails with ``RecursionError`` (a 500) near a
thousand; this one answers any body nested deeper than ``MAX_JSON_DEPTH`` levels with a 400
in the API's error shape, as the /v1 proxy does (docs/configuration.md). A string holding a
lone surrogate (JSON's ``"\\ud800"`` escape) is refused as well: no answer can repeat it and no
row that stored it could be read back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from omniroute.core.bounds import has_lone_surrogate, nesting_exceeds


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
        if has_lone_surrogate(data):  # no answer could repeat it, no row could be read back
            raise ParseError("A string in the request body holds a lone surrogate (U+D800-U+DFFF).")
        return data
