"""Runtime benchmark: manifest writes, credential-proxy overhead, provisioning, and the
local runtime's create -> first echo and stop -> start -> echo times.

Everything is real: the emulator runs through `platformctl.up` in a scratch run dir, the
agent is the echo-agent starter run by the launcher (as root: as a uid of its own through
an image-like SDK home, its workspace staged out of the 0700 scratch directory), requests
go over loopback HTTP. The upstream kit has no runtime
layer or local runtime to compare with; its `launch.sh` manifest is line-appended text.
"""

from __future__ import annotations

import os
import secrets
import shutil
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import httpx
from ruamel.yaml import YAML

from bandkit.bench import sized
from bandkit.emulator import service as platformctl
from bandkit.image.facts import STARTER_DIR
from bandkit.manifest import Kind, Manifest, teardown
from bandkit.runtimes import boxnet, hostbox
from bandkit.runtimes.base import SandboxSpec, Secret
from bandkit.runtimes.local import LocalRuntime

REPLY_TIMEOUT_S = 180.0


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def bench_manifest(root: Path, entries: int = 200) -> list[str]:
    entries = sized(entries, 10)
    path = root / "manifest.json"
    with Manifest.open(path) as manifest:
        start = time.perf_counter()
        for index in range(entries):
            manifest.record(Kind.ROOM, f"room-{index}")
        recorded = time.perf_counter() - start
        start = time.perf_counter()
        report = teardown(manifest, {Kind.ROOM: lambda _r: None})
        removed = time.perf_counter() - start
    assert report.clean
    return [
        f"manifest: record {_ms(recorded / entries)} per entry ({entries} entries, fsync'd)",
        f"manifest: teardown {_ms(removed / entries)} per entry (rewrite after each removal)",
    ]


def _median_get(url: str, headers: dict[str, str], n: int = 40) -> float:
    n = sized(n, 5)
    times = []
    with httpx.Client(headers=headers, timeout=10) as client:
        for _ in range(n):
            start = time.perf_counter()
            client.get(url).raise_for_status()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


class _Platform:
    def __init__(self, rest_url: str, user_key: str) -> None:
        self.rest_url, self.user_key = rest_url, user_key
        self.client = httpx.Client(base_url=rest_url, headers={"X-API-Key": user_key}, timeout=10)

    def post(self, path: str, body: Mapping[str, object]) -> dict[str, object]:
        response = self.client.post(path, json=body)
        response.raise_for_status()
        data: dict[str, object] = response.json()["data"]
        return data

    def echo(self, room: str, agent_id: str) -> float:
        token = secrets.token_hex(4)
        start = time.perf_counter()
        body = {"message": {"content": f"hi {token}", "mentions": [{"id": agent_id}]}}
        self.post(f"/api/v1/me/chats/{room}/messages", body)
        deadline = start + REPLY_TIMEOUT_S
        while time.perf_counter() < deadline:
            messages = self.client.get(f"/api/v1/me/chats/{room}/messages").json()["data"]
            if any(m["sender_id"] == agent_id and token in m["content"] for m in messages):
                return time.perf_counter() - start
            time.sleep(0.01)
        raise RuntimeError("no echo within the deadline")


