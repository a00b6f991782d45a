"""End to end: `python -m launcher` as uid 1000 on real workspaces, real uv, real git.

A good workspace syncs and execs (same pid, signals reach the agent), the second
launch skips uv, --check changes nothing, and the upstream launcher accepts the
same workspace. Bad inputs are in test_e2e_errors.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from launcher.constants import PROXY_MANAGED
from tests.launcher.fakes import CANARY, CANARY_FILE, sha
from tests.launcher.harness import (
    AgentBox,
    agent_report,
    assert_clean,
    assert_fails,
    use_env_file,
)

# ----------------------------------------------------------------- the good path


def test_good_workspace_syncs_then_execs_the_agent(agent_box: AgentBox) -> None:
    launch = agent_box.run()
    assert launch.returncode == 0, launch.stderr
    report = agent_report(launch)
    assert report["agent_id"] == "agent-123"
    assert report["rest"] == "https://app.band.ai"
    assert report["ws"] == "wss://app.band.ai/api/v1/socket/websocket"
    assert report["home"] == "/home/agent"
    assert report["cwd"] == str(agent_box.ws)
    assert report["executable"] == str(agent_box.home / "venv" / "bin" / "python")
    assert report["argv"] == [str(agent_box.ws / "main.py")]
    digests = report["digests"]
    assert isinstance(digests, dict)
    assert digests["BAND_API_KEY"] == sha(PROXY_MANAGED)
    assert digests["OPENAI_API_KEY"] == sha(CANARY)  # the agent gets it; no output shows it
    assert "phase sync: needed" in launch.log
    assert (agent_box.home / "state" / "launcher-stamp.json").stat().st_mode & 0o077 == 0
    assert_clean(launch)


def test_agent_process_is_the_launcher_process_and_gets_sigterm(agent_box: AgentBox) -> None:
    agent_box.chown()
    process = subprocess.Popen(
        agent_box.command(),
        env=agent_box.env(AGENT_WAIT_FOR_SIGTERM="1"),
        cwd=agent_box.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # blocks until the agent prints (or EOF)
        assert first.startswith("AGENT "), process.stderr.read() if process.stderr else ""
        assert json.loads(first.removeprefix("AGENT "))["pid"] == process.pid
        assert process.stdout.readline().strip() == "AGENT waiting"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "AGENT got SIGTERM" in out
    assert process.returncode == 0
    assert CANARY not in out + err


def test_second_launch_skips_uv_and_changes_bring_it_back(agent_box: AgentBox) -> None:
    first = agent_box.run()
    assert first.returncode == 0, first.stderr
    assert "phase sync: needed (no record of a previous sync)" in first.stderr
    uv_marker = "uv sync --locked into"
    assert uv_marker in first.stderr

    second = agent_box.run()
    assert second.returncode == 0, second.stderr
    assert "phase sync: skipped uv" in second.stderr
    assert uv_marker not in second.stderr
    assert "validated before, unchanged" in second.stderr  # no pydantic on the fast path
    assert agent_report(second)["agent_id"] == "agent-123"

    with (agent_box.ws / "pyproject.toml").open("a") as pyproject:
        pyproject.write("# an edit that keeps the lock valid\n")
    changed = agent_box.run()
    assert changed.returncode == 0, changed.stderr
    assert "phase sync: needed (pyproject.toml changed)" in changed.stderr
    assert "phase sync: skipped uv" in agent_box.run().stderr

    (agent_box.home / "venv" / "pyvenv.cfg").unlink()
    broken = agent_box.run()
    assert "phase sync: needed (the venv has no pyvenv.cfg)" in broken.stderr
    assert broken.returncode == 0, broken.stderr


def test_changed_band_yaml_is_validated_again_without_a_sync(agent_box: AgentBox) -> None:
    assert agent_box.run().returncode == 0
    agent_box.write(agent_box.config(agent={"id": "agent-456"}))
    launch = agent_box.run()
    assert launch.returncode == 0, launch.stderr
    assert "(validated)" in launch.stderr
    assert "phase sync: skipped uv" in launch.stderr
    assert agent_report(launch)["agent_id"] == "agent-456"


def test_environment_overrides_band_yaml(agent_box: AgentBox) -> None:
    launch = agent_box.run(
        env=agent_box.env(
            BAND_AGENT_ID="agent-from-env",
            BAND_REST_URL="https://band.example.test",
            BAND_WS_URL="wss://band.example.test/socket",
        )
    )
    assert launch.returncode == 0, launch.stderr
    report = agent_report(launch)
    assert report["agent_id"] == "agent-from-env"
    assert report["rest"] == "https://band.example.test"
    assert report["ws"] == "wss://band.example.test/socket"


def test_insecure_endpoints_need_the_opt_in_and_warn(agent_box: AgentBox) -> None:
    emulator = {
        "BAND_REST_URL": "http://127.0.0.1:8765",
        "BAND_WS_URL": "ws://127.0.0.1:8765/api/v1/socket/websocket",
    }
    refused = agent_box.run(env=agent_box.env(**emulator))
    assert_fails(refused, "config", "BAND_KIT_ALLOW_INSECURE_ENDPOINTS=1")
    allowed = agent_box.run(env=agent_box.env(**emulator, BAND_KIT_ALLOW_INSECURE_ENDPOINTS="1"))
    assert allowed.returncode == 0, allowed.stderr
    assert "WARNING insecure endpoints" in allowed.stderr
    assert agent_report(allowed)["rest"] == "http://127.0.0.1:8765"


def test_check_reports_without_side_effects(agent_box: AgentBox) -> None:
    launch = agent_box.run("--check")
    assert launch.returncode == 0, launch.stderr
    assert "sync         needed: no record of a previous sync" in launch.stdout
    assert "tier proxy-managed; set: BAND_API_KEY, OPENAI_API_KEY" in launch.stdout
    assert not launch.agent_lines()
    assert sorted(p.name for p in agent_box.home.iterdir()) == []  # nothing created
    assert_clean(launch)
    assert agent_box.run().returncode == 0
    again = agent_box.run("--check")
    assert "skip uv: lock, pyproject and interpreter unchanged" in again.stdout


def test_check_fails_like_a_launch(agent_box: AgentBox) -> None:
    (agent_box.ws / "uv.lock").unlink()
    launch = agent_box.run("--check")
    assert_fails(launch, "sync", "uv lock")


def test_the_upstream_launcher_runs_the_same_workspace(agent_box: AgentBox) -> None:
    """Compatibility: band.yaml schemaVersion "1" means the same to both launchers."""
    launch = agent_box.run(module="band.docker.launcher")
    assert launch.returncode == 0, launch.stderr
    assert agent_report(launch)["agent_id"] == "agent-123"


# ----------------------------------------------------------------- logging


def test_launcher_log_is_written_and_appended(agent_box: AgentBox) -> None:
    agent_box.run()
    agent_box.run()
    log = agent_box.log_text()
    assert log.count("phase exec:") == 2
    assert os.stat(agent_box.home / "logs" / "launcher.log").st_mode & 0o077 == 0
    first = log.splitlines()[0]
    assert time.strptime(first.split(" ")[0], "%Y-%m-%dT%H:%M:%S%z")


# ----------------------------------------------------------------- env-file tier


def test_env_file_fills_gaps_and_the_environment_wins(agent_box: AgentBox) -> None:
    use_env_file(
        agent_box,
        f"BAND_API_KEY={CANARY_FILE}\nOPENAI_API_KEY=from-file\nGH_TOKEN='{CANARY_FILE}-gh'\n",
    )
    launch = agent_box.run(env=agent_box.env(BAND_API_KEY=None))  # type: ignore[arg-type]
    assert launch.returncode == 0, launch.stderr
    digests = agent_report(launch)["digests"]
    assert digests == {  # OPENAI from the environment (the canary), not the file
        "BAND_API_KEY": sha(CANARY_FILE),
        "OPENAI_API_KEY": sha(CANARY),
        "ANTHROPIC_API_KEY": None,
        "COPILOT_GITHUB_TOKEN": None,
        "GH_TOKEN": sha(f"{CANARY_FILE}-gh"),
        "GITHUB_TOKEN": None,
    }
    assert "WARNING credentials tier workspace-env-file" in launch.stderr
    assert "filled 2 name(s) missing from the environment: BAND_API_KEY, GH_TOKEN" in launch.log
    assert CANARY_FILE not in launch.outputs()
    assert_clean(launch)


def test_the_benchmark_clock_stops_at_the_agents_first_line(agent_box: AgentBox) -> None:
    from bandkit.bench.launcher import LAUNCHERS, Case, time_to_first_line
    from bandkit.runtimes.sdk_home import SdkHome

    harness = agent_box.harness
    sdk = SdkHome(root=harness.sdk_root, python=harness.python, uv=harness.uv)
    agent_box.chown()
    case = Case(
        name="trivial",
        workspace=agent_box.ws,
        env=agent_box.env(),
        first_line=lambda line: line.startswith("AGENT "),
        stream="stdout",
    )
    for module in LAUNCHERS.values():
        assert 0 < time_to_first_line(sdk, module, case) < 120
