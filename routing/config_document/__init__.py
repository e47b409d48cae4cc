"""Configuration as code: the whole operator configuration as one document.

``exportconfig``, ``importconfig`` and ``/api/config`` share this package:

- ``values`` and ``schema``: the kinds of value, the sections with their natural keys, fields
  and defaults, and the reading of a parsed document into canonical form (pure);
- ``located`` and ``paths``: the YAML text with each value's line, and the path of a value;
  ``errors``: problems that name line and field;
- ``references``: the ``${ENV:OMNIROUTE_PROVIDER_SECRET_*}`` references written in place of a
  connection's secrets (pure);
- ``plan``: what applying a document would change (pure);
- ``reading``: the document of the database as it stands;
- ``applying`` and ``removing``: a plan carried out through the services, in one transaction;
- ``texts``: the document to and from YAML text.

Generated ids and timestamps never appear; objects refer to each other by natural keys
(provider slug, connection name within its provider, combo name). See docs/configuration.md,
"Configuration as code".
"""
