"""The bad-input corpus, one module per surface: the three ``/v1`` wire formats, the management
API, the lease API and the WebSocket; ``tests/e2e/test_bad_input_corpus.py`` runs it."""
