"""What a box's credential proxy reaches, and for how long it holds a client: the second
custody pass. Each test is an attack the proxy before it let through: a box read another
box's model traffic at `<its ANTHROPIC_BASE_URL>/_stub/turns`; the Band key went to a
model API on the same host; 300 half-sent heads stayed open; a key written in two halves
300 ms apart after a 101 reached the client. All traffic stays on 127.0.0.1: real
proxies, a real LLM stub, h11 echo upstreams that record what they receive."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from bandkit import processes
from bandkit.demo.brains import Endpoint, wire
from bandkit.kit.provision import ProvisionRequest
from bandkit.llm import service
from bandkit.proxies import keyproxy
from bandkit.proxies.wire import MAX_CLIENTS
from bandkit.runtimes import boxnet
from bandkit.runtimes.base import Secret
from examples.docker_demo.cast import Role
from tests.llm.conftest import SCRIPTS
from tests.security.conftest import (
    CANARY,
    PLACEHOLDER,
    WAIT_S,
    Box,
    EchoUpstream,
    exchange,
    run_keyproxy,
    status,
)
from tests.support.wait import wait_for

PROMPT = "box B's confidential design notes 5c1e"


def _target(url: str, path: str) -> tuple[int, str]:
    """(port, target) of `path` under a rewritten endpoint URL (the token prefix kept)."""
    parts = urlsplit(url)
    return parts.port or 0, parts.path.rstrip("/") + path


def _raw_get(url: str, path: str, **headers: str) -> bytes:
    port, target = _target(url, path)
    lines = [f"GET {target} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return exchange(port, ("\r\n".join(lines) + "\r\n\r\n").encode())


# -- 1. a sandbox read other sandboxes' model traffic through its own LLM proxy


@pytest.fixture
def llm_stub(tmp_path: Path) -> Iterator[tuple[service.RunRecord, str]]:
    """The real stub as `invoke llm.up` runs it; (its record, its anthropic key)."""
    run_dir = tmp_path / "llm"
    record, _ = service.up(run_dir, scripts=[SCRIPTS])
    keys = dict(
        line.split("=", 1)
        for line in (run_dir / service.KEY_FILE).read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    try:
        yield record, keys["anthropic"]
    finally:
        service.down(run_dir)


def _llm_box(root: Path, url: str, key: str, placeholder: str) -> dict[str, str]:
    scopes = boxnet.key_scopes("ANTHROPIC_BASE_URL", url)
    root.mkdir(parents=True)
    injection = boxnet.Injection(scopes, placeholder, key)
    return boxnet.start_proxy(root, None, {"ANTHROPIC_BASE_URL": url}, [injection])


def test_a_box_reads_no_other_box_turns_through_its_llm_proxy(
    llm_stub: tuple[service.RunRecord, str], tmp_path: Path
) -> None:
    record, key = llm_stub
    box_a = _llm_box(tmp_path / "a", record.url, key, "sk-ant-placeholder-a")
    box_b = _llm_box(tmp_path / "b", record.url, key, "sk-ant-placeholder-b")
    try:
        said = httpx.post(  # box B's agent: its prompt, the key swapped in on the wire
            box_b["ANTHROPIC_BASE_URL"] + "/v1/messages",
            headers={"x-api-key": "sk-ant-placeholder-b", "anthropic-version": "2023-06-01"},
            json={
                "model": "stub-pm",
                "max_tokens": 8,
                "messages": [{"role": "user", "content": PROMPT}],
            },
            timeout=WAIT_S,
        )
        assert said.status_code != 401, said.text  # the stub accepted the swapped key
        base = box_a["ANTHROPIC_BASE_URL"]
        for path in (
            "/_stub/turns",
            "/_stub/turns?agent=pm",
            "/_stub/health",
            "/",
            "/_stub/page.js",
            "/login",
            "/v1/messages/../../_stub/turns",
            "/v1/messages/%2e%2e/%2e%2e/_stub/turns",
            "/v1/messages/..%2f..%2f_stub/turns",
            "/v1//../_stub/turns",
        ):
            answer = _raw_get(base, path, **{"x-api-key": "sk-ant-placeholder-a"})
            assert status(answer) == 403, (path, answer[:200])
            assert b"agent API paths" in answer  # the proxy's own refusal
            assert PROMPT.encode() not in answer
            assert b"5c1e" not in answer
        # box A's own model calls still go through
        own = httpx.post(
            base + "/v1/messages/count_tokens",
            headers={"x-api-key": "sk-ant-placeholder-a", "anthropic-version": "2023-06-01"},
            json={"model": "stub-pm", "messages": [{"role": "user", "content": "hi"}]},
            timeout=WAIT_S,
        )
        assert own.status_code == 200, own.text
    finally:
        for root in (tmp_path / "a", tmp_path / "b"):
            _stop(root)


def _stop(root: Path) -> None:
    processes.terminate_tagged(boxnet.proxy_tag(root), grace_s=5)


PLATFORM_REFUSED = [
    "/api/v1/me/agents",  # the human API: an agent key has no business there
    "/api/v1/me/chats/x/messages",
    "/_emulator/health",  # control routes
    "/_emulator/state",
    "/",  # pages
    "/login",
    "/rooms/r1/feed",
    "/api/v1/agentx",
    "/api/v1/socket/websocket",  # the socket lives on the socket route only
    "/api/v1/agent/../me/agents",
    "/api/v1/agent/%2e%2e/me/agents",
    "/api/v1/agent/%2E%2E%2Fme%2Fagents",
    "/api/v1/agent//me",
    "/api/v1/agent/./me",
    "/api/v1/agent\\..\\me",
    "/api/v1/agent/me#/../../me/agents",
]


@pytest.mark.parametrize("path", PLATFORM_REFUSED)
def test_the_platform_proxy_forwards_only_the_agent_api(
    box_a: Box, echo: EchoUpstream, path: str
) -> None:
    answer = _raw_get(box_a.urls["BAND_REST_URL"], path, **{"X-API-Key": PLACEHOLDER})
    assert status(answer) == 403, answer[:200]
    assert echo.connections == 0  # refused before an upstream connection is opened
    assert echo.received() == b""


def test_the_socket_route_forwards_only_the_socket(box_a: Box, echo: EchoUpstream) -> None:
    ws = box_a.urls["BAND_WS_URL"]
    socket_path = urlsplit(ws).path
    root = ws[: len(ws) - len("/api/v1/socket/websocket")]
    for path in ("/api/v1/agent/me", "/_emulator/health", "/api/v1/socket/longpoll"):
        assert status(_raw_get(root, path, **{"X-API-Key": PLACEHOLDER})) == 403, path
    assert echo.received() == b""
    answer = _raw_get(root, "/api/v1/socket/websocket?vsn=2.0.0", **{"X-API-Key": PLACEHOLDER})
    assert status(answer) == 200  # the echo answers a plain GET on the socket path
    assert echo.requests[0][1] == b"/api/v1/socket/websocket?vsn=2.0.0"
    assert socket_path.endswith("/api/v1/socket/websocket")


def test_the_llm_proxies_forward_only_the_model_routes(tmp_path: Path) -> None:
    with EchoUpstream() as upstream:
        url = upstream.url
        env = {"ANTHROPIC_BASE_URL": url, "OPENAI_BASE_URL": f"{url}/v1"}
        scopes = boxnet.key_scopes("ANTHROPIC_BASE_URL", url)
        scopes += boxnet.key_scopes("OPENAI_BASE_URL", f"{url}/v1")
        urls = boxnet.start_proxy(tmp_path, None, env, [boxnet.Injection(scopes, "p-key", "k")])
        try:
            allowed = {
                "ANTHROPIC_BASE_URL": [
                    "/v1/messages",
                    "/v1/messages/count_tokens?beta=true",
                    "/v1/models",
                ],
                "OPENAI_BASE_URL": ["/responses", "/chat/completions", "/models"],
            }
            refused = {
                "ANTHROPIC_BASE_URL": ["/_stub/turns", "/", "/v1/files", "/v1/responses", "/login"],
                "OPENAI_BASE_URL": ["/files", "/../_stub/turns", "/_stub/health", "/messages"],
            }
            for name, paths in allowed.items():
                for path in paths:
                    assert status(_raw_get(urls[name], path)) == 200, (name, path)
            seen = len(upstream.requests)
            for name, paths in refused.items():
                for path in paths:
                    assert status(_raw_get(urls[name], path)) == 403, (name, path)
            assert len(upstream.requests) == seen
        finally:
            _stop(tmp_path)


# -- 4. keys were scoped by host name only: two upstreams on 127.0.0.1 shared the Band key


def test_a_model_api_on_the_platform_host_never_gets_the_band_key(tmp_path: Path) -> None:
    """The platform and the LLM API both on 127.0.0.1, on two ports; the keys are scoped
    as provisioning (the Band key) and the demo's brains (the model key) scope them."""
    llm_key = "sk-ant-canary-model-key-9d41b7e2c05a"
    with EchoUpstream() as platform, EchoUpstream() as model:
        request = ProvisionRequest(
            name="box", description="a box", workspace=tmp_path, rest_url=platform.url
        )
        band = Secret("BAND_API_KEY", ("127.0.0.1",), CANARY, PLACEHOLDER, request.key_scopes())
        endpoints = {
            Role.PM: Endpoint("anthropic", model.url, llm_key),
            Role.DEV: Endpoint("openai", f"{model.url}/v1", "sk-dev-unused"),
            Role.ARCHITECT: Endpoint("openai", f"{model.url}/v1", "sk-arch-unused"),
        }
        brains = wire("stub", endpoints, models={})
        [llm] = brains.secrets[Role.PM]
        env = {"BAND_REST_URL": platform.url, **brains.env[Role.PM]}
        root = tmp_path / "box"
        root.mkdir()
        injections = [boxnet.Injection.of(band), boxnet.Injection.of(llm)]
        urls = boxnet.start_proxy(root, None, env, injections)
        try:
            anthropic_url = urls["ANTHROPIC_BASE_URL"]
            for header in ({"x-api-key": PLACEHOLDER}, {"authorization": f"Bearer {PLACEHOLDER}"}):
                httpx.post(anthropic_url + "/v1/messages", headers=header, json={}, timeout=WAIT_S)
            httpx.post(
                anthropic_url + "/v1/messages", headers={"x-api-key": llm.placeholder}, json={}
            )
            httpx.get(
                urls["BAND_REST_URL"] + "/api/v1/agent/me", headers={"x-api-key": llm.placeholder}
            )
            httpx.get(
                urls["BAND_REST_URL"] + "/api/v1/agent/me", headers={"x-api-key": PLACEHOLDER}
            )
        finally:
            _stop(root)
        to_model, to_platform = model.received(), platform.received()
    assert CANARY.encode() not in to_model  # the outcome: the Band key never reached it
    assert to_model.count(PLACEHOLDER.encode()) == 2  # passed on as the placeholder it was
    assert to_model.count(llm_key.encode()) == 1  # its own key, under its own placeholder
    assert llm_key.encode() not in to_platform
    assert llm.placeholder.encode() in to_platform
    assert to_platform.count(CANARY.encode()) == 1


