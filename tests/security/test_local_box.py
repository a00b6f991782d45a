"""The local runtime against a hostile workspace: a band.yaml planted as a symlink or a
hard link to a root-only file is refused at start (the victim untouched and never
republished), the box's own band.yaml is never world-readable, logs are read without
following planted links, and the agent runs with no-new-privs and an empty bounding set."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.runtimes import hostbox
from bandkit.runtimes.base import SandboxError, SandboxSpec
from bandkit.runtimes.local import LocalRuntime
from tests.runtimes.helpers import echo_workspace, scratch_dir

VICTIM = "root-only: canary-local-box-victim-51d0e2\n"


@pytest.fixture
def scratch() -> Iterator[Path]:
    path = scratch_dir("sec-local-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def victim(scratch: Path) -> Path:
    """A file the sandbox must never see: owner-only, outside every workspace."""
    secret_dir = scratch / "private"
    secret_dir.mkdir(mode=0o700)
    path = secret_dir / "victim.txt"
    path.write_text(VICTIM)
    path.chmod(0o600)
    return path


def workspace(scratch: Path) -> Path:
    return echo_workspace(
        scratch, agent_id="a1", rest_url="http://127.0.0.1:9", ws_url="ws://127.0.0.1:9"
    )


def published(run: Path) -> list[Path]:
    """Every file the runtime wrote that holds the victim's content."""
    return [p for p in run.rglob("*") if p.is_file() and VICTIM in p.read_text(errors="replace")]


@pytest.mark.parametrize("plant", ["symlink", "hardlink"])
def test_a_planted_band_yaml_is_refused_and_the_victim_never_republished(
    plant: str, scratch: Path, victim: Path
) -> None:
    ws = workspace(scratch)
    (ws / "band.yaml").unlink()
    if plant == "symlink":
        (ws / "band.yaml").symlink_to(victim)
    else:
        os.link(victim, ws / "band.yaml")
    before = (victim.read_bytes(), stat.S_IMODE(victim.stat().st_mode), victim.stat().st_uid)
    run = scratch / "run"
    rt = LocalRuntime(run)

    with pytest.raises(SandboxError) as caught:
        rt.create(SandboxSpec(name="planted", workspaces=(ws,)))

    message = str(caught.value)
    assert "band.yaml" in message
    assert ("symbolic link" if plant == "symlink" else "hard links") in message
    assert VICTIM.strip() not in message
    assert not (run / "boxes" / "planted" / "band.yaml").exists()
    assert published(run) == []
    after = (victim.read_bytes(), stat.S_IMODE(victim.stat().st_mode), victim.stat().st_uid)
    assert after == before
    rt.remove("planted")


def test_the_box_band_yaml_is_never_world_readable(scratch: Path) -> None:
    ws = workspace(scratch)
    uid = 1_900_065_535 if os.geteuid() == 0 else os.getuid()  # a box uid's place
    config = hostbox._prepare_root(scratch / "run" / "boxes" / "b1", ws, uid)
    mode = stat.S_IMODE(config.stat().st_mode)
    assert mode & 0o007 == 0
    if os.geteuid() == 0:
        assert (mode, config.stat().st_uid, config.stat().st_gid) == (0o640, 0, uid)
    else:
        assert mode == 0o600


def test_logs_are_read_without_following_a_planted_link(scratch: Path, victim: Path) -> None:
    run = scratch / "run"
    rt = LocalRuntime(run)
    logs = run / "boxes" / "b2" / "logs"
    logs.mkdir(parents=True)
    (logs / "launcher.log").symlink_to(victim)
    (run / "boxes" / "b2" / "startup.log").symlink_to(victim)
    got = rt.logs("b2")
    assert VICTIM.strip() not in got.startup + got.launcher
    assert "symbolic link" in got.launcher


def test_setpriv_drops_every_capability_and_sets_no_new_privs() -> None:
    argv = hostbox.setpriv_argv(1000)
    assert "--no-new-privs" in argv
    assert "--bounding-set=-all" in argv
    assert "--inh-caps=-all" in argv
    assert argv[-1] == "--"
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return
    status = subprocess.run(
        [*argv, "cat", "/proc/self/status"], capture_output=True, text=True, check=True
    ).stdout
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    assert fields["Uid"].split()[0] == "1000"
    assert fields["NoNewPrivs"].strip() == "1"
    assert int(fields["CapBnd"], 16) == 0
    assert int(fields["CapEff"], 16) == 0
