"""The OpenAPI schema's postprocessing hooks: the management API's error answers, the ``/v1``
client APIs, and every operation's area (its tag) and summary.

``document_errors``: every view answers errors through ``routing.api.errors`` (the lease API
through its own handler, in the same shape), so the schema documents them once, here, instead
of on each view: 400 where an operation reads a body, a query or a text path value (PostgreSQL
refuses a NUL character even in a lookup), 401 and 403 where it needs credentials, 404 where
its path names an object. A status a view documents itself keeps its description; the error
body schema is filled in where it gave none.

``describe_client_apis``: the ``/v1`` routes are Channels consumers, which drf-spectacular does
not see; each client API ``routing.domain.client.endpoints.CLIENT_APIS`` declares is described
from its declaration (request fields, answer, error shape), with the model list beside them,
their ``X-OmniRoute-*`` headers and the client key's two forms of credentials.

``tag_by_area``: one tag per operation, its area (clients, configuration, resilience, leases,
operations), which Swagger UI groups by; and a summary for every operation.
"""

from __future__ import annotations

import re
from typing import Any

from routing.domain.client.descriptions import (
    ERROR_SCHEMAS,
    MODEL,
    MODEL_LIST,
    ApiDescription,
    ErrorShape,
)
from routing.domain.client.endpoints import CLIENT_APIS, Endpoint

