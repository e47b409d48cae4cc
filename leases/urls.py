"""The lease API's routes, mounted under ``/api/`` beside routing's management API."""

from __future__ import annotations

from django.urls import path

from leases.api import SessionLeaseApi
from leases.sessions import ExclusiveSessionRevokeApi, ExclusiveSessionsApi

urlpatterns = [
    path("v1/session-leases", SessionLeaseApi.as_view(), name="session-leases"),
    path("sessions", ExclusiveSessionsApi.as_view(), name="sessions"),
    path(
        "sessions/<str:session>/revoke",
        ExclusiveSessionRevokeApi.as_view(),
        name="session-revoke",
    ),
]
