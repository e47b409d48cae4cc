"""ASGI entry point: ``/v1/*`` goes to the proxy consumers, everything else to Django."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute.settings")
django_app = get_asgi_application()

# Imported after Django is set up: the consumers read settings and models.
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from routing.consumers import (  # noqa: E402
    ChatCompletionsConsumer,
    ModelsConsumer,
    NotFoundConsumer,
)

application = ProtocolTypeRouter(
    {
        "http": URLRouter(
            [
                path("v1/chat/completions", ChatCompletionsConsumer.as_asgi()),
                path("v1/models", ModelsConsumer.as_asgi()),
                re_path(r"^v1/", NotFoundConsumer.as_asgi()),
                re_path(r"", django_app),  # type: ignore[arg-type]  # an ASGI app
            ]
        )
    }
)
