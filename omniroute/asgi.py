"""ASGI entry point: ``/v1/*`` goes to the proxy consumers, everything else to Django; the one
WebSocket, ``/ws/dashboard/``, is the operator dashboard's (admin session, same origin)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute.settings")
django_app = get_asgi_application()

# Imported after Django is set up: the consumers read settings and models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from omniroute.dashboard.consumers import DashboardConsumer  # noqa: E402
from routing.consumers import (  # noqa: E402
    ModelsConsumer,
    NotFoundConsumer,
    RelayConsumer,
)
from routing.domain.endpoints import CHAT_COMPLETIONS, MESSAGES, RESPONSES  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": URLRouter(
            [
                path("v1/chat/completions", RelayConsumer.as_asgi(endpoint=CHAT_COMPLETIONS)),
                path("v1/responses", RelayConsumer.as_asgi(endpoint=RESPONSES)),
                path("v1/messages", RelayConsumer.as_asgi(endpoint=MESSAGES)),
                path("v1/models", ModelsConsumer.as_asgi()),
                path("v1/models/<path:model>", ModelsConsumer.as_asgi()),
                re_path(r"^v1/", NotFoundConsumer.as_asgi()),
                re_path(r"", django_app),  # type: ignore[arg-type]  # an ASGI app
            ]
        ),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter([path("ws/dashboard/", DashboardConsumer.as_asgi())]))
        ),
    }
)
