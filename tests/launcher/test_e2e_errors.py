"""End to end, bad inputs: `python -m launcher` as uid 1000 on broken workspaces.

Every bad input (each config rule, URL rule, path escape, custody rule, repo,
lock and uv failure) stops in its phase with exit 1, `[phase]` on stderr, no
traceback, and the planted canary secret nowhere in stdout, stderr, launcher.log
or the state files.
"""

from __future__ import annotations

import pytest

from launcher.constants import PLACEHOLDER_AGENT_ID
from tests.launcher.fakes import CANARY, CANARY_FILE, sha
from tests.launcher.harness import (
    AgentBox,
    agent_report,
    assert_clean,
    assert_fails,
    git,
    use_env_file,
)

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


def test_existing_checkout_is_validated_and_reused(agent_box: AgentBox) -> None:
    app = agent_box.ws / "app"
    (agent_box.ws / "pyproject.toml").rename(agent_box.root / "pyproject.toml")
    app.mkdir()
    for name in ("main.py", "uv.lock"):
        (agent_box.ws / name).rename(app / name)
    (agent_box.root / "pyproject.toml").rename(app / "pyproject.toml")
    git(app, "init", "-q", "-b", "main")
    git(app, "-c", "user.email=t@e.st", "-c", "user.name=t", "add", ".")
    git(app, "-c", "user.email=t@e.st", "-c", "user.name=t", "commit", "-qm", "init")
    git(app, "remote", "add", "origin", "https://github.com/example/agent.git")
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
    git(app, "init", "-q")
    git(app, "remote", "add", "origin", "https://github.com/someone/else.git")
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


def test_env_file_guard_stops_the_launch(agent_box: AgentBox) -> None:
    use_env_file(agent_box, f"BAND_API_KEY={CANARY_FILE}\n", mode=0o644)
    launch = agent_box.run(env=agent_box.env(BAND_API_KEY=None))  # type: ignore[arg-type]
    assert_fails(launch, "credentials", "owner-only")
    assert CANARY_FILE not in launch.outputs()


def test_env_file_unignored_in_a_repository_stops_the_launch(agent_box: AgentBox) -> None:
    use_env_file(agent_box, f"BAND_API_KEY={CANARY_FILE}\n")
    (agent_box.ws / ".gitignore").write_text("")
    git(agent_box.ws, "init", "-q")
    launch = agent_box.run(env=agent_box.env(BAND_API_KEY=None))  # type: ignore[arg-type]
    assert_fails(launch, "credentials", "git-ignored")
    assert CANARY_FILE not in launch.outputs()
