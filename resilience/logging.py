"""A logging filter that scrubs credential-shaped strings out of every record (decision 19).

Registered on the console handler in ``settings.LOGGING``. It knows no connection secrets (the
code that logs an upstream body scrubs that connection's secret itself); it removes what
:func:`resilience.domain.scrub.scrub` recognises by shape: ``Bearer …``, ``sk-…`` keys,
``api_key=…`` runs and JWTs, in the message, its arguments and a logged exception's traceback.
"""

from __future__ import annotations

import logging

from resilience.domain.scrub import scrub

__all__ = ["ScrubbingFilter"]


class ScrubbingFilter(logging.Filter):
    """Rewrites a record whose text holds something credential-shaped; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            self._scrub_message(record)
            self._scrub_exception(record)
        except Exception:  # a filter must never break logging (e.g. at interpreter shutdown)
            pass
        return True

    @staticmethod
    def _scrub_message(record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave it to the handler to report
            return
        scrubbed = scrub(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None

    @staticmethod
    def _scrub_exception(record: logging.LogRecord) -> None:
        # The formatter reuses ``exc_text`` when set, so formatting here once is enough.
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
