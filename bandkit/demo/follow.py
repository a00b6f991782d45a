"""`demo.logs --follow`: the three sandboxes' logs, interleaved, like `docker compose logs -f`.

Each line is prefixed with where it comes from: the role (`pm`, `dev`, `architect`) for
the agent's own output (the kit startup log), `<role>/launcher` for the launcher's log.
It first shows the last `lines` lines of each log, then every new line as it appears,
reading each running sandbox through its runtime's `logs()` (local: the box's files;
docker: `docker logs` and the launcher log in the container; sbx: the supervisor's attach
log or the logs in the sandbox) every `poll_s` seconds, all sandboxes at once. A sandbox
that is not running yet (or any more) is skipped until it runs; a log that got shorter
(the agent restarted) is read from its start again.

It works beside a running `demo.up` (it reads the manifest and the run record without
the lock, as `demo.status` does), waits while the run is being set up, and ends by itself
when the run's manifest goes away (the teardown finished), or on Ctrl-C. What a sandbox
wrote is untrusted: control characters (terminal escapes) are shown escaped, never sent
to the terminal as they are.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from bandkit.demo import DemoError
from bandkit.demo.layout import DemoLayout, RunInfo
from bandkit.runtimes.base import Logs, Runtime, RuntimeName, SandboxError, SandboxStatus
from bandkit.runtimes.select import get_runtime
from bandkit.terminal import printable
from examples.docker_demo.cast import CAST, Member

POLL_S: Final = {RuntimeName.LOCAL.value: 0.5}  # docker and sbx: each read runs their CLI
DEFAULT_POLL_S: Final = 2.0
MAX_LINE_CHARS: Final = 4000
Out = Callable[[str], None]


def shown(line: str) -> str:
    """One log line as shown: its control characters escaped (`terminal.printable`: a
    sandbox's log cannot move the cursor, retitle the terminal or hide lines), and cut at
    `MAX_LINE_CHARS`."""
    text = printable(line)
    return text if len(text) <= MAX_LINE_CHARS else text[:MAX_LINE_CHARS] + "…"


@dataclass
class Stream:
    """One log of one sandbox, and how much of it was shown."""

    label: str
    seen: int = 0  # characters of the log already handled
    held: str = ""  # a last line without its newline yet

    def take(self, text: str, *, last: int | None = None) -> list[str]:
        """The complete new lines of `text` (the whole log as read now); `last`: only the
        last so many (the first read)."""
        if len(text) < self.seen:  # truncated or restarted: read it from the start
            self.seen, self.held = 0, ""
        fresh = self.held + text[self.seen :]
        self.seen = len(text)
        lines = fresh.split("\n")
        self.held = lines.pop()
        return lines if last is None else lines[-last:] if last > 0 else []


@dataclass
class Box:
    member: Member
    startup: Stream
    launcher: Stream
    started: bool = False  # read at least once (the first read shows only the tail)

    @classmethod
    def of(cls, member: Member) -> Box:
        role = member.role.value
        return cls(member, Stream(role), Stream(f"{role}/launcher"))


@dataclass
class Follower:
    """Reads every box once per `tick`; `out` gets each new line, prefixed."""

    runtime: Runtime
    boxes: list[Box]
    out: Out
    lines: int
    width: int = field(init=False)

    def __post_init__(self) -> None:
        self.width = max(len(s.label) for b in self.boxes for s in (b.startup, b.launcher))

    def tick(self) -> None:
        # The boxes are read at once (on sbx and docker each read runs their CLI, a second
        # or more on a loaded machine), then shown in order.
        with ThreadPoolExecutor(max_workers=len(self.boxes)) as pool:
            read = list(pool.map(lambda box: self._read(box.member.sandbox), self.boxes))
        for box, logs in zip(self.boxes, read, strict=True):
            if logs is None:
                continue
            last = None if box.started else self.lines
            box.started = True
            for stream, text in ((box.startup, logs.startup), (box.launcher, logs.launcher)):
                for line in stream.take(text, last=last):
                    self.out(f"{stream.label:<{self.width}} | {shown(line)}")

    def _read(self, sandbox: str) -> Logs | None:
        try:
            if self.runtime.status(sandbox) is not SandboxStatus.RUNNING:
                return None  # not made yet, or gone: nothing to read (sbx exec would start it)
            return self.runtime.logs(sandbox)
        except SandboxError:
            return None


def _record(layout: DemoLayout) -> RunInfo | None:
    info = layout.read_info()
    return info if layout.manifest.exists() else None


def follow(
    run_dir: Path,
    *,
    roles: Iterable[Member] | None = None,
    lines: int = 60,
    out: Out = print,
    sleep: Callable[[float], None] = time.sleep,
    runtime_for: Callable[[RunInfo, DemoLayout], Runtime] | None = None,
) -> str:
    """Follow the run in `run_dir` until its manifest goes away; returns the closing line.
    Raises DemoError when no run is recorded there."""
    layout = DemoLayout.for_run_dir(run_dir)
    if not layout.manifest.exists():
        raise DemoError(
            f"no demo run in progress in {layout.home} (no manifest): start one with "
            "`uv run invoke demo.up`, then follow it from another terminal"
        )
    info = _record(layout)
    while info is None:  # the run is being set up: its record comes with the platform
        if not layout.manifest.exists():
            return "demo.logs: the run ended before its sandboxes were recorded"
        sleep(DEFAULT_POLL_S / 4)
        info = _record(layout)
    boxes_layout = DemoLayout(layout.run_dir, Path(info.box_root))
    runtime = (runtime_for or _runtime)(info, boxes_layout)
    chosen = list(roles) if roles is not None else list(CAST.values())
    follower = Follower(runtime, [Box.of(m) for m in chosen], out, lines)
    poll_s = POLL_S.get(info.runtime, DEFAULT_POLL_S)
    out(
        f"demo.logs: following {', '.join(m.role.value for m in chosen)} on the "
        f"{info.runtime} runtime; it ends with the run (or Ctrl-C)"
    )
    while layout.manifest.exists():
        follower.tick()
        sleep(poll_s)
    return "demo.logs: the run ended (its manifest is gone)"


def _runtime(info: RunInfo, layout: DemoLayout) -> Runtime:
    try:
        return get_runtime(info.runtime, run_dir=layout.runtimes)
    except SandboxError as exc:
        raise DemoError(f"cannot ask the {info.runtime} runtime: {exc}") from None
