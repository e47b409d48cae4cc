"""ASGI entry point: ``/v1/*`` goes to the proxy consumers, everything else to Django; the one
WebSocket, ``/ws/dashboard/``, is the operator dashboard's (admin session; its own origin or a
trusted one, see omniroute.dashboard.origin), any other socket path is refused with a close.
Every HTTP request passes the header limits first (omniroute.header_limits)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute.settings")
django_app = get_asgi_application()

# Imported after Django is set up: the consumers read settings and models.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from omniroute.dashboard.consumers import DashboardConsumer  # noqa: E402
from omniroute.dashboard.origin import OriginValidator  # noqa: E402
from omniroute.exact_paths import ExactPaths  # noqa: E402
from omniroute.header_limits import HeaderLimits  # noqa: E402
from omniroute.lifespan import Lifespan  # noqa: E402
from omniroute.sockets import NoSuchSocket  # noqa: E402
from routing.domain.client.endpoints import CLIENT_APIS  # noqa: E402
from routing.proxy.consumers import (  # noqa: E402
    MessagesNotFoundConsumer,
    ModelsConsumer,
    NotFoundConsumer,
    RelayConsumer,
)

relay_apps = {api.route: RelayConsumer.as_asgi(endpoint=api) for api in CLIENT_APIS}
http_router = URLRouter(
    [
        *(path(route.removeprefix("/"), app) for route, app in relay_apps.items()),
        path("v1/models", ModelsConsumer.as_asgi()),
        path("v1/models/<path:model>", ModelsConsumer.as_asgi()),
        re_path(r"^v1/messages/", MessagesNotFoundConsumer.as_asgi()),
        re_path(r"^v1/", NotFoundConsumer.as_asgi()),
        re_path(r"", django_app),  # type: ignore[arg-type]  # an ASGI app
    ]
)

application = ProtocolTypeRouter(
    {
        # The client APIs' fixed paths by dictionary, every other path by the router.
        "http": HeaderLimits(ExactPaths(relay_apps, http_router)),
        "websocket": OriginValidator(
            AuthMiddlewareStack(
                URLRouter(
                    [
                        path("ws/dashboard/", DashboardConsumer.as_asgi()),
                        re_path(r"", NoSuchSocket.as_asgi()),
                    ]
                )
            )
        ),
        "lifespan": Lifespan(),
    }
)
