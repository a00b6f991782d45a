"""`demo.logs --follow`'s mechanics on a scripted runtime: the tail first, then each new
line once, prefixed with its role; sandboxes that are not running are skipped; a
restarted log is read again; a hostile log's terminal escapes are shown escaped; it waits
while the run is set up and ends when the manifest goes away. (The real runtimes' `logs()`
under a real `demo.up`: tests/demo/test_presenter_e2e.py and tests/docker/test_demo_docker.py.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from bandkit.demo import DemoError
from bandkit.demo.follow import Stream, follow, shown
from bandkit.demo.layout import DemoLayout, RunInfo
from bandkit.demo.status import role_logs, roles_for
from bandkit.runtimes.base import Logs, SandboxError, SandboxStatus
from examples.docker_demo.cast import CAST, Role
from tests.commands import REPO


class ScriptedRuntime:
    """`status` and `logs` from dicts the test changes between ticks."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self.startup: dict[str, str] = {}
        self.launcher: dict[str, str] = {}
        self.broken: set[str] = set()

    def status(self, name: str) -> SandboxStatus:
        if name in self.broken:
            raise SandboxError(f"docker inspect {name}: daemon gone")
        return SandboxStatus.RUNNING if name in self.running else SandboxStatus.ABSENT

    def logs(self, name: str) -> Logs:
        return Logs(self.startup.get(name, ""), self.launcher.get(name, ""))


def _layout(tmp_path: Path) -> DemoLayout:
    layout = DemoLayout(tmp_path / "run", tmp_path / "boxes")
    layout.home.mkdir(parents=True)
    layout.manifest.write_text('{"schema_version": "1", "resources": []}')
    return layout


def _info(layout: DemoLayout) -> None:
    info = RunInfo(
        runtime="docker",
        platform="local",
        rest_url="http://127.0.0.1:1",
        ws_url="ws://127.0.0.1:1",
        box_root=str(layout.box_root),
        scenario="happy",
    )
    layout.write_info(info)


PM, DEV, ARCH = (CAST[r].sandbox for r in (Role.PM, Role.DEV, Role.ARCHITECT))


def _run(
    tmp_path: Path, steps: list[Callable[[ScriptedRuntime, DemoLayout], None]], **kw: object
) -> tuple[list[str], str]:
    layout = _layout(tmp_path)
    runtime = ScriptedRuntime()
    out: list[str] = []
    pending = list(steps)

    def sleep(_seconds: float) -> None:
        if pending:
            pending.pop(0)(runtime, layout)
        else:
            layout.manifest.unlink()

    end = follow(
        layout.run_dir,
        out=out.append,
        sleep=sleep,
        runtime_for=lambda _info, _layout: runtime,  # type: ignore[arg-type,return-value]
        **kw,  # type: ignore[arg-type]
    )
    return out, end


def test_interleaves_the_three_logs_with_role_prefixes_until_the_manifest_goes(
    tmp_path: Path,
) -> None:
    def record(rt: ScriptedRuntime, layout: DemoLayout) -> None:
        _info(layout)

    def pm_up(rt: ScriptedRuntime, _: DemoLayout) -> None:
        rt.running.add(PM)
        rt.startup[PM] = "old 1\nold 2\nold 3\nready\n"
        rt.launcher[PM] = "phase sync\n"

    def both_talk(rt: ScriptedRuntime, _: DemoLayout) -> None:
        rt.running.add(ARCH)
        rt.startup[ARCH] = "arch ready\npart"
        rt.startup[PM] += "pm said\n"

    def line_completes(rt: ScriptedRuntime, _: DemoLayout) -> None:
        rt.startup[ARCH] += "ial line\n"
        rt.startup[PM] = "restarted\n"  # shorter: the agent started again

    out, end = _run(tmp_path, [record, pm_up, both_talk, line_completes], lines=2)
    assert out[0].startswith("demo.logs: following pm, dev, architect on the docker runtime")
    assert out[1:] == [
        "pm                 | old 3",
        "pm                 | ready",
        "pm/launcher        | phase sync",
        "pm                 | pm said",
        "architect          | arch ready",
        "pm                 | restarted",
        "architect          | partial line",
    ]
    assert end == "demo.logs: the run ended (its manifest is gone)"


