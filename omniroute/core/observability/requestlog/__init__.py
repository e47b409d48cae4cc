"""The request log: one row per finished /v1 request, written off the hot path.

The proxy pushes a :class:`~omniroute.core.observability.requestlog.record.RequestRecord`
per finished request (``submit``); a bounded queue holds it and one background thread writes
batches of them and prunes the table by age and count. A full queue drops the record and
counts the drop. No prompt or completion text is ever part of a record. docs/operating.md,
"Request log".
"""