ERROR_COMPONENT = "Error"
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An OpenAI-style error.",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "code": {"type": "string"},
                "fields": {"type": "object", "description": "The invalid fields, by name."},
            },
        }
    },
}
DESCRIPTIONS = {
    400: "Invalid input (``fields`` names what is wrong).",
    401: "No credentials, or a key that is invalid, revoked or expired.",
    403: "Credentials without the scope this operation needs.",
    404: "No such object.",
}
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def document_errors(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the error answers of every operation."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault(ERROR_COMPONENT, ERROR_SCHEMA)
    error_content = {
        "application/json": {"schema": {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}}
    }
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if method not in _METHODS:
                continue
            responses = operation.setdefault("responses", {})
            for status in _error_statuses(operation):
                responses.setdefault(str(status), {"description": DESCRIPTIONS[status]})
            for status, response in responses.items():
                if status.isdigit() and int(status) >= 400 and "content" not in response:
                    response["content"] = error_content
    return result


def _error_statuses(operation: dict[str, Any]) -> list[int]:
    parameters = operation.get("parameters", [])
    places = {parameter.get("in") for parameter in parameters}
    text_path = any(
        p.get("in") == "path" and p.get("schema", {}).get("type") == "string" for p in parameters
    )
    security = operation.get("security", [])
    statuses = []
    if "requestBody" in operation or "query" in places or text_path:
        statuses.append(400)
    if security and {} not in security:  # anonymous callers are not turned away
        statuses += [401, 403]
    if "path" in places:
        statuses.append(404)
    return statuses


# --- the /v1 client APIs ---------------------------------------------------------------------

CLIENT_SECURITY: list[dict[str, list[str]]] = [{"clientKeyBearer": []}, {"clientKeyHeader": []}]
CLIENT_SCHEMES: dict[str, Any] = {
    "clientKeyBearer": {"type": "http", "scheme": "bearer"},
    "clientKeyHeader": {"type": "apiKey", "in": "header", "name": "x-api-key"},
}
REQUEST_ID = "X-OmniRoute-Request-Id"


def _text(description: str, **schema: Any) -> dict[str, Any]:
    return {"description": description, "schema": {"type": "string", **schema}}


# Every /v1 answer carries the request id; the others when they apply.
RESPONSE_HEADERS: dict[str, dict[str, Any]] = {
    REQUEST_ID: {
        **_text("This request's id, as the access log and the request log name it."),
        "required": True,
    },
    "X-OmniRoute-Decision": _text(
        "How the request was routed: `strategy=...; target=...; provider=...; connection=...; "
        "latency_ms=...; attempts=...` and, when they happened, `excluded=`, `skipped=`, "
        "`panic=1`, `fallback=`. On a stream whose head went out before the decision, an SSE "
        "comment `: x-omniroute-decision: ...` instead."
    ),
    "X-OmniRoute-Warning": _text(
        "What the gateway changed about the request (`background` served synchronously...)."
    ),
    "X-OmniRoute-Provider-Breaker": _text(
        "`open` on a 503 when the provider's circuit breaker kept every target out.",
        enum=["open"],
    ),
    "X-OmniRoute-Combo-Terminal-Reason": _text(
        "Why no target was tried: `all_targets_cooling_down` (503) or "
        "`no_executable_targets` (404)."
    ),
    "X-OmniRoute-Recovery-Action": _text("What to do next: `wait` or `switch-combo`."),
    "X-OmniRoute-Retry-After-Seconds": _text(
        "With `wait`: the seconds until a target is free again.", pattern=r"^\d+$"
    ),
    "Retry-After": _text("Seconds to wait, on a 429 or 503 only."),
}


def _header_parameter(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "in": "header",
        "name": name,
        "required": False,
        "description": description,
        "schema": schema,
    }


RELAY_PARAMETERS = [
    _header_parameter(
        "X-OmniRoute-Deadline-Ms",
        "The client's own deadline in milliseconds: lowers (never raises) the gateway's; a "
        "stream still open when it passes ends with an in-band error.",
        {"type": "integer", "minimum": 1},
    ),
    _header_parameter(
        "X-OmniRoute-Lease-Owner",
        "A managed key's lease owner token (`vlo_` and 43 base64url characters); never passed "
        "upstream.",
        {"type": "string", "pattern": r"^vlo_[A-Za-z0-9_-]{43}$"},
    ),
    _header_parameter(
        "X-OmniRoute-Lease-Generation",
        "The lease generation the owner holds (a positive integer); never passed upstream.",
        {"type": "integer", "minimum": 1},
    ),
    _header_parameter(
        "X-Session-Id",
        "A client session: its requests keep to one connection (`x-codex-session-id` and "
        "`X-OmniRoute-Session` work too); never passed upstream.",
        {"type": "string"},
    ),
]
CLIENT_ERRORS = {
    400: "Invalid request: not a JSON object, a missing `model` or `messages`, a bad "
    "`X-OmniRoute-Deadline-Ms`, a lease header a managed key needs.",
    401: "No client key, or one that is invalid, revoked or expired.",
    403: "The key may not use this model.",
    404: "No such model, or no target that can serve this request and no timer to wait for.",
    405: "Another method than the route's.",
    413: "The body is over the gateway's size limit.",
    429: "Rate limited (the upstream's, relayed, or the gateway's own admission).",
    503: "Every target is cooling down or behind an open breaker (see `Retry-After`), or the "
    "gateway is stopping (`server_shutting_down`: send it again).",
    504: "The deadline passed before an answer began.",
}


def _responses(answer: dict[str, Any], error: str, *, stream: bool) -> dict[str, Any]:
    error_content = {"application/json": {"schema": {"$ref": f"#/components/schemas/{error}"}}}
    content: dict[str, Any] = {"application/json": {"schema": answer}}
    if stream:
        # No type: a reader of OpenAPI 3.0 takes it for the whole body, schemathesis for each
        # event, and either is right.
        content["text/event-stream"] = {
            "schema": {
                "description": "With `stream: true`: server-sent events, each `data` a JSON "
                "chunk in this API's streaming shape (Chat Completions ends with "
                "`data: [DONE]`); a failure after the head went out is the API's in-band "
                "error event."
            }
        }
    responses: dict[str, Any] = {
        "200": {"description": "The answer.", "headers": RESPONSE_HEADERS, "content": content}
    }
    for status, description in CLIENT_ERRORS.items():
        responses[str(status)] = {
            "description": description,
            "headers": RESPONSE_HEADERS,
            "content": error_content,
        }
    responses["default"] = {
        "description": "An upstream's own error status, relayed in this API's error shape.",
        "headers": RESPONSE_HEADERS,
        "content": error_content,
    }
    return responses


def _relay_operation(api: Endpoint, described: ApiDescription) -> dict[str, Any]:
    parameters = list(RELAY_PARAMETERS)
    parameters += [
        _header_parameter(name.decode(), "Passed upstream as given.", {"type": "string"})
        for name in api.passed_headers
    ]
    return {
        "operationId": "v1_" + api.name.replace(".", "_"),
        "summary": described.summary,
        "description": described.description,
        "tags": ["clients"],
        "security": CLIENT_SECURITY,
        "parameters": parameters,
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": described.request}},
        },
        "responses": _responses(described.answer, described.error_shape, stream=True),
    }


MODELS_PARAMETERS = [
    _header_parameter(
        "anthropic-version",
        "When sent, the answer (and any error) takes Anthropic's shape.",
        {"type": "string"},
    )
]


def _models_operations() -> dict[str, dict[str, Any]]:
    common = {"tags": ["clients"], "security": CLIENT_SECURITY}
    listing = {
        **common,
        "operationId": "v1_models_list",
        "summary": "List the models and combos this key may use",
        "description": "Combos and every connection's declared models the client key may "
        "use, sorted by name.",
        "parameters": MODELS_PARAMETERS,
        "responses": _responses(MODEL_LIST, ErrorShape.OPENAI, stream=False),
    }
    detail = {
        **common,
        "operationId": "v1_models_retrieve",
        "summary": "Read one model or combo",
        "description": "A model the key may use (a combo, a declared model, or one a "
        "connection that serves any model would take), or 404 `model_not_found`. The id may "
        "contain `/` (`provider/model`).",
        "parameters": [
            {"in": "path", "name": "id", "required": True, "schema": {"type": "string"}},
            *MODELS_PARAMETERS,
        ],
        "responses": _responses(MODEL, ErrorShape.OPENAI, stream=False),
    }
    return {"/v1/models": {"get": listing}, "/v1/models/{id}": {"get": detail}}