def bench_local_runtime(
    root: Path, platform: _Platform, agent_key: str, agent_id: str
) -> list[str]:
    ws = root / "ws"
    shutil.copytree(STARTER_DIR, ws, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    yaml = YAML()
    config = yaml.load((ws / "band.yaml").read_text())
    config["agent"]["id"] = agent_id
    config["band"]["restUrl"] = platform.rest_url
    config["band"]["wsUrl"] = platform.rest_url.replace("http", "ws") + "/api/v1/socket/websocket"
    with (ws / "band.yaml").open("w") as fh:
        yaml.dump(config, fh)
    for path in (ws, *ws.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    room = str(platform.post("/api/v1/me/chats", {"chat": {"title": "bench"}})["id"])
    platform.post(
        f"/api/v1/me/chats/{room}/participants",
        {"participant": {"participant_id": agent_id, "role": "member"}},
    )
    runtime = LocalRuntime(root / "run")
    ws_url = config["band"]["wsUrl"]
    spec = SandboxSpec(
        "bench",
        (ws,),
        # As kit.provision: the endpoints in the environment, so the box's credential
        # proxy pins them and the agent reaches the platform through it (band.yaml's alone
        # would send the placeholder straight to the platform: a 401, never an echo).
        env={
            "BAND_KIT_ALLOW_INSECURE_ENDPOINTS": "1",
            "BAND_REST_URL": platform.rest_url,
            "BAND_WS_URL": ws_url,
        },
        secrets=(
            Secret(
                "BAND_API_KEY",
                ("127.0.0.1",),
                agent_key,
                scopes=boxnet.band_key_scopes(platform.rest_url),
            ),
        ),
    )
    lines = []
    start = time.perf_counter()
    if os.geteuid() == 0:  # the SDK home the box uid runs from, once per run dir
        # In the boxes root as `create` makes and claims it (a root left unclaimed is
        # swept by the next box made on this host).
        hostbox.ensure_sdk_home(hostbox.sdk_home_dir(runtime.make_boxes_root() / "bench"))
    lines.append(f"local runtime: agent SDK home ready in {_ms(time.perf_counter() - start)}")
    start = time.perf_counter()
    runtime.create(spec)
    created = time.perf_counter() - start
    platform.echo(room, agent_id)
    # As root a new box's uv cache is a copy of the machine's seed; otherwise it is empty.
    cache = "uv cache from the seed" if os.geteuid() == 0 else "empty uv cache, packages from PyPI"
    lines.append(
        f"local runtime: create returns in {_ms(created)}; create -> first echo ({cache}) "
        f"{_ms(time.perf_counter() - start)}"
    )
    warm = [platform.echo(room, agent_id) for _ in range(sized(10, 2))]
    lines.append(
        "local runtime: echo round trip through the credential proxy, p50 "
        f"{_ms(statistics.median(warm))} ({len(warm)} mentions, reply polled every 10 ms)"
    )
    start = time.perf_counter()
    runtime.stop("bench")
    stopped = time.perf_counter() - start
    start = time.perf_counter()
    runtime.start("bench")
    platform.echo(room, agent_id)
    lines.append(
        f"local runtime: stop {_ms(stopped)}; start -> first echo (synced venv) "
        f"{_ms(time.perf_counter() - start)}"
    )
    start = time.perf_counter()
    runtime.remove("bench")
    lines.append(f"local runtime: remove {_ms(time.perf_counter() - start)}")
    return lines


def bench_proxy(root: Path, platform: _Platform, agent_key: str) -> list[str]:
    headers = {"X-API-Key": agent_key}
    direct = _median_get(f"{platform.rest_url}/api/v1/agent/me", headers)
    box = root / "proxybox"
    box.mkdir()
    scopes = boxnet.band_key_scopes(platform.rest_url)
    injection = boxnet.Injection(scopes, "proxy-managed", agent_key)
    urls = boxnet.start_proxy(box, root, {"BAND_REST_URL": platform.rest_url}, [injection])
    try:
        proxied = _median_get(
            f"{urls['BAND_REST_URL']}/api/v1/agent/me", {"X-API-Key": "proxy-managed"}
        )
    finally:
        hostbox.stop(box)
    return [
        f"credential proxy: GET /agent/me p50 direct {_ms(direct)}, through the proxy "
        f"{_ms(proxied)} (+{_ms(proxied - direct)}, one keep-alive client, "
        f"{sized(40, 5)} requests)"
    ]


def bench_provision(root: Path, platform: _Platform) -> list[str]:
    from bandkit.kit.provision import ProvisionRequest, provision

    ws = root / "pws"
    shutil.copytree(STARTER_DIR, ws, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    request = ProvisionRequest(
        name="bench-prov",
        description="benchmark agent for provisioning",
        workspace=ws,
        rest_url=platform.rest_url,
        create=False,
    )
    runtime = LocalRuntime(root / "prun")
    start = time.perf_counter()
    provision(request, api_key=platform.user_key, runtime=runtime)
    first = time.perf_counter() - start
    start = time.perf_counter()
    provision(request, api_key=platform.user_key, runtime=runtime)
    again = time.perf_counter() - start
    return [
        f"provision (local runtime, --no-create): register+write id+store key {_ms(first)}; "
        f"idempotent re-run {_ms(again)}"
    ]


def run() -> list[str]:
    # mkdtemp's 0700, kept: the box uid cannot enter it, so the workspace is staged.
    root = Path(tempfile.mkdtemp(prefix="bench-runtimes-", dir="/tmp"))
    lines = bench_manifest(root)
    run_dir = root / "platform"
    try:
        record, _ = platformctl.up(run_dir)
        user_key = Path(record.user_key_file).read_text(encoding="utf-8").strip()
        platform = _Platform(record.rest_url, user_key)
        agent = platform.post(
            "/api/v1/me/agents/register",
            {"agent": {"name": "bench-echo", "description": "benchmark echo agent"}},
        )
        agent_id = str(agent["agent"]["id"])  # type: ignore[index]
        agent_key = str(agent["credentials"]["api_key"])  # type: ignore[index]
        lines += bench_proxy(root, platform, agent_key)
        lines += bench_provision(root, platform)
        lines += bench_local_runtime(root, platform, agent_key, agent_id)
    finally:
        platformctl.down(run_dir)
        shutil.rmtree(root, ignore_errors=True)
    return lines


if __name__ == "__main__":
    print("\n".join(run()))
