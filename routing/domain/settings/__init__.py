"""Routing's sections of the settings document (``sections``), their fields, words and typed
objects, and a combo's overrides of the ``attempts`` section (pure)."""