def describe_client_apis(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the ``/v1`` operations, one per client API that
    ``routing.domain.client.endpoints.CLIENT_APIS`` declares, and the model list."""
    components = result.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for shape, schema in ERROR_SCHEMAS.items():
        schemas.setdefault(shape.value, schema)
    schemes = components.setdefault("securitySchemes", {})
    for name, scheme in CLIENT_SCHEMES.items():
        schemes.setdefault(name, scheme)
    paths = result.setdefault("paths", {})
    for api in CLIENT_APIS:
        if api.described is not None:
            paths[api.route] = {"post": _relay_operation(api, api.described)}
    paths.update(_models_operations())
    return result


# --- areas and summaries ---------------------------------------------------------------------

AREAS: dict[str, str] = {
    "clients": "The `/v1` client APIs: OpenAI Chat Completions and Responses, Anthropic "
    "Messages, the model list. A client key as `Authorization: Bearer` or `x-api-key`.",
    "configuration": "Providers, connections, client keys, combos, the model catalog, feature "
    "flags, and the whole configuration as one document.",
    "resilience": "Breakers, cooldowns, model lockouts, error and restatement rules, and the "
    "resilience settings.",
    "leases": "Exclusive session leases: the client's lifecycle and the operator's view.",
    "operations": "Health, readiness, live routing state (affinity pins) and the request log.",
}
# The area of each route, by path prefix; the longest prefix that matches wins.
AREA_PREFIXES: dict[str, str] = {
    "/v1/": "clients",
    "/api/providers/": "configuration",
    "/api/connections/": "configuration",
    "/api/connections/{id}/clear_error/": "resilience",
    "/api/connections/{id}/reset_terminal/": "resilience",
    "/api/keys/": "configuration",
    "/api/combos/": "configuration",
    "/api/model-catalog/": "configuration",
    "/api/feature-flags/": "configuration",
    "/api/config": "configuration",
    "/api/resilience": "resilience",
    "/api/breakers/": "resilience",
    "/api/error-rules/": "resilience",
    "/api/restatement-rules/": "resilience",
    "/api/v1/session-leases": "leases",
    "/api/sessions": "leases",
    "/api/monitoring/": "operations",
    "/api/affinity-pins/": "operations",
    "/api/requests/": "operations",
    "/readyz": "operations",
}
# What a collection's items are called, where its path does not say it plainly.
NOUNS: dict[str, tuple[str, str]] = {
    "connections": ("provider connections", "provider connection"),
    "keys": ("client keys", "client key"),
    "model-catalog": ("model-catalog entries", "model-catalog entry"),
}
VERBS = {
    "list": "List {plural}",
    "create": "Create {a} {singular}",
    "retrieve": "Read one {singular}",
    "update": "Replace {a} {singular}",
    "partial_update": "Change some fields of {a} {singular}",
    "destroy": "Delete {a} {singular}",
}
_STANDARD_PATH = re.compile(r"^/api/(?P<collection>[a-z-]+)/(\{[a-z_]+\}/)?$")


def area_of(path: str) -> str | None:
    """The area a route belongs to, or None when no prefix names it."""
    matches = [prefix for prefix in AREA_PREFIXES if path.startswith(prefix)]
    return AREA_PREFIXES[max(matches, key=len)] if matches else None


def tag_by_area(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: every operation tagged with its area (Swagger UI
    groups by tag, in the order of ``AREAS``) and given a summary where its view wrote none:
    a verb and the collection's noun for the standard actions, else its description's first
    sentence. A route no prefix names keeps its tag (the schema test then fails)."""
    result["tags"] = [{"name": name, "description": text} for name, text in AREAS.items()]
    for path, path_item in result.get("paths", {}).items():
        area = area_of(path)
        for method, operation in path_item.items():
            if method not in _METHODS:
                continue
            if area is not None:
                operation["tags"] = [area]
            if not operation.get("summary"):
                operation["summary"] = _summary(path, operation)
    return result


def _summary(path: str, operation: dict[str, Any]) -> str:
    standard = _STANDARD_PATH.match(path)
    operation_id = operation.get("operationId", "")
    # The longest suffix first: ``_partial_update`` also ends in ``_update``.
    suffixes = sorted(VERBS, key=len, reverse=True)
    action = next((v for v in suffixes if operation_id.endswith("_" + v)), None)
    if standard and action:
        collection = standard["collection"]
        plural, singular = NOUNS.get(
            collection, (collection.replace("-", " "), collection.replace("-", " ")[:-1])
        )
        article = "an" if singular[0] in "aeiou" else "a"
        return VERBS[action].format(plural=plural, singular=singular, a=article)
    text = " ".join(operation.get("description", "").split()).replace("``", "`")
    first = re.split(r"(?<=[.;])\s", text, maxsplit=1)[0].rstrip(".;")
    return first[:1].upper() + first[1:] if first else operation_id
