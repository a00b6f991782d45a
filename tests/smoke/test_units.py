"""The smoke's fast parts: the agent's wire protocol, the production guard, drill
parsing, preflight lines (never a value), the task surface and the manual steps."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from band.config.settings import PlatformSettings

from smoke import drills as dr
from smoke import preflight as pf
from smoke import run as smoke_run
from smoke import target as tg
from smoke.context import AGENT_SRC, Layout
from smoke.state import Label, Phase, StateStore
from tests.runtimes.helpers import REPO

STAGING_REST = "https://staging.example.test"
STAGING_WS = "wss://staging.example.test/api/v1/socket/websocket"
CANARY = "canary-preflight-key-77a1"


def _agent_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("smoke_agent_main", AGENT_SRC / "main.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("text", "ack"),
    [
        ("@Bot smoke probe marker:0123456789ab", "sandbox-ack:0123456789ab"),
        ("marker:abcdefabcdef and more", "sandbox-ack:abcdefabcdef"),
        ("marker:0123456789", None),  # too short
        ("marker:0123456789abc", None),  # too long
        ("marker:0123456789AB", None),  # not lowercase hex
        ("hello", None),
    ],
)
def test_agent_answers_only_a_twelve_hex_marker(text: str, ack: str | None) -> None:
    assert _agent_module().ack_for(text) == ack


def test_agent_workspace_is_a_locked_proxy_managed_uv_project() -> None:
    import yaml

    config = yaml.safe_load((AGENT_SRC / "band.yaml").read_text())
    assert config["credentials"] == {"source": "proxy-managed"}
    assert config["agent"]["id"] == "replace-with-agent-id"  # the copy gets the real id
    lock = (AGENT_SRC / "uv.lock").read_text()
    assert 'name = "band-sdk"' in lock
    assert 'name = "sandbox-smoke-agent"' in lock


def test_production_endpoints_come_from_the_sdk_defaults() -> None:
    rest, ws = tg.production_endpoints()
    fields = PlatformSettings.model_fields
    assert (rest, ws) == (fields["BAND_REST_URL"].default, fields["BAND_WS_URL"].default)
    for url in (rest, ws, rest + "/", rest.upper(), rest + "/api/v1"):
        assert tg.is_production(url), url
    assert not tg.is_production(STAGING_REST)
    assert not tg.is_production("http://127.0.0.1:8080")


def test_guard_refuses_production_and_missing_endpoints() -> None:
    rest, ws = tg.production_endpoints()
    with pytest.raises(tg.TargetError, match="production"):
        tg.guard(rest, STAGING_WS)
    with pytest.raises(tg.TargetError, match="production"):
        tg.guard(STAGING_REST, ws)
    with pytest.raises(tg.TargetError, match="staging"):
        tg.guard("", "")
    tg.guard(STAGING_REST, STAGING_WS)


def test_staging_target_needs_the_user_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BAND_REST_URL", STAGING_REST)
    monkeypatch.setenv("BAND_WS_URL", STAGING_WS)
    monkeypatch.delenv("BAND_API_KEY_USER", raising=False)
    with pytest.raises(tg.TargetError, match="BAND_API_KEY_USER"):
        tg.staging_target()
    monkeypatch.setenv("BAND_API_KEY_USER", CANARY)
    target = tg.staging_target()
    assert (target.rest_url, target.local) == (STAGING_REST, False)
    assert CANARY not in repr(target)
    with pytest.raises(tg.TargetError, match="control API"):
        target.drop_sockets()


def test_drills_parse_in_their_fixed_order() -> None:
    assert dr.parse("all") == list(dr.Drill)
    assert dr.parse("platform, network") == [dr.Drill.NETWORK, dr.Drill.PLATFORM]
    with pytest.raises(dr.DrillError, match="unknown drill"):
        dr.parse("network,wifi")


def test_default_freeze_outlasts_the_sdks_heartbeat_watchdog() -> None:
    from band_sdk_core import SessionPolicy

    policy = SessionPolicy.default()
    assert dr.sdk_watchdog() == (policy.heartbeat_interval_s, policy.dead_threshold_s)
    assert dr.default_freeze_s() > policy.dead_threshold_s


def test_runtime_choice_auto_is_docker_only_with_a_daemon_and_the_kit_image(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    daemon, image = [False], [False]
    monkeypatch.setattr(smoke_run, "docker_answers", lambda: daemon[0])
    monkeypatch.setattr(smoke_run, "image_exists", lambda _ref: image[0])
    said: list[str] = []
    assert smoke_run.runtime_choice("auto", log=said.append) == "local"
    assert "no Docker daemon answers" in said[-1]
    with pytest.raises(smoke_run.SmokeError, match="no Docker daemon answers"):
        smoke_run.runtime_choice("docker")
    daemon[0] = True
    assert smoke_run.runtime_choice("auto", "kit:test", log=said.append) == "local"
    assert "image kit:test is not built" in said[-1]
    with pytest.raises(smoke_run.SmokeError, match="image kit:test is missing"):
        smoke_run.runtime_choice("docker", "kit:test")
    image[0] = True
    assert smoke_run.runtime_choice("auto") == "docker"
    assert smoke_run.runtime_choice("docker") == "docker"
    assert smoke_run.runtime_choice("local") == "local"
    with pytest.raises(smoke_run.SmokeError, match="manual smoke on sbx"):
        smoke_run.runtime_choice("sbx")
    with pytest.raises(smoke_run.SmokeError, match="unknown runtime"):
        smoke_run.runtime_choice("podman")


def test_preflight_lines_never_show_a_value(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BAND_REST_URL", STAGING_REST)
    monkeypatch.setenv("BAND_WS_URL", STAGING_WS)
    monkeypatch.setenv("BAND_API_KEY_USER", CANARY)
    found = pf.checks(tmp_path, runtime="local")
    text = "\n".join(c.line() for c in found)
    assert all(line.startswith(("PASS  ", "FAIL  ")) for line in text.splitlines())
    for value in (CANARY, STAGING_REST, "staging.example.test", str(tmp_path)):
        assert value not in text
    names = {c.name: c.ok for c in found}
    assert names["endpoints are not the SDK's production endpoints"]
    assert names["BAND_API_KEY_USER set"]


def test_preflight_fails_on_production(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rest, ws = tg.production_endpoints()
    monkeypatch.setenv("BAND_REST_URL", rest)
    monkeypatch.setenv("BAND_WS_URL", ws)
    monkeypatch.delenv("BAND_API_KEY_USER", raising=False)
    found = {c.name: c for c in pf.checks(tmp_path, runtime="local")}
    assert not found["endpoints are not the SDK's production endpoints"].ok
    assert not found["BAND_API_KEY_USER set"].ok
    assert not pf.ok(list(found.values()))


def test_preflight_passes_a_private_run_dir_and_fails_one_it_cannot_write(
    tmp_path: Path,
) -> None:
    """A 0700 run directory (platform.up's `.run`) is fine: the local runtime keeps the box
    outside it; one this user cannot make is a FAIL that says what to do."""
    private = tmp_path / "run"
    private.mkdir(mode=0o700)
    found = {c.name: c for c in pf.checks(private / "inner", runtime="local")}
    assert found["run directory writable"].ok
    stuck = {c.name: c for c in pf.checks(Path("/proc/1/run"), runtime="local")}
    assert not stuck["run directory writable"].ok
    assert "--run-dir" in stuck["run directory writable"].line()


def test_manual_steps_share_the_state_and_report(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    state = smoke_run.step_phase(tmp_path, Phase.AWAITING_WIFI_RECOVERY)
    assert state.phase is Phase.AWAITING_WIFI_RECOVERY
    smoke_run.step_observe(tmp_path, "network_cut", "Wi-Fi off 40 s; the agent came back")
    verdict, path = smoke_run.step_report(tmp_path)
    assert verdict == "INCOMPLETE"
    assert path == layout.store.evidence_path
    assert "Wi-Fi off 40 s" in path.read_text()
    loaded = StateStore(layout.root).load()
    assert loaded is not None
    assert loaded.run_id == state.run_id


def test_a_probe_without_an_agent_is_recorded_as_failed(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    rec = smoke_run.current_run(layout, log=lambda _line: None)
    target = tg.Target("http://127.0.0.1:9", "ws://127.0.0.1:9/socket", "k")
    from smoke.outcome import ProbeFailed
    from smoke.probe import probe

    with pytest.raises(ProbeFailed, match="provision"):
        probe(rec, target, Label.INITIAL)
    loaded = layout.store.load()
    assert loaded is not None
    assert [(p.label, p.passed) for p in loaded.probes] == [(Label.INITIAL, False)]


def _invoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_tasks_need_their_options_and_explain_them(tmp_path: Path) -> None:
    listed = _invoke("--list")
    for name in ("run", "preflight", "probe", "phase", "observe", "report", "clean"):
        assert f"smoke.{name}" in listed.stdout
    missing = _invoke("smoke.probe", "--run-dir", str(tmp_path))
    assert missing.returncode == 1
    assert "--label is required" in missing.stderr
    unknown = _invoke("smoke.probe", "--label", "wifi", "--run-dir", str(tmp_path))
    assert unknown.returncode == 1
    assert "unknown label" in unknown.stderr
    bad = _invoke("smoke.run", "--drills", "wifi", "--run-dir", str(tmp_path))
    assert bad.returncode == 1
    assert "unknown drill" in bad.stderr


def test_the_agent_watchdog_knob_has_one_name_on_both_sides() -> None:
    assert _agent_module().WATCHDOG_ENV == dr.AGENT_WATCHDOG_ENV


TUNED_PROBE = """
import asyncio, importlib.util, sys
spec = importlib.util.spec_from_file_location("smoke_agent_main", sys.argv[1])
agent = importlib.util.module_from_spec(spec)
spec.loader.exec_module(agent)
agent.tune_watchdog(4.0)
from band.client.streaming.client import WebSocketClient

async def main():
    ws = WebSocketClient("ws://127.0.0.1:9/socket/websocket", "placeholder", "a1")
    phx = ws._build_phx_client()
    ws._watchdog.reset_deadline()
    left = ws._watchdog._deadline - asyncio.get_running_loop().time()
    print(phx._heartbeat_interval_s, round(left, 1))

asyncio.run(main())
"""


def test_the_agent_knob_sets_the_heartbeat_and_the_watchdog_deadline() -> None:
    """In a process of its own (it patches the SDK): heartbeats at half the threshold,
    the forced reconnect at the threshold; untuned, the SDK's 30 s and 60 s stay."""
    probe = [sys.executable, "-c", TUNED_PROBE, str(AGENT_SRC / "main.py")]
    tuned = subprocess.run(probe, capture_output=True, text=True, timeout=60, check=False)
    assert tuned.returncode == 0, tuned.stderr
    assert tuned.stdout.split() == ["2.0", "4.0"]
    plain = TUNED_PROBE.replace("agent.tune_watchdog(4.0)", "")
    untuned = subprocess.run(
        [sys.executable, "-c", plain, str(AGENT_SRC / "main.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert untuned.stdout.split() == ["30.0", "60.0"], untuned.stderr


@pytest.mark.parametrize("value", ["fast", "0", "1.5", "601"])
def test_a_bad_agent_watchdog_value_stops_the_agent(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(dr.AGENT_WATCHDOG_ENV, value)
    with pytest.raises(SystemExit) as stopped:
        _agent_module().watchdog_setting()
    assert stopped.value.code == 2


def test_the_freeze_follows_a_tuned_watchdog() -> None:
    assert dr.default_freeze_s(6.0) == 6.0 + dr.FREEZE_MARGIN_S
    assert dr.default_freeze_s() == dr.sdk_watchdog()[1] + dr.FREEZE_MARGIN_S
