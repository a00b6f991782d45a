"""Who can read and act on the local platform: pages need the user, Host is checked,
agents cannot hand out power, key digests are compared in constant time, feeds are capped.

Each test here fails against the emulator as it was before these rules: open pages and
feeds, any `Host`, agents granting `owner`/`admin`, `==` on digests, unlimited feeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from bandkit.emulator import context
from bandkit.emulator.server import Emulator, EmulatorConfig
from tests.emulator.support import (
    PAGE_CALL,
    USER_KEY,
    EmulatorProcess,
    create_room,
    human_client,
    login_link,
    page_client,
    raw_client,
    register,
    sign_in,
    token_of,
)
from tests.support.wait import until

Start = Callable[..., Awaitable[Emulator]]
FOREIGN_HOSTS = ("evil.example:{port}", "rebind.test", "127.0.0.1:1", "localhost.evil:{port}")


@pytest_asyncio.fixture
async def start() -> AsyncIterator[Start]:
    running: list[Emulator] = []

    async def go(**overrides: Any) -> Emulator:
        emulator = Emulator(EmulatorConfig(**overrides), user_key=USER_KEY)
        await emulator.startup()
        running.append(emulator)
        return emulator

    yield go
    for emulator in running:
        await emulator.shutdown(2.0)


@pytest_asyncio.fixture
async def emu(start: Start) -> Emulator:
    return await start()


def _port(emu: Emulator) -> int:
    return int(emu.rest_url.rsplit(":", 1)[1])


# --- pages and feeds need the user ----------------------------------------------------------


async def test_pages_and_feeds_refuse_anyone_without_a_session(emu: Emulator) -> None:
    room = await create_room(human_client(emu.rest_url))
    agent = await register(human_client(emu.rest_url))
    for cookie in (None, "band_emulator_x=forged", f"band_emulator_{_port(emu)}=forged"):
        async with page_client(emu.rest_url, cookie) as client:
            for path in ("/", f"/rooms/{room}"):
                page = await client.get(path)
                assert page.status_code == 401, path
                assert "login link" in page.text
                assert room not in page.text
            for path in ("/feed", f"/rooms/{room}/feed", "/rooms/unknown/feed"):
                feed = await client.get(path)
                assert feed.status_code == 401, path
                assert feed.json()["error"]["code"] == "unauthorized"
    async with raw_client(emu.rest_url, agent.key) as as_agent:  # an agent key is not the user
        assert (await as_agent.get(f"/rooms/{room}/feed")).status_code == 401


async def test_a_login_link_works_once_and_sets_a_strict_http_only_cookie(emu: Emulator) -> None:
    link = await login_link(emu.rest_url)
    assert link.startswith(f"{emu.rest_url}/login#token=")  # a fragment: never sent
    assert USER_KEY not in link
    token = token_of(link)
    async with httpx.AsyncClient(base_url=emu.rest_url) as client:
        signed = await client.post("/login", data={"token": token})
        assert signed.status_code == 303
        assert signed.headers["location"] == "/"
        cookie = signed.headers["set-cookie"]
        name, value = cookie.split(";", 1)[0].split("=", 1)
        assert name == f"band_emulator_{_port(emu)}"
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/"} <= attributes
        assert token not in cookie
        assert USER_KEY not in cookie
        again = await client.post("/login", data={"token": token})
        assert again.status_code == 401
        assert "already used" in again.text
        assert "set-cookie" not in again.headers
        assert (await client.post("/login", data={"token": "guess"})).status_code == 401
        assert (await client.post("/login")).status_code == 401
    async with page_client(emu.rest_url, f"{name}={value}") as browser:
        assert (await browser.get("/")).status_code == 200


OPEN_REDIRECTS = (
    "//evil.example/",
    "https://evil.example/",
    "/\\evil.example",
    "/rooms/../../evil",
    "/rooms/x/../..//evil.example",
    "/rooms/x?next=//evil.example",
    "javascript:alert(1)",
    "/%2F%2Fevil.example",
    " /rooms/x",
    "",
)


async def test_a_login_link_lands_on_the_room_it_names_and_nowhere_else(emu: Emulator) -> None:
    room = await create_room(human_client(emu.rest_url), "Landing")
    async with raw_client(emu.rest_url) as client:
        minted = await client.post("/_emulator/login-link", params={"next": f"/rooms/{room}"})
        assert minted.status_code == 201, minted.text
        link = minted.json()["data"]["url"]
        assert link.startswith(f"{emu.rest_url}/login#token=")  # the target rides in the fragment
        assert link.endswith(f"&next=/rooms/{room}")
        for target in OPEN_REDIRECTS:  # the control API refuses to mint one
            refused = await client.post("/_emulator/login-link", params={"next": target})
            assert refused.status_code == 422, (target, refused.text)
    assert emu.login_url(f"/rooms/{room}").endswith(f"&next=/rooms/{room}")
    with pytest.raises(ValueError, match="cannot land"):
        emu.login_url("//evil.example/")
    async with httpx.AsyncClient(base_url=emu.rest_url) as client:
        signed = await client.post(
            "/login", data={"token": token_of(link), "next": f"/rooms/{room}"}
        )
        assert signed.status_code == 303
        assert signed.headers["location"] == f"/rooms/{room}"
        for target in OPEN_REDIRECTS:  # a hand-made form lands on the room list
            token = token_of(await login_link(emu.rest_url))
            forged = await client.post("/login", data={"token": token, "next": target})
            assert forged.status_code == 303, target
            assert forged.headers["location"] == "/", target


async def test_tls_makes_the_cookie_secure(start: Start, tmp_path: Path) -> None:
    emu = await start(tls=True, tls_dir=tmp_path / "tls")
    assert emu.ca_file is not None
    trust = ssl.create_default_context(cafile=str(emu.ca_file))
    async with httpx.AsyncClient(base_url=emu.rest_url, verify=trust) as client:
        minted = await client.post("/_emulator/login-link", headers={"x-api-key": USER_KEY})
        token = token_of(minted.json()["data"]["url"])
        signed = await client.post("/login", data={"token": token})
    assert "secure" in signed.headers["set-cookie"].lower()


async def test_login_tokens_expire(emu: Emulator) -> None:
    assert emu.platform is not None
    emu.platform.pages.login_ttl = 0.0
    token = token_of(await login_link(emu.rest_url))
    async with httpx.AsyncClient(base_url=emu.rest_url) as client:
        assert (await client.post("/login", data={"token": token})).status_code == 401


async def test_only_the_user_key_mints_login_links(emu: Emulator) -> None:
    agent = await register(human_client(emu.rest_url))
    cookie = await sign_in(emu.rest_url)
    for key in (None, "not-a-key", agent.key):
        async with raw_client(emu.rest_url, key) as client:
            assert (await client.post("/_emulator/login-link")).status_code in (401, 403)
    async with page_client(emu.rest_url, cookie, **PAGE_CALL) as page:  # not with a session
        assert (await page.post("/_emulator/login-link")).status_code == 401
        assert (await page.get("/_emulator/state")).status_code == 401


async def test_no_token_or_session_reaches_the_access_log(
    start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    emu = await start(access_log=True)
    link = emu.login_url()
    token = token_of(link)
    async with httpx.AsyncClient(base_url=emu.rest_url) as client:
        await client.get("/login")  # what a browser requests for the link: no fragment
        signed = await client.post("/login", data={"token": token})
    session = signed.headers["set-cookie"].split(";", 1)[0].split("=", 1)[1]
    async with page_client(emu.rest_url, f"band_emulator_{_port(emu)}={session}") as browser:
        assert (await browser.get("/")).status_code == 200
    access = [r for r in caplog.records if r.name == "uvicorn.access"]
    assert any("/login" in r.getMessage() for r in access), "access log was not on"
    for text in (caplog.text, *(r.getMessage() for r in caplog.records)):
        assert token not in text
        assert session not in text
        assert USER_KEY not in text


async def test_the_banner_prints_a_link_the_log_never_sees(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(USER_KEY)
    log = tmp_path / "emulator.log"
    args = ["--user-key-file", str(key_file), "--access-log"]
    emulator = await EmulatorProcess(args, log).start()
    try:
        line = next(x for x in emulator.banner if x.startswith("room pages: "))
        link = line.removeprefix("room pages: ").split(" ", 1)[0]
        token = token_of(link)
        async with httpx.AsyncClient(base_url=emulator.rest_url) as client:
            signed = await client.post("/login", data={"token": token})
        assert signed.status_code == 303
    finally:
        await emulator.stop()
    text = log.read_text()
    assert "POST /login" in text  # the access log was on
    assert token not in text
    assert USER_KEY not in text


# --- the page's own API calls ----------------------------------------------------------------


async def test_a_session_calls_the_human_api_only_from_the_page(emu: Emulator) -> None:
    room = await create_room(human_client(emu.rest_url))
    cookie = await sign_in(emu.rest_url)
    post = {"message": {"content": "hi from the page"}}
    path = f"/api/v1/me/chats/{room}/messages"
    refused: list[dict[str, str]] = [
        {},  # a form or an <img> cannot add the page header
        {"x_bandkit_page": "1", "sec_fetch_site": "same-site"},  # another port, same host
        {"x_bandkit_page": "1", "sec_fetch_site": "cross-site"},
        {"x_bandkit_page": "1", "origin": "http://evil.example"},
    ]
    for headers in refused:
        async with page_client(emu.rest_url, cookie, **headers) as client:
            assert (await client.post(path, json=post)).status_code == 401, headers
    async with page_client(emu.rest_url, None, **PAGE_CALL) as client:  # header, no session
        assert (await client.post(path, json=post)).status_code == 401
    origin = {"origin": emu.rest_url}
    async with page_client(emu.rest_url, cookie, **PAGE_CALL, **origin) as page:
        sent = await page.post(path, json=post)
    assert sent.status_code == 201, sent.text


# --- Host ------------------------------------------------------------------------------------

ROUTES = [
    ("GET", "/"),
    ("GET", "/login"),
    ("POST", "/login"),
    ("GET", "/feed"),
    ("GET", "/rooms/x"),
    ("GET", "/rooms/x/feed"),
    ("GET", "/api/v1/me/profile"),
    ("GET", "/api/v1/agent/me"),
    ("GET", "/_emulator/health"),
    ("POST", "/_emulator/login-link"),
    ("GET", "/no/such/route"),
]


@pytest.mark.parametrize(("method", "path"), ROUTES)
async def test_a_foreign_host_is_misdirected_on_every_route(
    emu: Emulator, method: str, path: str
) -> None:
    port = _port(emu)
    async with raw_client(emu.rest_url) as client:
        for host in FOREIGN_HOSTS:
            response = await client.request(method, path, headers={"host": host.format(port=port)})
            assert response.status_code == 421, (host, response.text)
            assert response.json()["error"]["code"] == "misdirected_request"
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
            async with client.stream(method, path, headers={"host": host}) as response:
                assert response.status_code != 421, host  # feeds stream: status only


async def _upgrade_status(emu: Emulator, host: str) -> str:
    port = _port(emu)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            (
                "GET /api/v1/socket/websocket?vsn=2.0.0 HTTP/1.1\r\n"
                f"Host: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                f"x-api-key: {USER_KEY}\r\n\r\n"
            ).encode()
        )
        await writer.drain()
        return (await asyncio.wait_for(reader.readline(), 10)).decode()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def test_a_websocket_upgrade_with_a_foreign_host_is_refused(emu: Emulator) -> None:
    port = _port(emu)
    assert " 421 " in await _upgrade_status(emu, f"evil.example:{port}")
    assert " 101 " in await _upgrade_status(emu, f"127.0.0.1:{port}")


async def test_extra_host_names_are_allowed_only_when_configured(start: Start) -> None:
    emu = await start(allow_hosts=("host.docker.internal", "gateway.test:9999"))
    port = _port(emu)
    async with raw_client(emu.rest_url) as client:
        for host, status in (
            (f"host.docker.internal:{port}", 200),
            ("gateway.test:9999", 200),  # given with its own port (a port mapping)
            (f"gateway.test:{port}", 421),
            (f"other.internal:{port}", 421),
        ):
            response = await client.get("/_emulator/health", headers={"host": host})
            assert response.status_code == status, host


# --- agents cannot hand out power ----------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "admin"])
async def test_agents_add_participants_as_members_only(emu: Emulator, role: str) -> None:
    human = human_client(emu.rest_url)
    planner = await register(human, "Planner")
    coder = await register(human, "Coder")
    intruder = await register(human, "Intruder")
    async with raw_client(emu.rest_url, planner.key) as as_planner:
        room = (await as_planner.post("/api/v1/agent/chats", json={"chat": {}})).json()["data"]
        path = f"/api/v1/agent/chats/{room['id']}/participants"
        coder_in = {"participant": {"participant_id": coder.id}}
        assert (await as_planner.post(path, json=coder_in)).status_code == 201
        # Even the room's owner agent cannot make someone owner or admin.
        grant = {"participant": {"participant_id": intruder.id, "role": role}}
        assert (await as_planner.post(path, json=grant)).status_code == 403
    async with raw_client(emu.rest_url, coder.key) as as_member:
        refused = await as_member.post(path, json=grant)
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "forbidden"
        member = {"participant": {"participant_id": intruder.id, "role": "member"}}
        assert (await as_member.post(path, json=member)).status_code == 201
        roster = await as_member.get(f"/api/v1/agent/chats/{room['id']}/participants")
    roles = {p["id"]: p["role"] for p in roster.json()["data"]}
    assert roles == {planner.id: "owner", coder.id: "member", intruder.id: "member"}


# --- digests ---------------------------------------------------------------------------------


async def test_key_digests_are_compared_in_constant_time(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = await register(human_client(emu.rest_url))
    calls: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def spy(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(context.hmac, "compare_digest", spy)
    platform = emu.platform
    assert platform is not None
    user = platform.authenticate(USER_KEY)
    assert user is not None
    assert user.kind.value == "user"
    assert calls, "the user key digest was not compared with hmac.compare_digest"
    calls.clear()
    found = platform.authenticate(agent.key)
    assert found is not None
    assert found.id == agent.id
    assert len(calls) == 2  # the user key, then every agent (no early exit on a match)
    assert platform.authenticate("nope") is None


# --- feed limits -----------------------------------------------------------------------------


async def test_feeds_are_capped_per_client_and_in_total(start: Start) -> None:
    emu = await start(page_feeds_per_client=2, page_feeds_total=3)
    assert emu.platform is not None
    pages = emu.platform.pages
    room = await create_room(human_client(emu.rest_url))
    first, second = await sign_in(emu.rest_url), await sign_in(emu.rest_url)
    async with contextlib.AsyncExitStack() as stack:

        async def open_feed(cookie: str, path: str) -> httpx.Response:
            client = await stack.enter_async_context(page_client(emu.rest_url, cookie))
            return await stack.enter_async_context(client.stream("GET", path))

        assert (await open_feed(first, "/feed")).status_code == 200
        assert (await open_feed(first, f"/rooms/{room}/feed")).status_code == 200
        over = await open_feed(first, "/feed")
        assert over.status_code == 429
        assert over.headers["retry-after"]
        assert (await open_feed(second, "/feed")).status_code == 200  # another client
        assert (await open_feed(second, "/feed")).status_code == 429  # total reached
        assert pages.open_feeds == 3
    await until(lambda: pages.open_feeds == 0, what="closed feeds to give their slots back")
    async with page_client(emu.rest_url, first) as client, client.stream("GET", "/feed") as again:
        assert again.status_code == 200
