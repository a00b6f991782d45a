"""End to end: `python -m launcher` as uid 1000 on real workspaces, real uv, real git.

A good workspace syncs and execs (same pid, signals reach the agent); every bad
input stops in its phase with exit 1, `[phase]` on stderr, no traceback, and the
planted canary secret nowhere in stdout, stderr, launcher.log or the state files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from launcher.constants import PLACEHOLDER_AGENT_ID, PROXY_MANAGED
from tests.launcher.conftest import CANARY, AgentBox, Launch, sha

pytestmark = pytest.mark.slow


def agent_report(launch: Launch) -> dict[str, object]:
    lines = launch.agent_lines()
    assert lines, f"the agent never ran:\n{launch.stderr}"
    report: dict[str, object] = json.loads(lines[0].removeprefix("AGENT "))
    return report


def assert_clean(launch: Launch) -> None:
    assert "Traceback" not in launch.stderr
    assert CANARY not in launch.outputs()


def assert_fails(launch: Launch, phase: str, *fragments: str) -> None:
    assert launch.returncode == 1, launch.stderr
    assert f"[{phase}]" in launch.stderr, launch.stderr
    for fragment in fragments:
        assert fragment in launch.stderr, launch.stderr
    assert not launch.agent_lines()
    assert_clean(launch)


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


# ----------------------------------------------------------------- identity


def test_wrong_uid_is_refused(agent_box: AgentBox) -> None:
    assert_fails(agent_box.run(as_agent=False), "identity", "uid 1000", "got uid 0")


def test_root_can_not_be_declared_the_agent_uid(agent_box: AgentBox) -> None:
    launch = agent_box.run(env=agent_box.env(BAND_KIT_AGENT_UID="0"), as_agent=False)
    assert_fails(launch, "identity", "non-root")


# ----------------------------------------------------------------- config


@pytest.mark.parametrize(
    ("document", "fragments"),
    [
        pytest.param("a: [unclosed", ("invalid YAML",), id="bad-yaml"),
        pytest.param("- a list\n", ("YAML mapping",), id="not-a-mapping"),
        pytest.param({"agent": {"idd": "x"}}, ("agent.idd", "Extra inputs"), id="unknown-field"),
        pytest.param({"extra": 1}, ("extra",), id="unknown-section"),
        pytest.param({"schemaVersion": "2"}, ("schemaVersion",), id="schema-version-2"),
        pytest.param({"schemaVersion": 1}, ("schemaVersion",), id="schema-version-int"),
        pytest.param({"runtime": None}, ("runtime",), id="no-runtime"),
        pytest.param({"agent": {"id": PLACEHOLDER_AGENT_ID}}, ("placeholder",), id="placeholder"),
        pytest.param({"agent": {"id": ""}}, ("agent id missing",), id="empty-id"),
        pytest.param(
            {"band": {"restUrl": "http://app.band.ai"}}, ("BAND_REST_URL",), id="http-rest"
        ),
        pytest.param({"band": {"wsUrl": "wss://"}}, ("BAND_WS_URL", "host"), id="ws-no-host"),
        pytest.param(
            {"band": {"restUrl": "https://app.band.ai:notaport"}}, ("port",), id="bad-port"
        ),
        pytest.param(
            {"band": {"restUrl": f"https://u:{CANARY}@app.band.ai"}},
            ("credentials",),
            id="endpoint-with-credentials",
        ),
        pytest.param(
            {"band": {"wsUrl": "https://app.band.ai/socket"}}, ("wss://",), id="ws-wrong-scheme"
        ),
        pytest.param(
            {"repo": {"url": f"https://x-access-token:{CANARY}@github.com/o/r.git"}},
            ("repo.url", "credentials"),
            id="repo-url-with-token",
        ),
        pytest.param(
            {"repo": {"url": "http://github.com/o/r.git"}}, ("repo.url",), id="repo-url-http"
        ),
        pytest.param({"repo": {"url": "  "}}, ("repo.url", "blank"), id="repo-url-blank"),
        pytest.param(
            {"credentials": {"source": "workspace-env-file"}},
            ("path is required",),
            id="env-file-without-path",
        ),
        pytest.param(
            {"credentials": {"source": "proxy-managed", "path": ".band/secrets.env"}},
            ("path is not used",),
            id="proxy-managed-with-path",
        ),
        pytest.param({"credentials": {"source": "vault"}}, ("credentials.source",), id="bad-tier"),
    ],
)
def test_bad_config_fails_in_config(
    agent_box: AgentBox, document: dict[str, object] | str, fragments: tuple[str, ...]
) -> None:
    if isinstance(document, dict):
        config = agent_box.config()
        for key, value in document.items():
            if value is None:
                config.pop(key)
            elif isinstance(value, dict) and isinstance(config.get(key), dict):
                config[key] = {**config[key], **value}
            else:
                config[key] = value
        if "repo" in document:
            config["project"] = {"path": "app"}
        agent_box.write(config)
    else:
        agent_box.write(document)
    assert_fails(agent_box.run(), "config", *fragments)


@pytest.mark.parametrize(
    ("env", "fragments"),
    [
        pytest.param({"WORKSPACE_DIR": None}, ("WORKSPACE_DIR is not set",), id="no-workspace"),
        pytest.param({"WORKSPACE_DIR": "/nonexistent/ws"}, ("not a directory",), id="missing-ws"),
        pytest.param({"BAND_KIT_CONFIG_PATH": "nope.yaml"}, ("not found",), id="config-missing"),
        pytest.param(
            {"BAND_AGENT_ID": PLACEHOLDER_AGENT_ID}, ("placeholder",), id="env-placeholder"
        ),
        pytest.param({"BAND_WS_URL": "ws://127.0.0.1:1/x"}, ("BAND_WS_URL",), id="env-ws-insecure"),
        pytest.param(
            {"BAND_KIT_ALLOW_INSECURE_ENDPOINTS": "yes"}, ("must be 1",), id="bad-insecure-flag"
        ),
    ],
)
def test_bad_environment_fails_in_config(
    agent_box: AgentBox, env: dict[str, str | None], fragments: tuple[str, ...]
) -> None:
    assert_fails(agent_box.run(env=agent_box.env(**env)), "config", *fragments)  # type: ignore[arg-type]


def test_config_path_override_is_honoured(agent_box: AgentBox) -> None:
    other = agent_box.ws / "conf" / "other.yaml"
    other.parent.mkdir()
    other.write_text((agent_box.ws / "band.yaml").read_text().replace("agent-123", "agent-789"))
    (agent_box.ws / "band.yaml").unlink()
    launch = agent_box.run(env=agent_box.env(BAND_KIT_CONFIG_PATH="conf/other.yaml"))
    assert launch.returncode == 0, launch.stderr
    assert agent_report(launch)["agent_id"] == "agent-789"


# ----------------------------------------------------------------- paths


def test_project_traversal_fails(agent_box: AgentBox) -> None:
    agent_box.write(agent_box.config(project={"path": "../home"}))
    assert_fails(agent_box.run(), "paths", "project.path must stay inside")


def test_project_symlink_escape_fails(agent_box: AgentBox) -> None:
    outside = agent_box.root / "outside"
    outside.mkdir()
    (agent_box.ws / "linked").symlink_to(outside)
    agent_box.write(agent_box.config(project={"path": "linked"}))
    assert_fails(agent_box.run(), "paths", "symlinks resolved")


def test_entrypoint_symlink_escape_fails(agent_box: AgentBox) -> None:
    (agent_box.root / "evil.py").write_text("print('escaped')\n")
    (agent_box.ws / "main.py").unlink()
    (agent_box.ws / "main.py").symlink_to(agent_box.root / "evil.py")
    assert_fails(agent_box.run(), "paths", "agent.entrypoint must stay inside")


def test_entrypoint_traversal_and_missing_entrypoint_fail(agent_box: AgentBox) -> None:
    agent_box.write(agent_box.config(agent={"id": "a", "entrypoint": "../../x.py"}))
    assert_fails(agent_box.run(), "paths", "agent.entrypoint")
    agent_box.write(agent_box.config(agent={"id": "a", "entrypoint": "nope.py"}))
    assert_fails(agent_box.run(), "paths", "entrypoint is not a file")


@pytest.mark.parametrize(
    ("where", "fragment"),
    [
        ("relative", "must be an absolute path"),
        ("workspace", "outside the mounted workspace"),
        ("sdk", "outside the SDK home"),
    ],
)
def test_runtime_paths_are_fenced(agent_box: AgentBox, where: str, fragment: str) -> None:
    config = agent_box.config()
    value = {
        "relative": "venv",
        "workspace": str(agent_box.ws / ".venv"),
        "sdk": str(agent_box.harness.sdk_root / "customer-venv"),
    }[where]
    config["runtime"]["environmentPath"] = value
    agent_box.write(config)
    assert_fails(agent_box.run(), "paths", "runtime.environmentPath", fragment)


def test_repo_needs_a_project_subdirectory(agent_box: AgentBox) -> None:
    agent_box.write(agent_box.config(repo={"url": "https://github.com/o/r.git"}))
    assert_fails(agent_box.run(), "repo", "subdirectory")


# ----------------------------------------------------------------- credentials


def test_missing_band_key_fails(agent_box: AgentBox) -> None:
    assert_fails(
        agent_box.run(env=agent_box.env(BAND_API_KEY=None)),
        "credentials",  # type: ignore[arg-type]
        "BAND_API_KEY missing",
    )


def test_real_key_under_proxy_managed_is_refused(agent_box: AgentBox) -> None:
    launch = agent_box.run(env=agent_box.env(BAND_API_KEY=CANARY))
    assert_fails(launch, "credentials", "sentinel")


def test_without_a_credentials_section_the_environment_is_used(agent_box: AgentBox) -> None:
    agent_box.write(agent_box.config(credentials=None))
    launch = agent_box.run(env=agent_box.env(BAND_API_KEY=CANARY))
    assert launch.returncode == 0, launch.stderr
    assert agent_report(launch)["digests"]["BAND_API_KEY"] == sha(CANARY)  # type: ignore[index]
    assert_clean(launch)


# ----------------------------------------------------------------- repo


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def test_existing_checkout_is_validated_and_reused(agent_box: AgentBox) -> None:
    app = agent_box.ws / "app"
    (agent_box.ws / "pyproject.toml").rename(agent_box.root / "pyproject.toml")
    app.mkdir()
    for name in ("main.py", "uv.lock"):
        (agent_box.ws / name).rename(app / name)
    (agent_box.root / "pyproject.toml").rename(app / "pyproject.toml")
    _git(app, "init", "-q", "-b", "main")
    _git(app, "-c", "user.email=t@e.st", "-c", "user.name=t", "add", ".")
    _git(app, "-c", "user.email=t@e.st", "-c", "user.name=t", "commit", "-qm", "init")
    _git(app, "remote", "add", "origin", "https://github.com/example/agent.git")
    agent_box.write(
        agent_box.config(project={"path": "app"}, repo={"url": "https://github.com/Example/agent"})
    )
    launch = agent_box.run()
    assert launch.returncode == 0, launch.stderr
    assert "phase repo: reused checkout" in launch.stderr
    assert (agent_box.home / "state" / "repo_init_meta.json").is_file()
    assert agent_report(launch)["cwd"] == str(app)


def test_ssh_remote_without_ssh_setup_fails_in_repo(agent_box: AgentBox) -> None:
    agent_box.write(
        agent_box.config(project={"path": "app"}, repo={"url": "git@github.com:o/r.git"})
    )
    assert_fails(agent_box.run(), "repo", ".ssh")


def test_checkout_with_another_remote_fails_in_repo(agent_box: AgentBox) -> None:
    app = agent_box.ws / "app"
    app.mkdir()
    _git(app, "init", "-q")
    _git(app, "remote", "add", "origin", "https://github.com/someone/else.git")
    agent_box.write(
        agent_box.config(project={"path": "app"}, repo={"url": "https://github.com/o/r.git"})
    )
    assert_fails(agent_box.run(), "repo", "does not match")


def test_unreachable_clone_fails_in_repo(agent_box: AgentBox) -> None:
    agent_box.write(
        agent_box.config(project={"path": "app"}, repo={"url": "https://127.0.0.1:9/org/agent.git"})
    )
    assert_fails(agent_box.run(), "repo", "repository bootstrap failed")


# ----------------------------------------------------------------- sync


def test_missing_lock_fails_with_the_uv_lock_hint(agent_box: AgentBox) -> None:
    (agent_box.ws / "uv.lock").unlink()
    assert_fails(agent_box.run(), "sync", "uv.lock not found", "`uv lock`")


def test_stale_lock_fails_with_the_hint_and_uv_output(agent_box: AgentBox) -> None:
    pyproject = agent_box.ws / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace("dependencies = []", 'dependencies = ["six"]')
    )
    launch = agent_box.run()
    assert_fails(launch, "sync", "run `uv lock`", "last lines of uv's output")
    assert "lockfile" in launch.stderr.lower()  # uv's own words made it through


def test_missing_pyproject_fails(agent_box: AgentBox) -> None:
    (agent_box.ws / "pyproject.toml").unlink()
    assert_fails(agent_box.run(), "sync", "pyproject.toml not found")


def test_missing_uv_fails(agent_box: AgentBox) -> None:
    assert_fails(agent_box.run(env=agent_box.env(BAND_SDK_UV=None)), "sync", "BAND_SDK_UV")  # type: ignore[arg-type]
    launch = agent_box.run(env=agent_box.env(BAND_SDK_UV="/nonexistent/uv"))
    assert_fails(launch, "sync", "not an executable file")


def test_unsatisfiable_python_fails_in_sync(agent_box: AgentBox) -> None:
    pyproject = agent_box.ws / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(">=3.11", ">=3.99"))
    assert_fails(agent_box.run(), "sync")


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


def _use_env_file(agent_box: AgentBox, content: str, *, mode: int = 0o600) -> Path:
    secrets = agent_box.ws / ".band" / "secrets.env"
    secrets.parent.mkdir()
    secrets.write_text(content)
    secrets.chmod(mode)
    (agent_box.ws / ".gitignore").write_text(".band/\n")
    agent_box.write(
        agent_box.config(
            credentials={
                "source": "workspace-env-file",
                "path": ".band/secrets.env",
                "acknowledgePlaintextInSandbox": True,
            }
        )
    )
    return secrets


def test_env_file_fills_gaps_and_the_environment_wins(agent_box: AgentBox) -> None:
    from tests.launcher.conftest import CANARY_FILE

    _use_env_file(
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


def test_env_file_guard_stops_the_launch(agent_box: AgentBox) -> None:
    from tests.launcher.conftest import CANARY_FILE

    _use_env_file(agent_box, f"BAND_API_KEY={CANARY_FILE}\n", mode=0o644)
    launch = agent_box.run(env=agent_box.env(BAND_API_KEY=None))  # type: ignore[arg-type]
    assert_fails(launch, "credentials", "owner-only")
    assert CANARY_FILE not in launch.outputs()


def test_env_file_unignored_in_a_repository_stops_the_launch(agent_box: AgentBox) -> None:
    from tests.launcher.conftest import CANARY_FILE

    _use_env_file(agent_box, f"BAND_API_KEY={CANARY_FILE}\n")
    (agent_box.ws / ".gitignore").write_text("")
    _git(agent_box.ws, "init", "-q")
    launch = agent_box.run(env=agent_box.env(BAND_API_KEY=None))  # type: ignore[arg-type]
    assert_fails(launch, "credentials", "git-ignored")
    assert CANARY_FILE not in launch.outputs()


def test_the_benchmark_clock_stops_at_the_agents_first_line(agent_box: AgentBox) -> None:
    from bandkit.bench.launcher import LAUNCHERS, Case, time_to_first_line
    from bandkit.bench.launcher_sdk import SdkHome

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
