"""A corpus of bad input, over real HTTP against one running gateway: the three /v1 wire
formats, the management API, the lease API and the WebSocket.

Each case says what it sends and the exact status it must get; every answer must be in its
surface's error shape (OpenAI's, Anthropic's on ``/v1/messages``, the lease API's codes), never
a 5xx, within :data:`ANSWER_SECONDS`, and the fake upstream must see a request only when the
case is one the gateway should serve (extra fields, a duplicate key whose last value is good).
``test_the_corpus_covers_every_surface`` prints the count per surface (``pytest -s``).
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson
import pytest
from websockets.exceptions import InvalidHandshake, InvalidStatus
from websockets.sync.client import connect

from omniroute.tools.fakeupstream import FakeUpstream
from tests.e2e.conftest import MAX_BODY_BYTES, Gateway, Route, make_route, records
from tests.e2e.hostile_support import (
    ANSWER_SECONDS,
    ANTHROPIC,
    CHAT,
    MESSAGES_API,
    OPENAI,
    RESPONSES,
    SURFACES,
    Surface,
    assert_wire_error,
    timed,
)

pytestmark = pytest.mark.e2e

MODEL = b"@MODEL@"  # replaced by the case's route model
PROVIDER = b"@PROVIDER@"  # replaced by the route's provider slug
LEASE = "lease"
MANAGEMENT = "management"
SOCKET = "websocket"


@dataclass(frozen=True)
class Case:
    """One hostile request and what it must get."""

    surface: str
    name: str
    status: int
    content: bytes = b""
    method: str = "POST"
    path: str = ""  # the surface's own path unless told
    headers: dict[str, str] = field(default_factory=dict)
    auth: str = "key"  # "key", "none", "wrong", or a literal Authorization value
    upstream_due: bool = False  # the gateway should serve it: one upstream request

    @property
    def id(self) -> str:
        return f"{self.surface}: {self.name}"


def valid(surface: Surface) -> bytes:
    return orjson.dumps(surface.body("@MODEL@"))


def with_member(surface: Surface, member: bytes) -> bytes:
    return valid(surface)[:-1] + b", " + member + b"}"


def replaced(surface: Surface, name: str, value: bytes) -> bytes:
    """The surface's valid body with ``name`` set to the raw JSON ``value`` (or left out)."""
    payload = {k: v for k, v in surface.body("@MODEL@").items() if k != name}
    body = orjson.dumps(payload)
    return body if value == b"" else body[:-1] + b', "' + name.encode() + b'": ' + value + b"}"


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


# --- the three /v1 wire formats -------------------------------------------------------------


