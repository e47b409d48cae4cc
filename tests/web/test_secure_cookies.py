"""Session and CSRF cookies are ``Secure`` when the request came over https (directly, or as a
TLS-terminating proxy reports it with ``SECURE_PROXY_SSL_HEADER`` set), and only then: a
plain-http gateway on the operator's own machine must keep its login working."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from pytest_django.fixtures import Settings

PASSWORD = "cookie-test-password"


def log_in(client: Client, **extra: Any) -> dict[str, bool]:
    """Each cookie the login page and the login set: whether it is Secure."""
    page = client.get("/admin/login/", **extra)
    assert page.status_code == 200
    form = {"username": "op", "password": PASSWORD, "next": "/admin/"}
    login = client.post("/admin/login/", form, **extra)
    assert login.status_code == 302, login.content
    cookies = {**page.cookies, **login.cookies}
    assert {"csrftoken", "sessionid"} <= set(cookies)
    return {name: bool(cookie["secure"]) for name, cookie in cookies.items()}


@pytest.fixture
def operator(db: None) -> User:
    return User.objects.create_user("op", password=PASSWORD, is_staff=True)


def test_over_https_every_cookie_is_secure(operator: User) -> None:
    assert set(log_in(Client(), secure=True).values()) == {True}


def test_over_plain_http_none_is(operator: User) -> None:
    assert set(log_in(Client()).values()) == {False}


def test_behind_the_proxy_the_forwarded_scheme_decides(operator: User, settings: Settings) -> None:
    forwarded = {"HTTP_X_FORWARDED_PROTO": "https"}
    assert set(log_in(Client(), **forwarded).values()) == {False}  # the header is not believed
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert set(log_in(Client(), **forwarded).values()) == {True}
