"""The availability load test behind ``make availability``: sporadic upstream failures, and
how many client requests the gateway still answers.

One fake upstream (``--seed`` for repeatable draws) and one daphne gateway with its own data
directory (SQLite, memory store), all on 127.0.0.1, configured through the management API as an
operator would. Each scenario gets a provider of its own, so no breaker, lock or counter carries
over from one scenario to the next; each of its connections points at the fake with a scenario
path that fails a random share of the calls. A closed-loop aiohttp load (``concurrency``
workers, exactly ``requests`` requests unless ``duration`` runs out first) counts every answer
by status and error code; the fake's ``/_fake/stats`` tells how many failures it actually
injected.

Two faults. *Random*: ``status`` (503) on a random ``error_rate`` (5 %) of calls, at
``concurrency``; the bars are at least 99.5 % answered and never ``503
all_targets_cooling_down`` on two connections, 99 % on one. *Hinted*: 429 with ``Retry-After:
1`` on a random ``hinted_rate`` (4 %) of calls, at ``hinted_concurrency`` (8), on one and on two
connections, each with the provider's ``per_model_quota`` on and off (whether a 429 is charged
to the (connection, model) pair or to the whole connection); beside them, in the same run, the
*direct baseline*: the same load straight to the fake upstream with the same faults, as a
client that does not retry gets it. The product rule is never worse than calling the upstream
directly: one connection must answer at least the direct baseline less one point, two
connections at least 99.5 %. The baseline itself must be what the faults imply (``1 −
hinted_rate`` within 4σ), and every scenario's upstream must have failed about the share asked
for (within 4σ of its calls), so a fault that was not injected cannot pass a bar.
"""