def test_a_key_is_swapped_only_below_its_path_prefixes() -> None:
    """The second layer: on a route that forwards everything, a key scoped to the agent
    API is still not swapped in for another path."""
    import h11

    route = keyproxy.Route(
        "127.0.0.1", 80, False, ((b"pm", b"the-key", (b"/api/v1/agent",)),), (b"/",)
    )
    for path, expected in ((b"/api/v1/agent/me", b"the-key"), (b"/v1/messages", b"pm")):
        request = h11.Request(
            method="GET", target=path, headers=[("host", "x"), ("x-api-key", "pm")]
        )
        headers = dict(keyproxy.forward_headers(request, route, False, path))
        assert headers[b"x-api-key"] == expected, path


# -- 2. no head deadline, no connection cap


def _half_head(port: int, token: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
    sock.sendall(f"GET /{token}/api/v1/agent/me HTTP/1.1\r\nHost: x\r\nX-Half".encode())
    return sock


def _closed(sock: socket.socket) -> bytes | None:
    """What the proxy sent before closing `sock`, or None while it sends nothing.

    The proxy answers a connection it drops (408, 503) and then closes it, in two steps:
    once anything is readable, read to the end, so an answer seen before its close is kept
    (a non-blocking read loop had returned None between the two and dropped the answer)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return None
    received = b""
    sock.settimeout(WAIT_S)  # an answer without a close fails here, as it should
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:  # closed with our half head unread: a reset
        return received or b"<reset>"
    return received or b"<closed>"


def _get_me(port: int, token: str) -> int:
    head = f"GET /{token}/api/v1/agent/me HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    return status(exchange(port, head.encode()))


def test_half_sent_heads_are_closed_at_the_deadline(echo: EchoUpstream, tmp_path: Path) -> None:
    proxy = run_keyproxy(tmp_path, echo, head_timeout_s=1.0)
    [port] = proxy.ports
    try:
        started = time.monotonic()
        halves = [_half_head(port, proxy.token) for _ in range(60)]
        idle = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)  # sends nothing
        assert _get_me(port, proxy.token) == 200  # a whole request meanwhile: served
        closed = wait_for(
            lambda: all(_closed(s) is not None for s in [*halves, idle]) and halves,
            timeout=WAIT_S,
            what="the proxy to close every half-sent head",
        )
        assert closed
        assert time.monotonic() - started >= 1.0
        assert _get_me(port, proxy.token) == 200
        assert echo.requests
        assert all(r[1] == b"/api/v1/agent/me" for r in echo.requests)
    finally:
        proxy.stop()


def test_the_timed_out_head_gets_408_and_the_idle_one_nothing(
    echo: EchoUpstream, tmp_path: Path
) -> None:
    proxy = run_keyproxy(tmp_path, echo, head_timeout_s=1.5)  # its bytes land well before
    [port] = proxy.ports
    try:
        half = _half_head(port, proxy.token)
        idle = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)
        said_half = wait_for(lambda: _closed(half), timeout=WAIT_S, what="the half head closed")
        said_idle = wait_for(lambda: _closed(idle), timeout=WAIT_S, what="the idle one closed")
        assert said_half.startswith(b"HTTP/1.1 408 ")
        assert said_idle == b"<closed>"
        assert echo.received() == b""
    finally:
        proxy.stop()


def test_connections_over_the_per_box_cap_are_refused(echo: EchoUpstream, tmp_path: Path) -> None:
    """300 half-sent heads at once: `MAX_CLIENTS` are held (until the deadline), the
    rest refused at once, and a whole request below the cap is still served."""
    proxy = run_keyproxy(tmp_path, echo)  # the real limits: 256 clients, 30 s heads
    [port] = proxy.ports
    cap = MAX_CLIENTS
    assert cap == 256
    try:
        held = [_half_head(port, proxy.token) for _ in range(cap - 1)]
        wait_for(lambda: _get_me(port, proxy.token) == 200, timeout=WAIT_S, what="a request served")
        held.append(_half_head(port, proxy.token))  # now at the cap
        wait_for(
            lambda: _closed(held[-1]) is None and len(held) == cap,
            timeout=WAIT_S,
            what="the cap-th connection held",
        )
        over = [_half_head(port, proxy.token) for _ in range(300 - cap)]
        refused = [wait_for(lambda s=s: _closed(s), timeout=WAIT_S, what="a refusal") for s in over]
        # 503 said when the reset does not overtake it: closed unread either way
        assert all(r.startswith(b"HTTP/1.1 503 ") or r == b"<reset>" for r in refused)
        assert any(r.startswith(b"HTTP/1.1 503 ") for r in refused), refused[:2]
        assert all(_closed(s) is None for s in held)  # the held ones are still open
        for sock in held[:10]:
            sock.close()  # slots come back as clients leave
        wait_for(lambda: _get_me(port, proxy.token) == 200, timeout=WAIT_S, what="served again")
    finally:
        proxy.stop()


# -- 3. after a 101 a partial key was released after 50 ms


def _upgrade(box: Box, until: bytes = b"\n", timeout: float = WAIT_S) -> bytes:
    """Upgrade through the box's socket route; what the client receives until it ends
    with `until` (or the proxy closes)."""
    port, target = _target(box.urls["BAND_WS_URL"], "")
    head = (
        f"GET {target}?vsn=2.0.0 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
        "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nX-API-Key: {PLACEHOLDER}\r\n\r\n"
    )
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode())
        while chunk := sock.recv(65536):
            received += chunk
            if received.partition(b"\r\n\r\n")[2].endswith(until):
                break
    return received


def _frame(opcode: int, payload: bytes, *, fin: bool = True) -> bytes:
    """A server frame (unmasked); payloads up to 125 bytes."""
    return bytes([(0x80 if fin else 0) | opcode, len(payload)]) + payload


def test_a_key_written_in_two_halves_300_ms_apart_after_a_101_stays_masked(
    box_a: Box, echo: EchoUpstream
) -> None:
    echo.split_after = 0.3
    received = _upgrade(box_a)
    assert received.startswith(b"HTTP/1.1 101 ")
    assert received.endswith(b"sent:" + b"*" * len(CANARY) + b"\n")
    assert CANARY[: EchoUpstream.SPLIT_AT].encode() not in received


def test_a_key_cut_off_by_the_end_of_the_stream_is_masked(box_a: Box, echo: EchoUpstream) -> None:
    echo.split_after, echo.close_after_half = 0.0, True
    received = _upgrade(box_a)
    assert received.endswith(b"sent:" + b"*" * EchoUpstream.SPLIT_AT)
    assert CANARY[: EchoUpstream.SPLIT_AT].encode() not in received


def test_a_key_split_across_two_websocket_frames_300_ms_apart_stays_masked(
    box_a: Box, echo: EchoUpstream
) -> None:
    key = CANARY.encode()
    first = _frame(0x1, b"hello " + key[:20], fin=False)
    second = _frame(0x0, key[20:] + b" bye")
    echo.ws_script = [(0.0, first), (0.3, second)]
    received = _upgrade(box_a, until=b" bye")
    stream = received.split(b"\r\n\r\n", 1)[1]
    masked = b"*" * len(key)
    assert stream == first[:2] + b"hello " + masked[:20] + second[:2] + masked[20:] + b" bye"


def test_a_ping_ending_like_a_key_is_not_held_back(box_a: Box, echo: EchoUpstream) -> None:
    """A ping's payload is the server's random bytes; one that happens to end with the
    key's first byte reaches the client whole (held, the pong would never be sent and the
    server would drop the socket)."""
    ping = _frame(0x9, b"\x01\x02\x03" + CANARY[:1].encode())
    echo.ws_script = [(0.0, ping)]
    received = _upgrade(box_a, until=ping, timeout=5.0)  # held back: the recv times out
    assert received.endswith(ping)


def test_the_frame_scrubber_keeps_frames_whole_one_byte_at_a_time() -> None:
    """Fed a byte at a time: an extended-length binary frame, a key split over a text
    frame and a continuation with a ping between them, a masked close. Out come the same
    frames, byte for byte, with only the key's bytes replaced."""
    key = CANARY.encode()
    big = bytes([0x82, 126]) + (300).to_bytes(2, "big") + b"x" * 300
    part1 = _frame(0x1, b"a " + key[:30], fin=False)
    ping = _frame(0x9, b"\x01\x02\x03" + key[:1])
    part2 = _frame(0x0, key[30:] + b" z")
    close = bytes([0x88, 0x80 | 6]) + b"mask" + b"\x03\xe8ok"
    stream = big + part1 + ping + part2 + close
    scrub = keyproxy.FrameScrubber((key,))
    out = b"".join(scrub.feed(stream[i : i + 1]) for i in range(len(stream))) + scrub.flush()
    assert out == stream.replace(key[:30], b"*" * 30).replace(key[30:] + b" z", b"*" * 13 + b" z")
    assert key not in out
    assert key[:30] not in out


def test_every_pinned_endpoint_kind_has_its_api_paths() -> None:
    """A new kind of endpoint (an LLM env) without its paths would forward nothing."""
    assert set(boxnet.API_PATHS) == set(boxnet.SCHEMES)
    assert boxnet.api_paths("OPENAI_BASE_URL", "https://gw.example/openai/v1") == (
        "/openai/v1/responses",
        "/openai/v1/chat/completions",
        "/openai/v1/models",
    )
    assert boxnet.api_paths("BAND_WS_URL", "wss://p.example/api/v1/socket/websocket") == (
        "/api/v1/socket/websocket",
    )
    assert boxnet.key_scopes("ANTHROPIC_BASE_URL", "https://API.anthropic.com") == (
        "https://api.anthropic.com:443/v1/messages",
        "https://api.anthropic.com:443/v1/models",
    )
