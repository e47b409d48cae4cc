"""The resilience part of the management API, mounted at ``/api/`` by ``omniroute.urls``."""