def v1_cases(surface: Surface) -> Iterator[Case]:
    s = surface.name
    good = valid(surface)

    def case(name: str, status: int, content: bytes, **kw: Any) -> Case:
        return Case(s, name, status, content, **kw)

    # what is not a JSON object at all
    for name, content in [
        ("empty body", b""),
        ("whitespace only", b"  \n\t "),
        ("null", b"null"),
        ("array", b"[]"),
        ("array holding the request", b"[" + good + b"]"),
        ("string", b'"hello"'),
        ("number", b"42"),
        ("boolean", b"true"),
    ]:
        yield case(name, 400, content)
    # truncated and malformed JSON
    for name, content in [
        ("a lone brace", b"{"),
        ("truncated after a key", b'{"model"'),
        ("truncated in a string", b'{"model": "@MOD'),
        ("truncated halfway", good[: len(good) // 2]),
        ("truncated before the last brace", good[:-1]),
        ("trailing garbage", good + b" xyz"),
        ("two objects", good + good),
        ("single quotes", b"{'model': 'x'}"),
        ("an unquoted key", b"{model: 1}"),
        ("a trailing comma", good[:-1] + b",}"),
        ("a comment", b"// hi\n" + good),
        ("a bad escape", b'{"model": "\\q"}'),
        ("a short unicode escape", b'{"model": "\\u12"}'),
    ]:
        yield case(name, 400, content)
    # encodings
    for name, content in [
        ("invalid UTF-8", good.replace(b'"x"', b'"\xff\xfe"').replace(b"@MODEL@", b"\xc3\x28")),
        ("invalid UTF-8 in the content", good.replace(b'"x"', b'"\xff"')),
        ("an overlong UTF-8 sequence", b'{"model": "\xc0\xaf"}'),
        ("UTF-16", good.decode().encode("utf-16")),
        ("a lone surrogate escape", replaced(surface, "model", b'"\\ud800"')),
        ("a raw NUL inside a string", good.replace(b'"x"', b'"a\x00b"')),
        ("a raw NUL after the object", good + b"\x00"),
        ("a raw control character", good.replace(b'"x"', b'"a\x01b"')),
    ]:
        yield case(name, 400, content)
    # numbers
    for name, value in [
        ("NaN", b"NaN"),
        ("Infinity", b"Infinity"),
        ("-Infinity", b"-Infinity"),
        ("1e999", b"1e999"),
        ("-1e999", b"-1e999"),
        ("a 5000-digit integer", b"9" * 5000),
    ]:
        yield case(f"temperature {name}", 400, with_member(surface, b'"temperature": ' + value))
    # nesting
    for depth in (65, 200, 1000, 1025, 5000):
        yield case(f"nested {depth} deep", 400, with_member(surface, b'"metadata": ' + deep(depth)))
    # the model
    for name, value, status in [
        ("model left out", b"", 400),
        ("model null", b"null", 400),
        ("model a number", b"42", 400),
        ("model a boolean", b"true", 400),
        ("model an array", b'["@MODEL@"]', 400),
        ("model an object", b'{"id": "@MODEL@"}', 400),
        ("model empty", b'""', 400),
        ("model blank", b'"   "', 400),
        ("model unknown", b'"no-such-model"', 404),
        ("model of an unknown provider", b'"no-such-provider/m"', 404),
        ("model naming only the provider", b'"@PROVIDER@/"', 404),
        ("model an escaped NUL", b'"\\u0000"', 404),
        ("model a path", b'"../../etc/passwd"', 404),
        ("model with a newline", b'"a\\nb"', 404),
        ("model in another script", '"模型"'.encode(), 404),
        ("model of 60 000 characters", b'"' + b"m" * 60_000 + b'"', 404),
    ]:
        yield case(name, status, replaced(surface, "model", value))
    # stream and tools
    for name, value in [("a string", b'"yes"'), ("a number", b"1"), ("an object", b"{}")]:
        yield case(f"stream {name}", 400, replaced(surface, "stream", value))
    for name, value in [("a string", b'"tool"'), ("an object", b"{}"), ("a number", b"3")]:
        yield case(f"tools {name}", 400, replaced(surface, "tools", value))
    # duplicate keys: the last one counts
    yield case("duplicate model, the last one wrong", 400, with_member(surface, b'"model": 1'))
    yield case(
        "duplicate model, the last one right",
        200,
        b'{"model": 1, ' + good[1:],
        upstream_due=True,
    )
    # extra fields and null values are passed through: served
    yield case(
        "an unknown extra field",
        200,
        with_member(surface, b'"x_extra": [1, {}]'),
        upstream_due=True,
    )
    yield case("stream null", 200, replaced(surface, "stream", b"null"), upstream_due=True)
    yield case(
        "a huge integer (parsed as a float)",
        200,
        with_member(surface, b'"x_big": ' + b"1" * 40),
        upstream_due=True,
    )
    yield case(
        "nested 64 deep", 200, with_member(surface, b'"metadata": ' + deep(63)), upstream_due=True
    )
    # size
    filler = b"x" * (MAX_BODY_BYTES + 1024)
    yield case("a body over the limit", 413, with_member(surface, b'"pad": "' + filler + b'"'))
    # content types: the body is read as JSON whatever the header says
    yield case(
        "form-encoded",
        400,
        b"model=@MODEL@&messages=x",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    yield case(
        "multipart",
        400,
        b"--b\r\nContent-Disposition: form-data; name=model\r\n\r\nx\r\n--b--\r\n",
        headers={"content-type": "multipart/form-data; boundary=b"},
    )
    yield case(
        "JSON sent as text/plain",
        200,
        good,
        headers={"content-type": "text/plain"},
        upstream_due=True,
    )
    # methods
    for method in ("GET", "PUT", "PATCH", "DELETE"):
        yield case(f"method {method}", 405, b"", method=method)
    # credentials
    yield case("no key", 401, good, auth="none")
    yield case("an unknown key", 401, good, auth="wrong")
    yield case("a bearer with no token", 401, good, auth="Bearer")
    yield case("basic credentials", 401, good, auth="Basic dXNlcjpwYXNz")
    yield case("a bearer of 4 000 characters", 401, good, auth="Bearer " + "k" * 4000)
    yield case("a bearer of 9 000 characters", 431, good, auth="Bearer " + "k" * 9000)


def v1_specific_cases() -> Iterator[Case]:
    for surface in (CHAT, MESSAGES_API):
        for name, value in [
            ("left out", b""),
            ("null", b"null"),
            ("a string", b'"hello"'),
            ("empty", b"[]"),
            ("an object", b'{"role": "user"}'),
        ]:
            yield Case(surface.name, f"messages {name}", 400, replaced(surface, "messages", value))
    for name, value in [
        ("left out", b""),
        ("a number", b"5"),
        ("an object", b"{}"),
        ("null", b"null"),
    ]:
        yield Case("responses", f"input {name}", 400, replaced(RESPONSES, "input", value))
    for name, value in [("empty", b'""'), ("a number", b"5"), ("an object", b"{}")]:
        yield Case(
            "responses",
            f"previous_response_id {name}",
            400,
            replaced(RESPONSES, "previous_response_id", value),
        )
    for name, value in [("a string", b'"yes"'), ("a number", b"1")]:
        yield Case("responses", f"background {name}", 400, replaced(RESPONSES, "background", value))
    for name, value in [
        ("zero", b"0"),
        ("negative", b"-1"),
        ("a string", b'"8"'),
        ("a fraction", b"1.5"),
        ("a boolean", b"true"),
        ("too large for an integer", b"1" * 40),
    ]:
        yield Case(
            "messages", f"max_tokens {name}", 400, replaced(MESSAGES_API, "max_tokens", value)
        )


# --- the management API ---------------------------------------------------------------------


def provider_body(**fields: Any) -> bytes:
    return orjson.dumps({"slug": "corpus-@PROVIDER@", "name": "corpus", **fields})


def management_cases() -> Iterator[Case]:
    def case(name: str, status: int, content: bytes, **kw: Any) -> Case:
        return Case(MANAGEMENT, name, status, content, path="/api/providers/", **kw)

    for name, content in [
        ("empty body", b""),
        ("null", b"null"),
        ("array", b"[]"),
        ("string", b'"hello"'),
        ("a lone brace", b"{"),
        ("truncated halfway", provider_body()[:12]),
        ("trailing garbage", provider_body() + b" xyz"),
        ("invalid UTF-8", b'{"slug": "\xff\xfe", "name": "x"}'),
        ("UTF-16", provider_body().decode().encode("utf-16")),
        ("a raw NUL", b'{"slug": "a\x00b", "name": "x"}'),
        ("an escaped NUL in the slug", provider_body(slug="a\u0000b")),
        ("an escaped NUL in the name", provider_body(name="a\u0000b")),
        ("NaN", b'{"slug": "x", "name": NaN}'),
        ("Infinity", b'{"slug": "x", "name": "x", "max_concurrent": Infinity}'),
        ("1e999", b'{"slug": "x", "name": "x", "max_concurrent": 1e999}'),
        (
            "a 5000-digit integer",
            b'{"slug": "x", "name": "x", "max_concurrent": ' + b"9" * 5000 + b"}",
        ),
        ("a 40-digit integer", b'{"slug": "x", "name": "x", "max_concurrent": ' + b"9" * 40 + b"}"),
        ("nested 65 deep", b'{"slug": "x", "name": ' + deep(65) + b"}"),
        ("nested 1000 deep", b'{"slug": "x", "name": ' + deep(1000) + b"}"),
        ("nested 5000 deep", b'{"slug": "x", "name": ' + deep(5000) + b"}"),
        ("slug left out", orjson.dumps({"name": "x"})),
        ("slug a number", orjson.dumps({"slug": 5, "name": "x"})),
        ("slug an array", orjson.dumps({"slug": ["a"], "name": "x"})),
        ("slug with a space", provider_body(slug="a b")),
        ("slug of 100 000 characters", provider_body(slug="s" * 100_000)),
        ("a wire format that does not exist", provider_body(wire_format="grpc")),
        ("a category that does not exist", provider_body(category="nope")),
        ("only unknown fields", orjson.dumps({"x": 1})),
        ("duplicate slug, the last one wrong", b'{"slug": "ok", "name": "x", "slug": 5}'),
    ]:
        yield case(name, 400, content)
    yield case("text/plain", 415, provider_body(), headers={"content-type": "text/plain"})
    yield case("XML", 415, b"<provider/>", headers={"content-type": "application/xml"})
    yield case(
        "form-encoded, fields missing",
        400,
        b"x=1",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    yield case(
        "multipart with no closing boundary",
        400,
        b"--b\r\nContent-Disposition: form-data; name=slug\r\n\r\nx",
        headers={"content-type": "multipart/form-data; boundary=b"},
    )
    yield case("a body over the upload limit", 413, provider_body(name="n" * 3_000_000))
    yield case("no key", 401, provider_body(), auth="none")
    yield case("an unknown key", 401, provider_body(), auth="wrong")
    yield case("a client key without manage", 403, provider_body(), auth="client")
    for name, path, status in [
        ("a connection id that is not a number", "/api/connections/abc/", 404),
        ("a connection id past 64 bits", "/api/connections/99999999999999999999999/", 404),
        ("a negative connection id", "/api/connections/-1/", 404),
        ("a provider slug with an encoded slash", "/api/providers/a%2Fb/", 404),
        ("a provider slug of 8 000 characters", "/api/providers/" + "s" * 8000 + "/", 404),
        ("an unknown area", "/api/nowhere/", 404),
    ]:
        yield Case(MANAGEMENT, name, status, method="GET", path=path)
    for name, content in [
        ("resilience settings, truncated", b'{"attempts": {'),
        ("resilience settings, nested 1000 deep", b'{"attempts": ' + deep(1000) + b"}"),
        ("resilience settings, an array", b"[]"),
    ]:
        yield Case(MANAGEMENT, name, 400, content, method="PATCH", path="/api/resilience")
    yield Case(
        MANAGEMENT,
        "model cooldowns, nested 1000 deep",
        400,
        b'{"provider": ' + deep(1000) + b"}",
        method="DELETE",
        path="/api/resilience/model-cooldowns",
    )
    yield Case(
        MANAGEMENT,
        "keys, scopes a string",
        400,
        orjson.dumps({"name": "k", "scopes": "manage"}),
        path="/api/keys/",
    )
    yield Case(
        MANAGEMENT,
        "keys, scopes of numbers",
        400,
        orjson.dumps({"name": "k", "scopes": [1]}),
        path="/api/keys/",
    )


# --- the lease API --------------------------------------------------------------------------

LEASE_PATH = "/api/v1/session-leases"
OWNER = "vlo_" + "A" * 43


def lease_cases() -> Iterator[Case]:
    def case(name: str, status: int, content: bytes, **kw: Any) -> Case:
        headers = {"content-type": "application/json", "x-omniroute-lease-owner": OWNER}
        return Case(
            LEASE,
            name,
            status,
            content,
            path=LEASE_PATH,
            headers=headers | kw.pop("headers", {}),
            **kw,
        )

    acquire = b'{"action": "acquire", "model": "@MODEL@"}'
    for name, content in [
        ("empty body", b""),
        ("null", b"null"),
        ("array", b"[]"),
        ("a lone brace", b"{"),
        ("truncated halfway", acquire[:15]),
        ("invalid UTF-8", b'{"action": "\xff"}'),
        ("a raw NUL", b'{"action": "acq\x00uire"}'),
        ("NaN generation", b'{"action": "renew", "generation": NaN}'),
        ("1e999 generation", b'{"action": "renew", "generation": 1e999}'),
        ("a 5000-digit generation", b'{"action": "renew", "generation": ' + b"9" * 5000 + b"}"),
        ("generation past 2^53", b'{"action": "renew", "generation": 9007199254740993}'),
        ("generation zero", b'{"action": "renew", "generation": 0}'),
        ("generation a string", b'{"action": "renew", "generation": "1"}'),
        ("generation a boolean", b'{"action": "renew", "generation": true}'),
        ("an unknown action", b'{"action": "steal"}'),
        ("action a number", b'{"action": 1}'),
        ("action left out", b'{"model": "@MODEL@"}'),
        ("model left out", b'{"action": "acquire"}'),
        ("model a number", b'{"action": "acquire", "model": 5}'),
        ("model of 60 000 characters", b'{"action": "acquire", "model": "' + b"m" * 60_000 + b'"}'),
        ("nested 65 deep", b'{"action": "status", "generation": 1, "x": ' + deep(65) + b"}"),
        ("nested 1000 deep", b'{"action": "status", "generation": 1, "x": ' + deep(1000) + b"}"),
        ("duplicate action, the last one wrong", b'{"action": "acquire", "action": 1}'),
    ]:
        yield case(name, 400, content)
    yield case("text/plain", 415, acquire, headers={"content-type": "text/plain"})
    yield case("no content type", 415, acquire, headers={"content-type": ""})
    yield case("no key", 401, acquire, auth="none")
    yield case("an unknown key", 401, acquire, auth="wrong")
    yield case(
        "an owner header that is malformed",
        400,
        acquire,
        headers={"x-omniroute-lease-owner": "vlo_short"},
    )
    yield case(
        "an owner header of 400 characters",
        400,
        acquire,
        headers={"x-omniroute-lease-owner": "vlo_" + "a" * 400},
    )
    yield case(
        "an owner header over the header limit",
        431,
        acquire,
        headers={"x-omniroute-lease-owner": "vlo_" + "a" * 9000},
    )
    yield case("an unknown model", 503, b'{"action": "acquire", "model": "no-such/model"}')


# --- the WebSocket --------------------------------------------------------------------------


@dataclass(frozen=True)
class SocketCase:
    """One hostile handshake: refused with ``status`` (403 unless told)."""

    name: str
    path: str = "/ws/dashboard/"
    origin: str | None = "@OWN@"
    headers: dict[str, str] = field(default_factory=dict)
    status: int = 403


SOCKET_CASES = [
    SocketCase("no session"),
    SocketCase("no origin", origin=None),
    SocketCase("another origin", origin="http://evil.example"),
    SocketCase("the same host on another port", origin="http://127.0.0.1:1"),
    SocketCase("the origin null", origin="null"),
    SocketCase("an origin with a path", origin="@OWN@/admin/"),
    SocketCase("an origin of 8 000 characters", origin="http://" + "o" * 8000),
    SocketCase("a forged session cookie", headers={"Cookie": "sessionid=forged"}),
    SocketCase(
        "a session cookie of 6 000 characters", headers={"Cookie": "sessionid=" + "s" * 6000}
    ),
    SocketCase("a cookie header of garbage", headers={"Cookie": ';;;==;%%"sessionid'}),
    SocketCase("an unknown path", path="/ws/other/"),
    SocketCase("an unknown path, no origin", path="/ws/other/", origin=None),
    SocketCase("a path under the dashboard's", path="/ws/dashboard/extra/"),
    SocketCase("the proxy's path", path="/v1/chat/completions"),
    SocketCase("the root", path="/"),
    SocketCase("a path of 8 000 characters", path="/ws/" + "p" * 8000),
    SocketCase("a path with a NUL", path="/ws/a%00b/"),
]


# --- the cases, run ---------------------------------------------------------------------------

HTTP_CASES = [
    *(case for surface in SURFACES for case in v1_cases(surface)),
    *v1_specific_cases(),
    *management_cases(),
    *lease_cases(),
]
SURFACE_OF = {surface.name: surface for surface in SURFACES}


@dataclass
class Routes:
    """The module's routes: one per wire format, a manage-less client key, a lease key."""

    openai: Route
    anthropic: Route
    leased: Route
    client_key: str
    lease_key: str

    def for_surface(self, name: str) -> Route:
        if name == LEASE:
            return self.leased
        return self.anthropic if name == MESSAGES_API.name else self.openai


@pytest.fixture(scope="module")
def routes(gateway: Gateway, fake: FakeUpstream) -> Routes:
    openai = make_route(gateway, fake)
    anthropic = make_route(gateway, fake, wire_format=ANTHROPIC)
    leased = make_route(gateway, fake)  # a lease key's connections serve only managed requests
    client = gateway.post("/api/keys/", {"name": f"corpus-{secrets.token_hex(3)}"})["key"]
    lease = gateway.post(
        "/api/keys/",
        {
            "name": f"corpus-lease-{secrets.token_hex(3)}",
            "scopes": ["lease:exclusive"],
            "allowed_connections": leased.connections,
            "allowed_models": [f"{leased.provider}/*"],
        },
    )["key"]
    return Routes(openai, anthropic, leased, client, lease)


def _authorization(case: Case, gateway: Gateway, routes: Routes, route: Route) -> dict[str, str]:
    keys: dict[str, Callable[[], str | None]] = {
        "key": lambda: f"Bearer {_key_for(case, gateway, routes, route)}",
        "none": lambda: None,
        "wrong": lambda: "Bearer sk-omr-" + "0" * 40,
        "client": lambda: f"Bearer {routes.client_key}",
    }
    value = keys[case.auth]() if case.auth in keys else case.auth
    return {} if value is None else {"authorization": value}


def _key_for(case: Case, gateway: Gateway, routes: Routes, route: Route) -> str:
    if case.surface == MANAGEMENT:
        return gateway.manage_key
    if case.surface == LEASE:
        return routes.lease_key
    return route.key


def _wire_format(case: Case) -> str:
    return ANTHROPIC if case.surface == MESSAGES_API.name else OPENAI


def _upstream_calls(fake: FakeUpstream, route: Route) -> int:
    return len([r for r in records(fake, route, path="") if r.method == "POST"])


@pytest.mark.parametrize("case", HTTP_CASES, ids=[case.id for case in HTTP_CASES])
def test_bad_http_input_gets_a_clean_answer(
    gateway: Gateway, fake: FakeUpstream, routes: Routes, case: Case
) -> None:
    route = routes.for_surface(case.surface)
    surface = SURFACE_OF.get(case.surface)
    path = case.path or (surface.path if surface else "")
    content = case.content.replace(MODEL, route.model().encode()).replace(
        PROVIDER, route.provider.encode()
    )
    headers = {**case.headers, **_authorization(case, gateway, routes, route)}
    if "content-type" not in headers and content:
        headers["content-type"] = "application/json"
    headers = {k: v for k, v in headers.items() if v != ""}
    before = _upstream_calls(fake, route)

    response, seconds = timed(
        httpx.request,
        case.method,
        f"{gateway.url}{path}",
        content=content,
        headers=headers,
        timeout=10,
    )

    if case.status < 300:
        assert response.status_code == case.status, response.text[:300]
    else:
        error = assert_wire_error(response, case.status, _wire_format(case))
        if case.surface == LEASE and case.status in (400, 401, 415):
            assert str(error["code"]).startswith("LEASE_"), error
    assert _upstream_calls(fake, route) - before == (1 if case.upstream_due else 0)
    assert seconds < ANSWER_SECONDS, f"answered in {seconds:.2f} s"


@pytest.mark.parametrize("case", SOCKET_CASES, ids=[f"{SOCKET}: {c.name}" for c in SOCKET_CASES])
def test_bad_socket_handshakes_are_refused(gateway: Gateway, case: SocketCase) -> None:
    headers = dict(case.headers)
    if case.origin is not None:
        headers["Origin"] = case.origin.replace("@OWN@", gateway.url)
    url = gateway.url.replace("http://", "ws://") + case.path

    def handshake() -> None:
        with pytest.raises(InvalidHandshake) as refused:
            connect(url, additional_headers=headers, open_timeout=5)
        assert isinstance(refused.value, InvalidStatus), refused.value
        assert refused.value.response.status_code == case.status

    _, seconds = timed(handshake)
    assert seconds < ANSWER_SECONDS, f"answered in {seconds:.2f} s"


def test_the_corpus_covers_every_surface() -> None:
    counts = Counter(case.surface for case in HTTP_CASES)
    counts[SOCKET] = len(SOCKET_CASES)
    print("\nbad-input corpus, cases per surface:", dict(counts), "total", sum(counts.values()))
    assert sum(counts.values()) >= 200
    for surface in (*SURFACE_OF, MANAGEMENT, LEASE, SOCKET):
        assert counts[surface] >= 15, surface
