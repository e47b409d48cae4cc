"""Process entry point for serving: uvloop under daphne's Twisted reactor, then daphne's CLI.

Run as ``python -m omniroute.server [daphne args] omniroute.asgi:application``. It must be its
own process start: daphne installs its reactor when ``daphne.server`` is first imported (the
``daphne`` app does that during ``django.setup()``), so the loop policy has to come first.
"""

from __future__ import annotations

import asyncio
import functools
import sys


def main(argv: list[str]) -> None:
    """Install uvloop when available, then hand over to daphne's command line (with
    back-pressure on streamed responses, see :mod:`omniroute.flowcontrol`, and the upstream
    pools closed on stop, see :mod:`omniroute.shutdown`)."""
    try:
        import uvloop
    except ImportError:
        pass
    else:
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    from omniroute.shutdown import GatewayCommandLine  # imports daphne: after uvloop

    cache_content_type_parsing()
    GatewayCommandLine().run(argv)


def cache_content_type_parsing() -> None:
    """Memoise Twisted's Content-Type parser: it builds an ``EmailMessage`` for every POST.

    Twisted parses the type of each POST body to decode form submissions; daphne never reads
    the result, and the parse alone cost ~8% of the gateway's CPU per proxied request. The
    parse is a pure function of the header value, so caching it changes nothing else.
    """
    from twisted.web import http

    http._parseContentType = functools.lru_cache(maxsize=256)(http._parseContentType)


if __name__ == "__main__":
    main(sys.argv[1:])
