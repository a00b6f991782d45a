"""The credential proxy as a real process in front of the emulator: keep-alive requests,
bodies by length and chunked, the band SDK's own REST client through the token URL, the
placeholder swapped only for the pinned endpoints the secret's scopes name. (Attacks on
it: tests/security/test_proxy_custody.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bandkit import processes
from bandkit.runtimes import boxnet, hostbox
from tests.runtimes.helpers import Platform


@pytest.fixture
def proxied(platform: Platform, tmp_path: Path) -> Iterator[tuple[str, str]]:
    agent_id, agent_key = platform.register(f"proxy-{tmp_path.name[-6:]}")
    box = tmp_path / "box"
    box.mkdir()
    scopes = boxnet.band_key_scopes(platform.rest_url)
    injection = boxnet.Injection(scopes, "proxy-managed", agent_key)
    urls = boxnet.start_proxy(box, None, {"BAND_REST_URL": platform.rest_url}, [injection])
    try:
        yield urls["BAND_REST_URL"], agent_id
    finally:
        hostbox.stop(box)
        assert processes.tagged_pids(boxnet.proxy_tag(box)) == []
        platform.delete_agent(agent_id)


def test_keep_alive_requests_carry_the_swapped_key(
    proxied: tuple[str, str], platform: Platform
) -> None:
    url, agent_id = proxied
    with httpx.Client(base_url=url, headers={"X-API-Key": "proxy-managed"}) as client:
        for _ in range(3):  # one connection, several requests
            me = client.get("/api/v1/agent/me")
            assert me.status_code == 200
            assert me.json()["data"]["id"] == agent_id
        room = platform.room_with(agent_id)
        body = {"working": True}
        sent = client.post(f"/api/v1/agent/chats/{room}/activity", json=body)
        assert sent.status_code == 200

        def chunks() -> Iterator[bytes]:
            yield b'{"working":'
            yield b" false}"

        chunked = client.post(
            f"/api/v1/agent/chats/{room}/activity",
            content=chunks(),
            headers={"Content-Type": "application/json"},
        )
        assert chunked.status_code == 200
        assert chunked.json()["data"]["working"] is False


async def test_the_sdk_rest_client_keeps_the_token_prefix(
    proxied: tuple[str, str], platform: Platform
) -> None:
    """band's REST client joins paths onto the base URL by concatenation, so the
    `/<token>` prefix the proxy requires survives (its socket URL keeps it too: the
    echo-agent round trips in test_contract and tests/security/test_proxy_sdk.py)."""
    from band.client.rest import AsyncRestClient

    url, agent_id = proxied
    assert len(url.rsplit("/", 1)[1]) >= 22  # http://127.0.0.1:PORT/<token>
    client = AsyncRestClient(api_key="proxy-managed", base_url=url)
    me = await client.agent_api_identity.get_agent_me()
    assert me.data.id == agent_id


def test_the_socket_endpoint_is_derived_from_the_pinned_rest_url(
    platform: Platform, tmp_path: Path
) -> None:
    injection = boxnet.Injection(boxnet.band_key_scopes(platform.rest_url), "proxy-managed", "k")
    urls = boxnet.start_proxy(tmp_path, None, {"BAND_REST_URL": platform.rest_url}, [injection])
    try:
        token = urls["BAND_REST_URL"].rsplit("/", 1)[1]
        assert urls["BAND_WS_URL"].startswith("ws://127.0.0.1:")
        assert urls["BAND_WS_URL"].endswith(f"/{token}/api/v1/socket/websocket")
    finally:
        hostbox.stop(tmp_path)


def test_other_values_are_not_swapped(proxied: tuple[str, str]) -> None:
    url, _ = proxied
    wrong = httpx.get(f"{url}/api/v1/agent/me", headers={"X-API-Key": "not-the-placeholder"})
    assert wrong.status_code == 401


def test_origins_outside_the_secret_get_no_proxy(platform: Platform, tmp_path: Path) -> None:
    elsewhere = boxnet.band_key_scopes("https://app.band.ai")
    injection = boxnet.Injection(elsewhere, "proxy-managed", "k")
    env = {"BAND_REST_URL": platform.rest_url, "BAND_WS_URL": platform.ws_url}
    urls = boxnet.start_proxy(tmp_path, None, env, [injection])
    assert urls == {}  # the key is for app.band.ai: nothing to swap here, no proxy
    assert processes.tagged_pids(boxnet.proxy_tag(tmp_path)) == []


def test_proxy_exits_when_its_box_is_removed(platform: Platform, tmp_path: Path) -> None:
    import shutil

    box = tmp_path / "orphan-box"
    box.mkdir()
    injection = boxnet.Injection(boxnet.band_key_scopes(platform.rest_url), "proxy-managed", "k")
    urls = boxnet.start_proxy(box, None, {"BAND_REST_URL": platform.rest_url}, [injection])
    assert urls
    tag = boxnet.proxy_tag(box)
    assert processes.tagged_pids(tag)
    shutil.rmtree(box)  # removed without stopping the proxy
    assert processes.wait_gone(tag, timeout_s=15)


def test_started_again_it_serves_the_same_urls_and_refuses_made_up_ones(
    platform: Platform, tmp_path: Path
) -> None:
    """After a reboot a container still holds the URLs (token, ports) it was created with:
    the proxy started again with `again=` serves exactly those, the old token included."""
    agent_id, agent_key = platform.register(f"again-{tmp_path.name[-6:]}")
    injection = boxnet.Injection(
        boxnet.band_key_scopes(platform.rest_url), "proxy-managed", agent_key
    )
    env = {"BAND_REST_URL": platform.rest_url, "BAND_WS_URL": platform.ws_url}
    try:
        first = boxnet.start_proxy(tmp_path, None, env, [injection])
        hostbox.stop(tmp_path)  # the reboot
        assert processes.tagged_pids(boxnet.proxy_tag(tmp_path)) == []
        again = boxnet.start_proxy(tmp_path, None, env, [injection], again=first)
        assert again == first
        me = httpx.get(f"{first['BAND_REST_URL']}/api/v1/agent/me",
                       headers={"X-API-Key": "proxy-managed"})  # fmt: skip
        assert me.status_code == 200
        assert me.json()["data"]["id"] == agent_id
        hostbox.stop(tmp_path)
        made_up = {**first, "BAND_WS_URL": "ws://127.0.0.1:1/other-token/api/v1/socket/websocket"}
        with pytest.raises(boxnet.ProxyError, match="disagree on their token"):
            boxnet.start_proxy(tmp_path, None, env, [injection], again=made_up)
        assert processes.tagged_pids(boxnet.proxy_tag(tmp_path)) == []
    finally:
        hostbox.stop(tmp_path)
        platform.delete_agent(agent_id)


@pytest.mark.parametrize("port", [-1, 65536, True, "8080", 1.5])
def test_a_route_listens_only_on_a_port_number(port: object) -> None:
    from bandkit.proxies.keyproxy import ConfigError, parse_config

    route = {"upstream": "http://127.0.0.1:9", "paths": ["/api"], "swaps": [["p", "k", ["/api"]]]}
    config = {"token": "t" * 32, "routes": [{**route, "port": port}]}
    with pytest.raises(ConfigError, match="listening port"):
        parse_config(config)
    _, routes, _ = parse_config({**config, "routes": [{**route, "port": 8080}]})
    assert routes[0].listen_port == 8080


@pytest.mark.parametrize(
    "via",
    ["relay.example:80", "127.0.0.1:80", "8.8.8.8:80", "10.0.0.1:0", "10.0.0.1", "0.0.0.0:80"],
)
def test_a_route_goes_via_a_private_relay_address_only(via: str) -> None:
    """`via` (the swarm runtime's relay on the cluster's hub) is a private IPv4 literal and
    a port: never a name DNS answers for, a loopback, a public or unspecified address."""
    from bandkit.proxies.keyproxy import ConfigError, parse_config

    route = {"upstream": "http://127.0.0.1:9", "paths": ["/api"], "swaps": [["p", "k", ["/api"]]]}
    config = {"token": "t" * 32, "routes": [{**route, "via": via}]}
    with pytest.raises(ConfigError, match="via"):
        parse_config(config)
    _, routes, _ = parse_config({**config, "routes": [{**route, "via": "10.77.0.1:4100"}]})
    assert routes[0].via == ("10.77.0.1", 4100)
    assert (routes[0].host, routes[0].port) == ("127.0.0.1", 9)  # the request names these


def test_a_relay_does_not_open_plain_http_to_a_remote_upstream() -> None:
    """`via` carries a loopback platform's bytes; it is no way to send the key over plain
    http to anyone else."""
    from bandkit.proxies.keyproxy import ConfigError, parse_config

    route = {
        "upstream": "http://10.1.2.3:80",
        "paths": ["/api"],
        "swaps": [["p", "k", ["/api"]]],
        "via": "10.77.0.1:4100",
    }
    with pytest.raises(ConfigError, match="refusing plain"):
        parse_config({"token": "t" * 32, "routes": [route]})