def test_the_three_sandboxes_are_read_at_once_and_shown_in_order(tmp_path: Path) -> None:
    """A slow runtime CLI (sbx, docker) costs one read's time per tick, not three: each
    read waits here until all three have begun (sequential reads would time out)."""
    barrier = threading.Barrier(3, timeout=5)

    class Slow(ScriptedRuntime):
        def logs(self, name: str) -> Logs:
            barrier.wait()
            return super().logs(name)

    layout = _layout(tmp_path)
    _info(layout)
    runtime = Slow()
    runtime.running |= {PM, DEV, ARCH}
    runtime.startup = {PM: "pm up\n", DEV: "dev up\n", ARCH: "arch up\n"}
    out: list[str] = []
    follow(
        layout.run_dir,
        out=out.append,
        sleep=lambda _s: layout.manifest.unlink(),
        runtime_for=lambda _info, _layout: runtime,  # type: ignore[arg-type,return-value]
    )
    assert [line.split("|")[1].strip() for line in out[1:]] == ["pm up", "dev up", "arch up"]


def test_a_sandbox_that_cannot_be_asked_is_skipped_and_the_rest_goes_on(tmp_path: Path) -> None:
    def start(rt: ScriptedRuntime, layout: DemoLayout) -> None:
        _info(layout)
        rt.running |= {PM, DEV}
        rt.broken.add(PM)
        rt.startup[DEV] = "dev here\n"

    out, _ = _run(tmp_path, [start, lambda rt, _l: None], lines=5)
    assert out[1:] == ["dev                | dev here"]


def test_hostile_escapes_are_shown_escaped(tmp_path: Path) -> None:
    def start(rt: ScriptedRuntime, layout: DemoLayout) -> None:
        _info(layout)
        rt.running.add(PM)
        rt.startup[PM] = "\x1b]0;pwned\x07\x1b[2J\rclean\u202e\ttab\n"

    out, _ = _run(tmp_path, [start, lambda rt, _l: None])
    assert out[1] == "pm                 | \\x1b]0;pwned\\x07\\x1b[2J\\x0dclean\\u202e\ttab"
    assert not any(ch in "".join(out) for ch in "\x1b\x07\r\u202e")
    assert shown("x" * 5000).endswith("…")


def test_no_run_is_a_clear_error_and_a_run_that_ends_during_setup_ends_it(
    tmp_path: Path,
) -> None:
    with pytest.raises(DemoError, match="no demo run in progress"):
        follow(tmp_path / "nothing", out=print, sleep=lambda _s: None)
    out, end = _run(tmp_path, [])  # the manifest goes before any run record appears
    assert out == []
    assert "ended before its sandboxes were recorded" in end


def test_stream_holds_a_partial_line_and_shows_the_tail_once() -> None:
    stream = Stream("pm")
    assert stream.take("a\nb\nc", last=1) == ["b"]
    assert stream.take("a\nb\nc\nd\n") == ["c", "d"]
    assert stream.take("a\nb\nc\nd\n") == []


def test_roles_and_the_plain_logs(tmp_path: Path) -> None:
    assert [m.role for m in roles_for("")] == list(Role)
    with pytest.raises(DemoError, match="--role"):
        roles_for("cto")
    with pytest.raises(DemoError, match="no demo run recorded"):
        role_logs(tmp_path, "")


def test_ctrl_c_ends_a_follow_cleanly(tmp_path: Path) -> None:
    """`demo.logs --follow` as typed, stopped with Ctrl-C (SIGINT): exit 0, no traceback."""
    run_dir = tmp_path / "run"
    layout = DemoLayout.for_run_dir(run_dir)
    layout.home.mkdir(parents=True)
    layout.manifest.write_text('{"schema_version": "1", "resources": []}')
    layout.write_info(
        RunInfo(
            runtime="local",
            platform="local",
            rest_url="http://127.0.0.1:1",
            ws_url="ws://127.0.0.1:1",
            box_root=str(tmp_path / "boxes"),
            scenario="happy",
        )
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "invoke", "demo.logs", "--follow", "--run-dir", str(run_dir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("demo.logs: following pm, dev, architect on the local runtime")
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=15)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert out.strip().endswith("demo.logs: stopped")
    assert "Traceback" not in err
