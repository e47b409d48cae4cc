"""Admission: what a request must hold while an attempt runs (docs/routing.md, "Admission").

``gates`` are the account semaphores (connection, model and global caps; FIFO, bounded queue,
timeout, blocked gates), counted in the state store so that several gateway processes share
one cap; ``limiter`` is the local request queue per provider connection (rate, spacing,
concurrency; admission by queue depth). Both hand out holds that the attempt loop releases
exactly once.
"""
