"""The corpus's WebSocket handshakes."""

from __future__ import annotations

from dataclasses import dataclass, field


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
