"""The client APIs' fixed paths are routed by dictionary, and every other scope by the router
behind it, as before (``omniroute.exact_paths``, ``omniroute.asgi``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from omniroute.exact_paths import ExactPaths
from routing.domain.client.endpoints import CLIENT_APIS


class Recorder:
    """An ASGI application that remembers the scopes it was handed."""

    def __init__(self) -> None:
        self.scopes: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.scopes.append(scope)


def route(router: ExactPaths, **scope: Any) -> None:
    asyncio.run(router(scope, None, None))


def test_a_fixed_path_goes_to_its_application_with_the_scope_as_given() -> None:
    chat, fallback = Recorder(), Recorder()
    router = ExactPaths({"/v1/chat/completions": chat}, fallback)
    scope = {"type": "http", "path": "/v1/chat/completions"}

    route(router, **scope)

    assert chat.scopes == [scope] and fallback.scopes == []


@pytest.mark.parametrize(
    "scope",
    [
        {"path": "/v1/chat/completions/"},  # not the fixed path itself
        {"path": "/v1/models"},
        {"path": "/v1/chat/completions", "root_path": "/gateway"},  # the router strips it
        {"path": "/v1/chat/completions", "path_remaining": "x"},  # an outer router began
    ],
)
def test_every_other_scope_goes_to_the_router(scope: dict[str, Any]) -> None:
    chat, fallback = Recorder(), Recorder()
    router = ExactPaths({"/v1/chat/completions": chat}, fallback)

    route(router, type="http", **scope)

    assert chat.scopes == [] and len(fallback.scopes) == 1


def test_the_gateway_routes_each_client_api_by_its_path() -> None:
    from omniroute.asgi import application

    http = application.application_mapping["http"].application
    assert isinstance(http, ExactPaths)
    assert set(http.routes) == {api.route for api in CLIENT_APIS}
    for api in CLIENT_APIS:
        consumer = http.routes[api.route]
        assert consumer.consumer_initkwargs == {"endpoint": api}
