"""An agent's text never drives the operator's terminal.

A sandbox writes its own startup log, replies to `kit.ping` and posts the demo's
messages. Every host-side print of that text (the log tails `kit.provision`, the demo and
the smoke show when an agent does not come up, `demo.logs`, the smoke's warnings, the
demo's voice and transcript, `kit.ping`'s reply, every task's error line) goes through
`bandkit.terminal.printable`: no ESC, BEL or other control byte gets out, and the
readable text does. The log is the real local runtime's `startup.log`, as the agent
writes it; the end-to-end case (a real agent that never connects, through the
`kit.provision` task) is `tests/kit/test_task_e2e.py`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from invoke.config import Config
from invoke.context import Context
from invoke.exceptions import Exit

import tasks
from bandkit.demo import DemoError, cast_ops
from bandkit.demo.layout import DemoLayout, RunInfo
from bandkit.demo.status import role_logs
from bandkit.demo.transcript import Transcript
from bandkit.errors import BandkitError
from bandkit.kit import agent_check, commands
from bandkit.runtimes import local
from bandkit.runtimes.local import LocalRuntime
from examples.docker_demo.cast import CAST, Role
from smoke.drills import Box
from tasks import kit as kit_tasks
from tasks._common import reports

SECRET = "canary-key-escapes-6b1f0e2d9c8a"
# a window title (OSC ... BEL), clear screen (CSI 2J), a C1 CSI, a carriage return and a
# backspace that would overwrite the line, a bidi override that reorders what is shown
HOSTILE = (
    "\x1b]0;pwned\x07\x1b[2J\x1b[31magent exploded on start\x1b[0m\r\x08 ERROR \x9b2J"
    f"\u202eevil {SECRET}\n"
)
READABLE = ("pwned", "agent exploded on start", "ERROR", "evil")
# what must never reach the terminal: every C0 but \n and \t, DEL, C1, the bidi controls
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def assert_inert(shown: str) -> None:
    assert "\x1b" not in shown
    assert "\x07" not in shown
    assert not CONTROLS.search(shown), repr(shown)
    for text in READABLE:
        assert text in shown, shown
    assert SECRET not in shown


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LocalRuntime:
    monkeypatch.setattr(local, "BOXES_HOME", tmp_path / "local-boxes")
    return LocalRuntime(tmp_path / "run")


def agent_writes_log(rt: LocalRuntime, name: str) -> None:
    """What the agent does: its stdout (the box's startup.log) and its launcher log."""
    box = rt.boxes_root() / name
    (box / "logs").mkdir(parents=True)
    (box / "startup.log").write_text("starting\n" + HOSTILE)
    (box / "logs" / "launcher.log").write_text(HOSTILE)


def test_the_provision_and_smoke_log_tail(runtime: LocalRuntime) -> None:
    agent_writes_log(runtime, "box")
    tail = commands.log_tail(runtime, "box", [SECRET])
    assert_inert(tail)
    assert "--- startup.log" in tail
    assert "\n" in tail  # still one line per log line
    assert_inert(Box(runtime, "box").log_tail([SECRET]))


def test_the_smokes_warnings_line(runtime: LocalRuntime) -> None:
    agent_writes_log(runtime, "box")
    shown = Box(runtime, "box").log_problems([SECRET])
    assert "\x1b" not in shown
    assert "\x07" not in shown
    assert not CONTROLS.search(shown)
    assert " ERROR " in shown  # the line after the carriage return (a line break to us)
    assert "evil" in shown


def test_the_demos_tail_when_an_agent_stops_before_connecting(runtime: LocalRuntime) -> None:
    sandbox = CAST[Role.PM].sandbox
    agent_writes_log(runtime, sandbox)  # no sandbox.json: the runtime says it is absent
    with pytest.raises(DemoError) as stopped:
        cast_ops.wait_connected(runtime, log=lambda _line: None, redact=(SECRET,))
    assert "stopped before its agent connected" in str(stopped.value)
    assert_inert(str(stopped.value))


def test_demo_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "BOXES_HOME", tmp_path / "local-boxes")
    run_dir = tmp_path / "run"
    layout = DemoLayout(run_dir, tmp_path / "boxes")
    layout.make_home()
    layout.write_info(
        RunInfo(
            runtime="local",
            platform="local",
            rest_url="http://127.0.0.1:9",
            ws_url="ws://127.0.0.1:9",
            box_root=str(layout.box_root),
            scenario="happy",
        )
    )
    agent_writes_log(LocalRuntime(layout.runtimes / "local"), CAST[Role.PM].sandbox)
    shown = role_logs(run_dir, "pm")
    for text in READABLE:
        assert text in shown
    assert "\x1b" not in shown
    assert "\x07" not in shown
    assert not CONTROLS.search(shown)


def test_the_demos_voice_and_transcript(tmp_path: Path) -> None:
    shown: list[str] = []
    with Transcript(tmp_path / "transcript.txt", shown.append, hide=(SECRET,)) as say:
        say(f"[Maya (PM)]: {HOSTILE.strip()}")
    assert_inert("\n".join(shown))
    assert_inert((tmp_path / "transcript.txt").read_text())


def test_every_tasks_error_line() -> None:
    @reports("kit.provision")
    def failing() -> None:
        raise BandkitError(f"agent did not connect\n--- startup.log\n{HOSTILE}")

    with pytest.raises(Exit) as exited:
        failing()
    assert exited.value.code == 1
    message = str(exited.value.message)
    assert message.startswith("kit.provision: agent did not connect\n")
    assert "\x1b" not in message
    assert "\x07" not in message
    assert "pwned" in message


def test_kit_pings_printed_reply(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reply is the agent's text; the ping itself is a stand-in here (a real hostile
    agent's reply travels the same print)."""
    monkeypatch.setattr(
        commands, "main_ping", lambda **_kw: agent_check.Pong(reply=HOSTILE, seconds=0.01)
    )
    context = Context(config=Config(overrides=tasks.ns.configuration()))
    kit_tasks.kit_ping(context, name="my-agent")
    out = capsys.readouterr().out
    assert "\x1b" not in out
    assert "\x07" not in out
    assert not CONTROLS.search(out.replace("\n", ""))
    assert "pwned" in out


def test_printable_keeps_lines_tabs_and_text_and_is_idempotent() -> None:
    from bandkit.terminal import printable

    assert printable("a\tb\r\nc\n") == "a\tb\nc\n"
    assert printable("\x1b[2J\x07\x7f\x85\u202e") == "\\x1b[2J\\x07\\x7f\\x85\\u202e"
    assert printable(printable(HOSTILE)) == printable(HOSTILE)
    assert printable("naïve — ünïcode ✓") == "naïve — ünïcode ✓"
