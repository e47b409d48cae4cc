"""``manage.py bench``'s phases: a fake upstream, one daphne gateway and a bounded load.

* ``base`` (``omniroute.tools.bench.base``): direct vs gateway, the bare proxy (``bare``) as
  the ceiling, a fail-over whose first target
  answers 404 and a priority combo whose first target answers 503, at 1, 16 and 64 clients,
  non-streaming and streaming;
* ``scale``: one provider with 100 connections against one with a single connection;
* ``prompt``: a 1 MB prompt against a two-letter one, direct and through the gateway;
* ``concurrency``: gateway throughput at 1, 16, 64, 128 and 256 clients;
* ``lists``: the management API's paginated connection list with 5 000 connections, server
  time in a child process with its own database (no gateway).

``harness`` starts the processes and times one run; ``report`` formats (pure).
"""
