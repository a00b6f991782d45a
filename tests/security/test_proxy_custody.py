"""The credential proxy against a hostile sandbox: one test per attack, each of which the
old proxy (no client authentication, substring swaps in every header, hand-written
parsing, upstream from the workspace) failed. All traffic stays on 127.0.0.1: the
proxies, an h11 echo upstream that records every byte it receives, raw clients."""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from bandkit import processes
from bandkit.proxies import keyproxy
from bandkit.proxies.wire import MalformedRequest
from bandkit.runtimes import boxnet
from tests.security.conftest import (
    CANARY,
    CANARY_B,
    PLACEHOLDER,
    WAIT_S,
    Box,
    EchoUpstream,
    exchange,
    pinned_env,
    start_box,
    status,
)


def _get(box: Box, path: str = "/api/v1/agent/me", **headers: str) -> httpx.Response:
    return httpx.get(
        box.urls["BAND_REST_URL"] + path, headers={"X-API-Key": PLACEHOLDER, **headers}
    )


def _upstream_headers(echo: EchoUpstream) -> list[tuple[bytes, bytes]]:
    assert len(echo.requests) == 1, echo.requests
    return echo.requests[0][2]


# -- 2. anyone could use any box's key


def test_the_own_token_gets_the_key_to_the_pinned_upstream(box_a: Box, echo: EchoUpstream) -> None:
    response = _get(box_a)
    assert response.status_code == 200
    method, target, headers, _ = echo.requests[0]
    assert (method, target) == (b"GET", b"/api/v1/agent/me")  # the token is stripped
    assert (b"x-api-key", CANARY.encode()) in headers
    assert box_a.token.encode() not in echo.received()


@pytest.mark.parametrize(
    "target",
    [
        "/api/v1/agent/me",  # no token at all: any local process
        "/{guess}/api/v1/agent/me",  # a guessed token
        "/{short}/api/v1/agent/me",  # a prefix of the right one
        "/{token}x/api/v1/agent/me",  # the right one with more after it
        "/api/v1/agent/me?t={token}",  # the token elsewhere than the path prefix
    ],
)
def test_a_client_without_the_token_is_refused(box_a: Box, echo: EchoUpstream, target: str) -> None:
    path = target.format(guess=secrets.token_urlsafe(32), short=box_a.token[:-1], token=box_a.token)
    head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {PLACEHOLDER}\r\n\r\n"
    assert status(exchange(box_a.port, head.encode())) == 403
    assert echo.connections == 0  # refused before any upstream connection
    assert echo.received() == b""


def test_another_box_token_is_refused_both_ways(box_a: Box, box_b: Box, echo: EchoUpstream) -> None:
    assert box_a.token != box_b.token
    assert box_a.port != box_b.port
    for port, token in ((box_a.port, box_b.token), (box_b.port, box_a.token)):
        head = f"GET /{token}/api/v1/agent/me HTTP/1.1\r\nHost: x\r\nX-API-Key: {PLACEHOLDER}"
        assert status(exchange(port, (head + "\r\n\r\n").encode())) == 403
    assert echo.received() == b""
    assert _get(box_b).status_code == 200  # each box still reaches its own key
    assert (b"x-api-key", CANARY_B.encode()) in _upstream_headers(echo)
    assert CANARY.encode() not in echo.received()


