"""`invoke doctor`'s next steps, one line per check with its fix in the line: each check's
line with its probe stubbed at its seam (`doctor_next.Host`), what blocks the default path
(`demo.up` offline on the best runtime), the real probes' edges, and `invoke doctor` failing
cleanly on a stale platform record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from bandkit import doctor_next as dn
from bandkit.emulator import service
from bandkit.image.facts import LOCAL_TAG
from bandkit.runtimes import hostguard
from bandkit.runtimes.local import BOXES_HOME

REPO = Path(__file__).resolve().parents[1]


def _host(tmp_path: Path, **seams: object) -> dn.Host:
    """A machine with sbx absent, no Docker daemon, no platform, not root, all reachable."""
    base = dn.Host(
        run_dir=tmp_path / "run",
        repo=tmp_path / "repo",
        environ={},
        euid=lambda: 1000,
        which=lambda tool: f"/usr/bin/{tool}" if tool != "sbx" else None,
        docker=lambda: False,
        image=lambda _ref: False,
        iptables=lambda: (True, "/usr/sbin/iptables works"),
        platform=lambda _run_dir: None,
        unreachable=lambda _path: [],
        writable=lambda _path: True,
        base_python=Path(sys.executable),
    )
    return replace(base, **seams)  # type: ignore[arg-type]


def _step(host: dn.Host, name: str) -> dn.Step:
    return next(step for step in dn.next_steps(host) if step.name == name)


def test_every_check_is_one_line_and_a_non_ok_line_names_its_fix(tmp_path: Path) -> None:
    steps = dn.next_steps(_host(tmp_path, euid=lambda: 0))
    names = [step.name for step in steps]
    assert names == [
        "runtime auto",
        "kit image",
        "local bases",
        "iptables",
        "platform",
        "run directory",
        "checkout",
    ]
    lines = dn.render(steps).splitlines()
    assert len(lines) == len(steps)
    for step, line in zip(steps, lines, strict=True):
        assert line.startswith(f"{step.name}:")
        assert step.state in (dn.OK, dn.TODO, dn.NA, dn.BLOCKS)
        if step.state in (dn.TODO, dn.BLOCKS):
            assert "; fix: " in line, line
    assert "checkout" not in [s.name for s in dn.next_steps(_host(tmp_path))]  # not root


@pytest.mark.parametrize(
    ("seams", "state", "said"),
    [
        ({"which": lambda t: f"/usr/bin/{t}"}, dn.OK, "sbx (sbx is on PATH)"),
        ({"docker": lambda: True, "image": lambda _r: True}, dn.OK, "docker (a daemon answers"),
        ({"docker": lambda: True}, dn.OK, "demo.up and smoke.run take local"),
        ({}, dn.OK, "local (no sbx, no Docker daemon)"),
        (
            {"euid": lambda: 0, "which": lambda t: None if t in ("sbx", "setpriv") else t},
            dn.BLOCKS,
            "needs setpriv",
        ),
    ],
)
def test_runtime_auto_says_what_it_picks_and_why(
    tmp_path: Path, seams: dict[str, object], state: str, said: str
) -> None:
    step = _step(_host(tmp_path, **seams), "runtime auto")
    assert step.state == state
    assert said in step.detail


def test_kit_image_and_local_bases(tmp_path: Path) -> None:
    assert _step(_host(tmp_path), "kit image").state == dn.NA
    assert _step(_host(tmp_path), "local bases").state == dn.NA
    built = _host(tmp_path, docker=lambda: True, image=lambda _r: True)
    assert _step(built, "kit image").state == dn.OK
    assert _step(built, "local bases").state == dn.OK
    bare = _host(tmp_path, docker=lambda: True, image=lambda ref: ref.startswith("local/uv"))
    kit = _step(bare, "kit image")
    assert (kit.state, kit.fix) == (dn.TODO, "`uv run invoke build`")
    assert LOCAL_TAG in kit.detail
    bases = _step(bare, "local bases")
    assert bases.state == dn.TODO
    assert "local/debian-python:" in bases.detail
    assert "local/uv" not in bases.detail
    assert bases.fix == "`uv run invoke image.bases`"


def test_iptables_blocks_only_when_the_demo_would_run_on_docker(tmp_path: Path) -> None:
    broken = {"iptables": lambda: (False, "/usr/sbin/iptables is not installed")}
    assert _step(_host(tmp_path, **broken), "iptables").state == dn.NA  # no daemon
    on_docker = _host(tmp_path, docker=lambda: True, image=lambda _r: True, **broken)
    step = _step(on_docker, "iptables")
    assert step.state == dn.BLOCKS
    assert "fails closed" in step.detail
    assert "apt-get install iptables" in step.fix
    assert "--runtime local" in step.fix
    assert dn.blocking(dn.next_steps(on_docker)) == ["iptables"]
    no_kit = _host(tmp_path, docker=lambda: True, **broken)  # the demo goes local
    assert _step(no_kit, "iptables").state == dn.TODO
    working = _host(tmp_path, docker=lambda: True, image=lambda _r: True)
    assert _step(working, "iptables").state == dn.OK
    off = _host(tmp_path, environ={hostguard.OPT_OUT_ENV: "off"}, **broken)
    step = _step(off, "iptables")
    assert step.state == dn.TODO
    assert "can reach every service" in step.detail


def test_platform_running_absent_or_stale(tmp_path: Path) -> None:
    record = service.RunRecord(42, "http://127.0.0.1:5", "ws://x", "k", "s", "l", "t")
    up = _step(_host(tmp_path, platform=lambda _d: record), "platform")
    assert up.state == dn.OK
    assert "http://127.0.0.1:5 (pid 42)" in up.detail
    absent = _step(_host(tmp_path), "platform")
    assert absent.state == dn.TODO
    assert absent.fix == "`uv run invoke platform.up`"

    def stale(_run_dir: Path) -> None:
        raise service.PlatformError("the local platform recorded in x (pid 7) is not running")

    gone = _step(_host(tmp_path, platform=stale), "platform")
    assert gone.state == dn.BLOCKS
    assert "pid 7" in gone.detail
    assert "platform.up" in gone.fix


def test_run_directory_for_the_agent_uid(tmp_path: Path) -> None:
    locked = _step(_host(tmp_path, writable=lambda _p: False), "run directory")
    assert locked.state == dn.BLOCKS
    assert "--run-dir" in locked.fix
    assert "run as you" in _step(_host(tmp_path), "run directory").detail
    root = _step(_host(tmp_path, euid=lambda: 0), "run directory")
    assert root.state == dn.OK
    assert "can traverse it" in root.detail
    private = tmp_path / "run"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    shut = _step(_host(tmp_path, euid=lambda: 0, unreachable=lambda _p: [private]), "run directory")
    assert shut.state == dn.OK
    assert f"{private} is 700 (private: platform.up keeps its key there)" in shut.detail
    assert str(BOXES_HOME) in shut.detail


def test_checkout_the_agent_uid_cannot_enter(tmp_path: Path) -> None:
    home = tmp_path / "root-home"
    home.mkdir()
    home.chmod(0o700)
    step = _step(_host(tmp_path, euid=lambda: 0, unreachable=lambda _p: [home]), "checkout")
    assert step.state == dn.OK  # the local runtime stages a workspace it cannot reach
    assert f"cannot enter {home} (mode 700)" in step.detail
    assert "staged at each start" in step.detail
    assert f"`chmod o+x {home}`" in step.fix


def test_the_real_probes_edges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = hostguard.Tools(str(tmp_path / "iptables"), str(tmp_path / "ip6tables"))
    monkeypatch.setattr(hostguard.Tools, "find", classmethod(lambda cls: missing))
    works, detail = dn._iptables()
    assert not works
    assert detail == f"{tmp_path / 'iptables'} is not installed"


def test_invoke_doctor_fails_cleanly_on_a_stale_platform_record(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    stale = {
        "pid": os.getpid(),  # alive, but not an emulator
        "rest_url": "http://127.0.0.1:9",
        "ws_url": "ws://127.0.0.1:9",
        "user_key_file": str(run_dir / service.KEY_FILE),
        "state_file": "",
        "log_file": "",
        "started_at": "then",
    }
    (run_dir / service.RUN_FILE).write_text(json.dumps(stale))
    invoke = Path(sys.executable).parent / "invoke"
    done = subprocess.run(
        [str(invoke), "doctor", "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
        env={
            **os.environ,
            "PATH": os.environ.get("PATH", ""),
            "DOCKER_HOST": "unix:///nonexistent",
        },
    )
    assert done.returncode == 1, done.stdout + done.stderr
    platform = next(line for line in done.stdout.splitlines() if line.startswith("platform:"))
    assert "BLOCKS" in platform
    assert "fix: `uv run invoke platform.up`" in platform
    assert "would fail: platform" in done.stderr
    assert "Traceback" not in done.stderr
