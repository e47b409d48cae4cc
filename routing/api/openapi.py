"""The error answers of the management API, added to every operation of its OpenAPI schema.

Every view answers errors through ``routing.api.errors`` (the lease API through its own handler,
in the same shape), so the schema documents them once, here, instead of on each view: 400 where
an operation reads a body, a query or a text path value (PostgreSQL refuses a NUL character even
in a lookup), 401 and 403 where it needs credentials, 404 where its path names an object. A
status a view documents itself keeps its description; the error body schema is filled in where
it gave none.
"""

from __future__ import annotations

from typing import Any

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
