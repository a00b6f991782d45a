"""The hardened credential proxy with the real SDK: the echo agent answers a mention on
the emulator through the token-prefixed REST and socket URLs (local runtime and the sbx
simulator), while the workspace's band.yaml points at another upstream on 127.0.0.1 that
never hears a byte, and the key shows up in no log or file."""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bandkit.runtimes import boxnet
from bandkit.runtimes.base import Runtime, SandboxSpec, Secret
from bandkit.runtimes.local import LocalRuntime
from bandkit.runtimes.sbx import SbxRuntime
from tests.fakes.simharness import simulator
from tests.runtimes.helpers import (
    INSECURE,
    KIT_SPEC,
    Platform,
    echo_workspace,
    emulator,
    scratch_dir,
)
from tests.security.conftest import EchoUpstream


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    with emulator(Path(tmp_path_factory.mktemp("emulator"))) as p:
        yield p


def _kit(parent: Path, env: dict[str, str]) -> Path:
    """The real kit spec with the operator's platform as kit environment (how an sbx
    sandbox gets host-side configuration: the kit, not the workspace)."""
    kit = parent / "kit"
    kit.mkdir()
    spec = yaml.safe_load(KIT_SPEC.read_text())
    spec["environment"] = {"variables": env}
    (kit / "spec.yaml").write_text(yaml.safe_dump(spec))
    return kit


@pytest.mark.parametrize("kind", ["local", "sbx-sim"])
def test_the_sdk_round_trips_through_the_token_urls_and_band_yaml_is_ignored(
    kind: str, platform: Platform, agent_sdk: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = scratch_dir("proxy-sdk-")
    name = f"px-{secrets.token_hex(3)}"
    agent_id, agent_key = platform.register(name)
    pinned = {**INSECURE, "BAND_REST_URL": platform.rest_url, "BAND_WS_URL": platform.ws_url}
    try:
        with EchoUpstream() as evil, simulator("0.47.0") as sim:
            ws = echo_workspace(
                scratch,
                agent_id=agent_id,
                rest_url=evil.url,
                ws_url=f"ws://127.0.0.1:{evil.port}/api/v1/socket/websocket",
            )
            scopes = boxnet.band_key_scopes(platform.rest_url, platform.ws_url)
            secrets_ = (Secret("BAND_API_KEY", ("127.0.0.1",), agent_key, scopes=scopes),)
            egress = (f"127.0.0.1:{platform.rest_url.rsplit(':', 1)[1]}",)
            rt: Runtime
            if kind == "local":
                rt = LocalRuntime(scratch / "run")
                spec = SandboxSpec(name, (ws,), env=pinned, secrets=secrets_, egress=egress)
            else:
                sim("policy", "init", "balanced", check=True)
                for key, value in sim.env.items():
                    monkeypatch.setenv(key, value)
                rt = SbxRuntime()
                kit = str(_kit(scratch, pinned))
                spec = SandboxSpec(name, (ws,), kit=kit, secrets=secrets_, egress=egress)
            rt.create(spec)
            try:
                room = platform.room_with(agent_id)
                try:
                    reply = platform.round_trip(room, agent_id, timeout=120)
                except AssertionError as exc:
                    raise AssertionError(f"{exc}\n{rt.logs(name).startup[-3000:]}") from None
                assert reply.startswith("echo: ")
                logs = rt.logs(name)
                assert "rest http://127.0.0.1:" in logs.startup
            finally:
                rt.remove(name)
            assert evil.connections == 0
            assert evil.received() == b""
            texts = [logs.startup, logs.launcher, sim.outputs(), *rt.warnings]
            texts += [
                p.read_text(errors="replace")
                for p in scratch.rglob("*")
                if p.is_file() and "keychain" not in p.parts
            ]
            assert all(agent_key not in text for text in texts)
    finally:
        platform.delete_agent(agent_id)
        shutil.rmtree(scratch, ignore_errors=True)
