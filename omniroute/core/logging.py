"""The gateway's log plumbing: a filter that scrubs credential-shaped strings out of every
record, and the JSON formatter of ``OMNIROUTE_LOG_FORMAT=json``.

Registered on the console handler in ``settings.LOGGING``. It knows no connection secrets (the
code that logs an upstream body scrubs that connection's secret itself); it removes what
:func:`omniroute.core.scrub.scrub` recognises by shape: ``Bearer …``, ``sk-…`` keys,
``api_key=…`` runs and JWTs, in the message, its arguments and a logged exception's traceback.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from omniroute.core.scrub import scrub

__all__ = ["SCRUBBED", "JsonFormatter", "ScrubbingFilter", "scrubbed_fields"]

# A record whose message and ``fields`` its emitter scrubbed already carries this attribute set
# to True (``extra={SCRUBBED: True}``): the filter and the JSON formatter leave its text as it is.
SCRUBBED = "scrubbed"


class ScrubbingFilter(logging.Filter):
    """Rewrites a record whose text holds something credential-shaped; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            if not getattr(record, SCRUBBED, False):
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


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the record's ``fields`` (the
    access log's) as top-level keys, and a logged exception's traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry |= fields if getattr(record, SCRUBBED, False) else scrubbed_fields(fields)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = scrub(record.exc_text)
        return json.dumps(entry, default=str)


def scrubbed_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` with each text value scrubbed (a client's model name or an upstream's error
    could be shaped like a credential); other values as they are."""
    return {
        name: scrub(value) if isinstance(value, str) else value for name, value in fields.items()
    }
