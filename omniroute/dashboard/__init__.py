"""The live operator dashboard: an admin page fed over a WebSocket.

Every process publishes to one channel-layer group (Redis through ``channels_redis`` when
``REDIS_URL`` is set, so every process's events reach every dashboard): resilience events as
they happen (``events``), and its request counts once a second while it serves (``traffic``,
kept in the state store for the traffic window so that a dashboard opened later counts them).
Each connected dashboard (``consumers``) also re-reads the shared state (breakers, cooling
connections, locked models, leases, queues: ``snapshot``) every couple of seconds and at once
after an event, and pushes it.
"""
