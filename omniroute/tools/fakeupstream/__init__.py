"""A fake OpenAI-compatible (and Anthropic) upstream: test double, demo server and benchmark
target.

An ``aiohttp.web`` server imitating a provider. It does not import Django: tests use
:class:`FakeUpstream` directly (``start()`` runs it in a daemon thread with its own event
loop); ``manage.py fakeupstream`` is a thin wrapper around :meth:`FakeUpstream.serve_forever`.

Endpoints
---------
``POST .../chat/completions``  any path ending so, e.g. ``/v1/chat/completions``.
    Without ``"stream": true`` a ``chat.completion`` JSON (``model`` echoes the request model
    up to ``?``). With it, ``text/event-stream``: ``chunks`` ``chat.completion.chunk`` events
    carrying ``chunk_size`` characters of content each (the first also ``role: assistant``),
    a final chunk with ``finish_reason: "stop"``, a usage chunk if
    ``stream_options.include_usage``, then ``data: [DONE]``. The stream's content equals the
    non-stream content for the same knobs: a deterministic text of ``chunks * chunk_size``
    characters (see ``text``), or its continuation after an assistant prefill (see
    ``prefill``); usage counts ``ceil(characters / 4)`` completion tokens.
``POST .../responses``         the OpenAI Responses API, e.g. ``/v1/responses``; see Dialects.
``POST .../messages``          the Anthropic Messages API, e.g. ``/v1/messages`` (the Anthropic
                               SDK's ``base_url`` is :meth:`FakeUpstream.anthropic_base_url`);
                               see Dialects.
``GET .../models``             an OpenAI model list (knobs do not apply).
``GET /_fake/log``             the recorded requests as JSON.
``POST /_fake/reset``          clears the log, the scripted behaviours, the per-model knobs and
                               the counters.
``POST /_fake/script``         a JSON list of knob objects (or one object), queued FIFO; each is
                               used by exactly one following answer request (any route).
``POST /_fake/models``         ``{"model": name, "knobs": {...}}``: knobs for every following
                               answer request for that model (the name before ``?``) until changed;
                               empty or null knobs forget them.
``GET /_fake/stats``           ``{"chat": n, "failed": m, "connections": c}``: answers so far
                               (chat, responses and messages all count as ``chat``); how many
                               were not a plain success (non-2xx, ``body``, reset, stall, cut,
                               ``malformed_at``, ``big_event_bytes``, ``done`` other than
                               ``yes``, a refused prefill or too many tools); and how many
                               distinct TCP connections carried them (distinct client
                               ``(host, port)`` peers: a pooled connection reused for several
                               requests counts once). Counted since the last reset, even with
                               ``record=False``.

Knobs
-----
``status``             int, default 200. Non-2xx answers an OpenAI error JSON
                       ``{"error": {"message", "type", "code"}}`` (also for stream requests;
                       the Anthropic shape on ``messages``, see Dialects).
``body``               raw response body text; replaces the normal answer at any status.
``retry_after``        value of a ``Retry-After`` response header.
``headers``            extra response headers: a JSON object (script form; elsewhere JSON text).
``latency_ms``         delay before the response headers (default 0).
``chunks``             number of content chunks in a stream (default 20).
``chunk_interval_ms``  delay between stream chunks (default 0: the stream is one write).
``chunk_size``         characters of content per chunk (default 8). A chat stream of more than
                       ``wire.LAZY_STREAM_CHARS`` (1 MiB) of text builds each event as it writes
                       it, never the whole text, so a huge answer (``chunks=2000&chunk_size=
                       100000``: 200 MB) costs the fake one event of memory; give it a
                       ``chunk_interval_ms`` above 0 as well, or the body is still one write.
                       A plain chat answer that long (no ``mid`` action) is written the same
                       way, a piece of its text at a time, with its ``Content-Length``.
``reset=before``       abort the TCP connection (RST) without any response.
``reset=mid``          send ``mid_at`` content chunks (or half a JSON body), then abort the
                       connection.
``stall=before``       never send headers: sleep (up to 300 s) until the client goes away
                       (with ``heartbeat_ms`` on a stream: send its headers, then only pings).
``stall=mid``          send ``mid_at`` content chunks (or half a JSON body), then stall likewise.
``cut=mid``            send ``mid_at`` content chunks, then end the response cleanly without the
                       finish event or ``[DONE]`` (a JSON body is cut by closing the connection
                       after half of it).
``mid_at``             int >= 0, default half the content chunks (rounded down): how many content
                       chunks go out before the ``mid`` action, e.g. a stream cut after 5 chunks
                       is ``cut=mid&mid_at=5``; ``0`` acts before any content, a value above the
                       number of chunks after all of them (before the finish event). Streams only.
``malformed_at``       int >= 0, unset by default: write one malformed event
                       (``data: {"choices": [`` and a blank line, not JSON) before content chunk
                       k (a value at or above the number of chunks: before the finish event);
                       the rest of the stream is normal. Not written if a ``mid`` action comes
                       first. Streams only.
``big_event_bytes``    int >= 0, unset by default: write one event of that many bytes (at least
                       its 23-byte frame) after the head events, before the first content
                       chunk: ``data: {"padding": "xxx..."}`` and a blank line, a JSON object
                       carrying no text (e.g. ``big_event_bytes=25165824``: one 24 MiB event).
                       The rest of the stream is as the other knobs say. Streams only.
``done``               ``yes`` (default) ends a stream with ``data: [DONE]``; ``close`` omits it
                       and ends the body normally after the finish (and usage) events; ``hang``
                       omits it and keeps the connection open without writing, up to the stall
                       maximum (300 s). Streams only.
``heartbeat_ms``       float, default 0 (off): while a ``stall`` is in effect on a stream, write
                       the SSE comment ``: ping`` every that many ms (bytes arrive, no text).
``reasoning``          bool (``true``/``1``/``yes``/``on`` or ``false``/``0``/``no``/``off``),
                       default false: every content delta carries ``reasoning_content`` instead
                       of ``content``; a JSON answer has ``content: null`` and
                       ``reasoning_content``. The finish and usage events are as usual.
``text``               ``default`` ("The quick brown fox...") or ``alt`` ("Pack my box...");
                       both deterministic, different from the first character, so a
                       regeneration on an ``alt`` target never starts with a ``default`` text.
``prefill``            applies when the request's last message has role ``assistant`` and string
                       content P. ``accept`` (default): the answer is the continuation, the full
                       text (``chunks * chunk_size`` characters of ``text``) without its first
                       ``len(P)`` characters, whether or not it starts with P; a stream chunks
                       it ``chunk_size`` characters at a time from its start (the last chunk may
                       be shorter; none when P is as long as the text), and usage counts only
                       the continuation. ``reject``: 400 ``invalid_request_error`` whose message
                       says assistant prefill is not supported (after status/body). ``ignore``:
                       the whole text, as without a prefill. JSON answers follow the same rules.
``error_rate``         float 0..1, unset by default: the failure that the other knobs describe
                       (status, body, retry_after, headers, reset, stall, cut, malformed_at,
                       big_event_bytes, done) then applies only with that probability;
                       otherwise the answer is a normal 200 of the same shape (latency,
                       chunking, ``mid_at``, ``heartbeat_ms``, ``reasoning``, ``text`` and
                       ``prefill`` kept). ``1`` always fails, ``0`` never. Draws come from
                       one ``random.Random(seed)`` per server (``FakeUpstream(seed=...)``,
                       ``manage.py fakeupstream --seed``), so a sequential run is repeatable;
                       e.g. ``base_url(status=503, error_rate=0.05)``, or a random hinted 429:
                       ``base_url(status=429, retry_after=1, error_rate=0.04)`` (the header
                       only on the drawn 429s).
``max_tools``          int >= 0, unset by default: a request whose ``tools`` list has more
                       entries answers 400 (``invalid_request_error``, in the route's error
                       shape) with the message ``too many tools: this model supports at most N
                       tools (max N), got C``; counted as failed. Kept by a passing
                       ``error_rate`` draw (it is what the model can do, like ``prefill``).
``reset``/``stall``/``cut``/``mid_at``/``malformed_at``/``big_event_bytes``/``error_rate``/
``max_tools`` accept ``none`` (or empty) to switch off a lower-precedence value;
``done``/``text``/``prefill`` take it as their default.
Order: ``latency_ms``, then ``reset=before``, ``stall=before``, then status/body, then a
refused prefill, then too many tools, then the answer; for ``mid``, ``reset`` wins over
``stall`` over ``cut``.

Channels, highest precedence first: (1) scripted behaviours (``/_fake/script`` or
:meth:`FakeUpstream.script`), (2) per-model knobs (``/_fake/models`` or
:meth:`FakeUpstream.set_model`), (3) request headers ``x-fake-<knob>`` (``-`` or ``_``),
(4) the model name's query string, e.g. ``"gpt-4o?status=503&retry_after=7"``, (5) a scenario
path prefix, e.g. base URL ``http://127.0.0.1:PORT/s/status=503&latency_ms=10/v1`` (see
:meth:`FakeUpstream.base_url`), (6) the server defaults (a :class:`Behaviour`). Unknown knobs
or bad values answer 400 with error type ``fake_knob_error``. The ``error_rate`` draw comes
last, on the merged knobs.

Dialects
--------
Every knob, channel, fault and record works the same on the three answer routes; only the
words differ (:mod:`omniroute.tools.fakeupstream.dialect`). ``mid_at``, ``malformed_at`` and
``chunks_sent`` count content (delta) events only: the head events (below) always go out
first, so ``reset=mid&mid_at=0`` resets right after them, and ``cut=mid`` leaves out the
whole tail (every event after the last delta). Streams end without ``[DONE]`` on the two
routes below, so there ``done=close`` is ``done=yes`` (recorded as ``yes``, not a failure)
and ``done=hang`` keeps the connection open after the last event. Ids are ``resp_fake_N``,
``msg_fake_N`` and ``rs_fake_N``, N the answer's 12-digit number (the ids of one answer share
it). Usage counts 8 input tokens and ``ceil(characters / 4)`` output tokens. Every event has
an ``event:`` line naming its ``type``; the malformed event is such an event whose ``data:``
is truncated JSON.

``responses``  A ``response`` JSON (``status: completed``, one ``output`` item: an assistant
    ``message`` with one ``output_text`` part, or with ``reasoning`` a ``reasoning`` item
    whose ``summary`` holds the text). A stream, each event with ``sequence_number`` 0, 1, ...:
    ``response.created``, ``response.in_progress`` (the response in progress, ``output: []``),
    ``response.output_item.added``, ``response.content_part.added``, one
    ``response.output_text.delta`` per chunk, ``response.output_text.done``,
    ``response.content_part.done``, ``response.output_item.done``, ``response.completed``
    (with the output and usage). With ``reasoning``: ``response.reasoning_summary_part.*`` and
    ``response.reasoning_summary_text.*`` (``summary_index`` 0) instead of the content part
    and text events. The ``prefill`` knob does not apply (``prefill`` is recorded as None).
    Errors as for chat. The malformed event: ``event: response.output_text.delta`` with
    ``data: {"type": "response.output_text.delta", "delta":``.
``messages``   A ``message`` JSON (``stop_reason: end_turn``, one ``text`` block, or with
    ``reasoning`` one ``thinking`` block with ``signature: "fake"``). A stream:
    ``message_start`` (``content: []``, ``output_tokens: 1``), ``content_block_start``,
    ``ping``, one ``content_block_delta`` per chunk (``text_delta``; ``thinking_delta`` with
    ``reasoning``, then one ``signature_delta`` after them), ``content_block_stop``,
    ``message_delta`` (``stop_reason`` and usage), ``message_stop``. The prefill is the last
    message's content when its role is ``assistant``: a string, or text blocks (joined).
    Errors are ``{"type": "error", "error": {"type", "message"}}``, the type by status:
    400 ``invalid_request_error``, 401 ``authentication_error``, 403 ``permission_error``,
    404 ``not_found_error``, 413 ``request_too_large``, 429 ``rate_limit_error``, 529
    ``overloaded_error``, other 5xx ``api_error``, other 4xx ``invalid_request_error``; knob
    errors ``fake_knob_error``. ``x-api-key`` and ``anthropic-version`` are recorded with the
    other headers, never required. The malformed event: ``event: content_block_delta`` with
    ``data: {"type": "content_block_delta", "delta":``.

Records (:class:`RequestRecord`) are kept for answer and model requests in a bounded deque
(last 1000) unless ``record=False``; times are ``time.monotonic()`` of the server process.
``path`` tells the route, ``body`` is the parsed request (``messages`` reads its message
list), ``prefill`` the assistant prefill it carried (None without one: ``all(r.prefill is
None for r in fake.requests)`` shows no prefill request reached this fake), ``chunks_sent``
the content chunks written, ``pings_sent`` the heartbeats and ``peer`` the client's
``host:port`` (one per TCP connection: requests with the same ``peer`` came over one pooled
connection). ``completed`` is true when the handler finished its answer (including error
and ``cut`` answers); ``disconnected_at`` is when the server noticed the client went away,
``aborted_at`` when the server itself reset the connection.

Library use::

    with FakeUpstream(defaults=Behaviour(chunks=5)).start() as fake:   # own thread and loop
        client = OpenAI(base_url=fake.base_url(status=503), api_key="x")
        fake.script({"reset": "before"}, {"status": 429, "retry_after": 1})
        fake.set_model("gpt-4o", status=503)       # until fake.set_model("gpt-4o")
        fake.wait_for(lambda f: f.requests and f.requests[-1].disconnected_at, timeout=1)

From async code in the loop that runs the client, use ``await fake.wait_for_async(...)``
(or ``asyncio.to_thread(fake.wait_for, ...)``): blocking that loop can delay the close of the
client's own socket, which is what the fake is waiting to see.
"""

from __future__ import annotations

from omniroute.tools.fakeupstream.behaviour import Behaviour, RequestRecord, model_with
from omniroute.tools.fakeupstream.server import FakeUpstream
from omniroute.tools.fakeupstream.wire import MODELS

__all__ = ["MODELS", "Behaviour", "FakeUpstream", "RequestRecord", "model_with"]
