"""Runtime pieces with no agent: selection, the credential proxy's header rewrite,
tool-call redaction, the keychain, and the placeholder constant."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bandkit.manifest import Kind, Manifest, Resource, teardown
from bandkit.runtimes import boxnet
from bandkit.runtimes.base import (
    PROXY_MANAGED_PLACEHOLDER,
    RuntimeName,
    SandboxError,
    SandboxSpec,
    Secret,
    run_tool,
)
from bandkit.runtimes.keychain import Keychain
from bandkit.runtimes.local import LocalRuntime
from bandkit.runtimes.select import removers, resolve_name

CANARY = "canary-sk-units-99f0aa"


def test_placeholder_and_insecure_opt_in_are_the_launcher_constants() -> None:
    from launcher.constants import INSECURE_ENDPOINTS_ENV, PROXY_MANAGED

    assert PROXY_MANAGED_PLACEHOLDER == PROXY_MANAGED
    assert boxnet.INSECURE_ENV == INSECURE_ENDPOINTS_ENV


@pytest.mark.parametrize(
    ("sbx", "docker", "expected"),
    [(True, True, "sbx"), (False, True, "docker"), (False, False, "local")],
)
def test_auto_selection(sbx: bool, docker: bool, expected: str) -> None:
    assert resolve_name("auto", has_sbx=lambda: sbx, has_docker=lambda: docker) == expected


def test_explicit_and_unknown_runtime() -> None:
    assert resolve_name("local", has_sbx=lambda: True) is RuntimeName.LOCAL
    with pytest.raises(SandboxError, match="unknown runtime 'vm'"):
        resolve_name("vm")


def test_run_tool_redacts_secrets_in_failures() -> None:
    with pytest.raises(SandboxError) as err:
        run_tool(
            ["sh", "-c", f"echo {CANARY} >&2; exit 3", CANARY],
            what="demo",
            timeout=10,
            redact=[CANARY],
        )
    assert "exit 3" in str(err.value)
    assert CANARY not in str(err.value)
    with pytest.raises(SandboxError, match="not installed"):
        run_tool(["no-such-tool-xyz"], what="demo", timeout=5)
    with pytest.raises(SandboxError, match="timed out"):
        run_tool(["sleep", "5"], what="demo", timeout=0.2)


def test_keychain_is_owner_only_and_keyed_by_env(tmp_path: Path) -> None:
    chain = Keychain(tmp_path / "kc")
    chain.put("box", Secret("A", ("h1",), "v1"))
    chain.put("box", Secret("A", ("h1",), "v2"))
    chain.put("box", Secret("B", ("h2",), "v3"))
    assert [s.value for s in chain.secrets("box")] == ["v2", "v3"]
    assert stat.S_IMODE((tmp_path / "kc" / "box.json").stat().st_mode) == 0o600
    assert "v2" not in repr(chain.secrets("box")[0])
    chain.drop("box", host="h1")
    chain.drop("box", env="B")
    assert not (tmp_path / "kc" / "box.json").exists()


def test_local_secret_before_create_and_teardown_dispatch(tmp_path: Path) -> None:
    with Manifest.open(tmp_path / "m.json") as manifest:
        rt = LocalRuntime(tmp_path / "run", manifest=manifest)
        rt.set_secret("later", Secret("BAND_API_KEY", ("127.0.0.1",), CANARY))
        assert rt.has_secret("later", "127.0.0.1")
        assert "no isolation" in rt.warnings[0]
        assert CANARY not in (tmp_path / "m.json").read_text()
        manifest.record(Kind.ROOM, "r1", runtime="elsewhere")
        report = teardown(manifest, removers([rt]))
    assert [r.ref for r, _ in report.failed] == ["room:r1"]
    assert "no elsewhere runtime" in report.failed[0][1] or "no remover" in report.failed[0][1]
    assert not rt.has_secret("later", "127.0.0.1")
    assert isinstance(report.removed[0], Resource)


def test_generic_removers_for_workspaces_and_processes(tmp_path: Path) -> None:
    import subprocess
    import sys

    from bandkit import processes

    workspace = tmp_path / "staged"
    workspace.mkdir()
    (workspace / "band.yaml").write_text("x")
    tag = f"generic-{tmp_path.name}"
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env={"PATH": "/usr/bin:/bin", processes.TAG_ENV: tag},
    )
    try:
        with Manifest.open(tmp_path / "m.json") as manifest:
            manifest.record(Kind.WORKSPACE, str(workspace))
            manifest.record(Kind.PROCESS, tag)
            manifest.record(Kind.WORKSPACE, str(tmp_path / "never-made"))
            report = teardown(manifest, removers([]))
        assert report.clean, report.lines()
        assert not workspace.exists()
        assert child.wait(timeout=15) != 0
        assert processes.tagged_pids(tag) == []
    finally:
        child.kill()
        child.wait()


def test_a_spec_mounts_its_first_workspace_where_mount_at_says() -> None:
    """A fleet's agents: each copy appears inside its sandbox at the source's path (what
    their one agent image was synced for); the other workspaces stay where they are."""
    copy, extra, source = Path("/run/fleet/ws/echo-1"), Path("/data"), Path("/src/echo")
    plain = SandboxSpec(name="a", workspaces=(copy, extra))
    assert plain.mounts() == [(copy, copy), (extra, extra)]
    assert plain.workspace_inside == copy
    moved = SandboxSpec(name="a", workspaces=(copy, extra), mount_at=source)
    assert moved.mounts() == [(copy, source), (extra, extra)]
    assert moved.workspace_inside == source
    assert moved.workspace == copy  # host-side code keeps the host path


def test_a_box_is_told_the_workspace_it_sees_not_the_one_its_caller_names(
    tmp_path: Path,
) -> None:
    """The sbx simulator hands the host path as WORKSPACE_DIR; when the box's uid cannot
    reach it, the box runs in a staged copy, and WORKSPACE_DIR must name the copy (a fleet
    copy in a 0700 run directory failed with EACCES before)."""
    from bandkit.runtimes import hostbox

    staged = tmp_path / "box" / "workspace"
    given = {"WORKSPACE_DIR": "/root/x", "A": "1"}
    env = hostbox.base_env(tmp_path / "box", staged, given, os.getuid() or 1_900_000_001)
    assert (env["WORKSPACE_DIR"], env["A"]) == (str(staged), "1")