def test_every_keep_alive_request_needs_the_token(box_a: Box, echo: EchoUpstream) -> None:
    one = f"/{box_a.token}/api/v1/agent/one"
    good = f"GET {one} HTTP/1.1\r\nHost: x\r\nX-API-Key: {PLACEHOLDER}\r\n\r\n"
    bad = f"GET /two HTTP/1.1\r\nHost: x\r\nX-API-Key: {PLACEHOLDER}\r\n\r\n"
    response = exchange(box_a.port, (good + bad).encode())
    assert response.startswith(b"HTTP/1.1 200 ")
    assert response.endswith(
        b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    assert [r[1] for r in echo.requests] == [b"/api/v1/agent/one"]


# -- 3. the key was swapped into every header, and echoes carried it back


def test_only_the_credential_header_carries_the_key_and_no_echo_returns_it(
    box_a: Box, echo: EchoUpstream
) -> None:
    response = _get(
        box_a,
        **{
            "X-Request-Id": PLACEHOLDER,
            "X-Forward-Me": f"Bearer {PLACEHOLDER}",
            "User-Agent": f"agent/{PLACEHOLDER}",
            "Cookie": f"k={PLACEHOLDER}",
        },
    )
    assert response.status_code == 200
    headers = _upstream_headers(echo)
    carrying = [name for name, value in headers if CANARY.encode() in value]
    assert carrying == [b"x-api-key"]
    assert (b"x-request-id", PLACEHOLDER.encode()) in headers
    assert (b"x-forward-me", f"Bearer {PLACEHOLDER}".encode()) in headers
    # The upstream echoed the key (x-echo-x-api-key and the body): none of it comes back.
    raw = json.dumps(dict(response.headers)) + response.text
    assert CANARY not in raw
    assert response.headers["x-echo-x-api-key"] == "*" * len(CANARY)


def test_authorization_is_swapped_only_when_exactly_bearer_placeholder(
    box_a: Box, echo: EchoUpstream
) -> None:
    values = {
        f"Bearer {PLACEHOLDER}": f"Bearer {CANARY}",
        f"bearer {PLACEHOLDER}": f"bearer {PLACEHOLDER}",
        f"Basic {PLACEHOLDER}": f"Basic {PLACEHOLDER}",
        f"Bearer {PLACEHOLDER}x": f"Bearer {PLACEHOLDER}x",
        PLACEHOLDER: PLACEHOLDER,
    }
    for sent, expected in values.items():
        echo.reset()
        url = box_a.urls["BAND_REST_URL"] + "/api/v1/agent/x"
        response = httpx.get(url, headers={"Authorization": sent, "X-API-Key": "mine"})
        assert response.status_code == 200
        headers = dict(_upstream_headers(echo))
        assert headers[b"authorization"] == expected.encode()
        assert headers[b"x-api-key"] == b"mine"  # not the placeholder: passed as is


def test_a_duplicate_credential_header_is_refused(box_a: Box, echo: EchoUpstream) -> None:
    head = (
        f"GET /{box_a.token}/api/v1/agent/x HTTP/1.1\r\nHost: x\r\nX-API-Key: {PLACEHOLDER}\r\n"
        f"X-API-Key: {PLACEHOLDER}\r\n\r\n"
    )
    assert status(exchange(box_a.port, head.encode())) == 400
    assert echo.received() == b""


def test_a_key_split_across_response_chunks_is_still_masked(box_a: Box, echo: EchoUpstream) -> None:
    key = CANARY.encode()
    echo.chunked_body = [b"start " + key[:7], key[7:20], key[20:] + b" end", b"x" * 10]
    response = _get(box_a)
    assert response.status_code == 200
    assert CANARY not in response.text
    assert response.text == "start " + "*" * len(CANARY) + " end" + "x" * 10


# -- 4. hand-written parsing smuggled requests


def _smuggling(token: str) -> dict[str, bytes]:
    t = f"/{token}/api/v1/agent"  # an API path: the refusals are about the head
    hidden = f"GET {t}/admin HTTP/1.1\r\nHost: x\r\nX-API-Key: {PLACEHOLDER}\r\n\r\n"
    key = f"X-API-Key: {PLACEHOLDER}\r\n"
    post = f"POST {t}/x HTTP/1.1\r\nHost: x\r\n{key}"
    cases = {
        "bare-lf": f"GET {t}/x HTTP/1.1\nHost: x\n{key.strip()}\n\n",
        "bare-lf-one-line": f"GET {t}/x HTTP/1.1\r\nHost: x\nX-A: 1\r\n{key}\r\n",
        "obs-fold": f"GET {t}/x HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n{key}\r\n",
        "cl-and-te": f"{post}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        + hidden,
        "duplicate-cl": f"{post}Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        "cl-list": f"{post}Content-Length: 5, 5\r\n\r\nhello",
        "cl-plus": f"{post}Content-Length: +5\r\n\r\nhello",
        "cl-hex": f"{post}Content-Length: 0x5\r\n\r\nhello",
        "cl-underscore": f"{post}Content-Length: 5_0\r\n\r\nhello",
        "cl-space": f"{post}Content-Length:  5\r\n\r\nhello",
        "te-list": f"{post}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + hidden,
        "te-xchunked": f"{post}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n" + hidden,
        "te-twice": f"{post}Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
        "0\r\n\r\n",
        "absolute-form": f"GET http://evil/ HTTP/1.1\r\nHost: evil\r\n{key}\r\n",
        "absolute-form-token": f"GET http://127.0.0.1{t}/x HTTP/1.1\r\nHost: x\r\n{key}\r\n",
        "connect": f"CONNECT host:443 HTTP/1.1\r\nHost: host:443\r\n{key}\r\n",
        "asterisk": f"OPTIONS * HTTP/1.1\r\nHost: x\r\n{key}\r\n",
        "upgrade-h2c": f"GET {t}/x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
        f"Upgrade: h2c\r\n{key}\r\n",
    }
    return {name: value.encode() for name, value in cases.items()}


SMUGGLING = list(_smuggling("t"))


@pytest.mark.parametrize("case", SMUGGLING)
def test_smuggling_heads_get_400_and_reach_no_upstream(
    box_a: Box, echo: EchoUpstream, case: str
) -> None:
    response = exchange(box_a.port, _smuggling(box_a.token)[case])
    assert status(response) == 400, response
    assert response.count(b"HTTP/1.1") == 1  # one answer, then the connection closed
    assert CANARY.encode() not in echo.received()
    assert echo.requests == []
    assert echo.connections == 0


@pytest.mark.parametrize("case", ["bare-lf", "obs-fold", "cl-and-te", "duplicate-cl", "cl-list"])
def test_the_raw_checks_refuse_what_h11_alone_accepts(case: str) -> None:
    """These refusals are the proxy's own: h11 parses each of these heads happily."""
    import h11

    head = _smuggling("t")[case]
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(head)
    assert isinstance(conn.next_event(), h11.Request)
    with pytest.raises(MalformedRequest):
        keyproxy.vet_head(head)


def test_a_valid_body_with_a_hidden_request_is_one_request(box_a: Box, echo: EchoUpstream) -> None:
    """The body is data: what it holds never becomes a second request upstream."""
    body = f"GET /{box_a.token}/api/v1/agent/admin HTTP/1.1\r\nHost: x\r\n\r\n"
    head = (
        f"POST /{box_a.token}/api/v1/agent/x HTTP/1.1\r\nHost: x\r\nX-API-Key: {PLACEHOLDER}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    response = exchange(box_a.port, (head + body).encode())
    assert status(response) == 200
    assert [(m, t) for m, t, _, _ in echo.requests] == [(b"POST", b"/api/v1/agent/x")]
    assert echo.requests[0][3] == body.encode()


def test_the_host_header_never_picks_the_upstream(box_a: Box, echo: EchoUpstream) -> None:
    response = _get(box_a, Host="evil.example:1")
    assert response.status_code == 200
    assert dict(_upstream_headers(echo))[b"host"] == f"127.0.0.1:{echo.port}".encode()


def test_a_websocket_upgrade_pipes_raw_and_masks_the_key(box_a: Box, echo: EchoUpstream) -> None:
    ws = box_a.urls["BAND_WS_URL"].removeprefix("ws://")
    port = int(ws.split("/", 1)[0].rsplit(":", 1)[1])
    path = "/" + ws.split("/", 1)[1]
    head = (
        f"GET {path}?vsn=2.0.0 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
        "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Sec-WebSocket-Extensions: permessage-deflate\r\nX-API-Key: {PLACEHOLDER}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as sock:
        sock.sendall(head.encode())
        received = b""
        while b"sent:" not in received or not received.endswith(b"\n"):
            chunk = sock.recv(65536)
            assert chunk, received
            received += chunk
        assert received.startswith(b"HTTP/1.1 101 ")
        assert received.endswith(b"sent:" + b"*" * len(CANARY) + b"\n")
        sock.sendall(b"raw frame bytes")
        echoed = b""
        while len(echoed) < len(b"raw frame bytes"):
            chunk = sock.recv(65536)
            assert chunk
            echoed += chunk
        assert echoed == b"raw frame bytes"
    _, target, headers, _ = echo.requests[0]
    assert target == b"/api/v1/socket/websocket?vsn=2.0.0"
    names = [n for n, _ in headers]
    assert b"sec-websocket-extensions" not in names  # frames stay readable for the mask
    assert (b"x-api-key", CANARY.encode()) in headers


# -- 5. the sandbox chose the upstream (band.yaml: any host, port, plain http)


def _hostile_workspace(root: Path, evil: EchoUpstream) -> Path:
    ws = root / "ws"
    ws.mkdir(parents=True)
    band = {
        "band": {
            "restUrl": f"http://127.0.0.1:{evil.port}",
            "wsUrl": f"ws://127.0.0.1:{evil.port}/api/v1/socket/websocket",
        },
        "credentials": {"source": "proxy-managed"},
    }
    (ws / "band.yaml").write_text(yaml.safe_dump(band))
    return ws


def test_a_workspace_band_yaml_never_moves_the_upstream(echo: EchoUpstream, tmp_path: Path) -> None:
    with EchoUpstream() as evil:
        ws = _hostile_workspace(tmp_path, evil)
        box = start_box(tmp_path / "box", pinned_env(echo), workspace=ws)
        try:
            assert _get(box).status_code == 200
        finally:
            box.stop()
        assert (b"x-api-key", CANARY.encode()) in _upstream_headers(echo)
        # Unpinned: production, which the 127.0.0.1 secret does not match: no proxy at all.
        assert start_box(tmp_path / "box2", {}, workspace=ws).urls == {}
        assert evil.connections == 0
        assert evil.received() == b""


def test_a_plain_http_upstream_off_loopback_is_refused_at_start(tmp_path: Path) -> None:
    env = {"BAND_REST_URL": "http://platform.example", "BAND_WS_URL": "wss://platform.example"}
    with pytest.raises(boxnet.ProxyError, match="loopback") as err:
        start_box(tmp_path / "box", env)
    assert CANARY not in str(err.value)
    assert not (tmp_path / "box" / "proxy.json").exists()
    # The proxy itself refuses it too, before it listens.
    config = {
        "token": secrets.token_urlsafe(32),
        "routes": [
            {
                "upstream": "http://10.1.2.3:80",
                "paths": ["/api/v1/agent"],
                "swaps": [[PLACEHOLDER, CANARY, ["/api/v1/agent"]]],
            }
        ],
    }
    done = subprocess.run(
        [sys.executable, "-m", "bandkit.proxies.keyproxy", str(tmp_path / "ports.json")],
        input=json.dumps(config),
        capture_output=True,
        text=True,
        timeout=WAIT_S * 3,
        check=False,
    )
    assert done.returncode == 2
    assert "refusing plain http:// upstream 10.1.2.3" in done.stderr
    assert CANARY not in done.stderr + done.stdout
    assert not (tmp_path / "ports.json").exists()


def test_ws_endpoint_follows_the_pinned_rest_origin() -> None:
    pinned = boxnet.pinned_endpoints({"BAND_REST_URL": "https://p.example:8443"})
    assert pinned["BAND_WS_URL"] == "wss://p.example:8443/api/v1/socket/websocket"
    assert boxnet.pinned_endpoints({})["BAND_REST_URL"].startswith("https://")


# -- the proxy process and what it leaves behind


def test_the_proxy_gets_a_minimal_environment_and_no_key_in_argv(
    echo: EchoUpstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BAND_API_KEY_USER", "user-key-canary-0123456789")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "operator-canary-0123456789")
    box = start_box(tmp_path / "box", pinned_env(echo))
    try:
        [pid] = box.pids()
        environ = processes.environ(pid) or ()
        names = {item.split(b"=", 1)[0].decode() for item in environ}
        assert names <= {"PYTHONPATH", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR", "BANDKIT_TAG"}
        blob = b"\0".join((*environ, *(processes.cmdline(pid) or ())))
        for secret in (CANARY, box.token, "user-key-canary", "operator-canary"):
            assert secret.encode() not in blob
    finally:
        box.stop()


def test_no_key_or_token_in_any_file_the_proxy_writes(echo: EchoUpstream, tmp_path: Path) -> None:
    box = start_box(tmp_path / "box", pinned_env(echo))
    try:
        assert _get(box).status_code == 200
        for case in _smuggling(box.token).values():
            exchange(box.port, case)
        exchange(box.port, b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
        ports = box.root / "proxy.json"
        assert oct(ports.stat().st_mode & 0o777) == "0o600"
    finally:
        box.stop()
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"proxy.json", "proxy.log"}
    for path in written:
        text = path.read_bytes()
        assert CANARY.encode() not in text, path
        assert box.token.encode() not in text, path


def test_a_planted_ports_file_link_is_replaced_not_followed(
    echo: EchoUpstream, tmp_path: Path
) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("untouched")
    root = tmp_path / "box"
    root.mkdir()
    (root / "proxy.tmp").symlink_to(target)  # the old proxy's temp name
    (root / "proxy.json").symlink_to(target)
    box = start_box(root, pinned_env(echo))
    try:
        assert target.read_text() == "untouched"
        assert not (root / "proxy.json").is_symlink()
        assert _get(box).status_code == 200
    finally:
        box.stop()
    (root / "proxy.log").unlink()
    (root / "proxy.log").symlink_to(target)
    with pytest.raises(boxnet.ProxyError, match="log"):
        start_box(root, pinned_env(echo))
    assert target.read_text() == "untouched"
