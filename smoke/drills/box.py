"""The run's sandbox as the drills handle it (`Box`: each runtime's drills module
subclasses it with the way to freeze it) and what its agent logged during a drill
(`AgentLog`: the SDK's heartbeat watchdog firing, its reconnect delays).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

from bandkit.kit import commands
from bandkit.runtimes.base import Runtime, SandboxError, SandboxStatus
from bandkit.terminal import printable
from smoke.drills.plan import DrillError

WATCHDOG_LOG = "No heartbeat ack within"  # the SDK's watchdog warning (band/client/streaming)
BACKOFF_RE = re.compile(r"SDK reconnect delay ([0-9.]+)s \(attempt (\d+)\)")  # smoke agent


@dataclass
class Box:
    """The run's sandbox as the drills handle it; each runtime's drills module subclasses
    it with the way to freeze it (`frozen`) and whatever its own drills need."""

    runtime: Runtime
    name: str

    def status(self) -> SandboxStatus:
        return self.runtime.status(self.name)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[str]:
        """Freeze the sandbox for the body, thaw it on the way out whatever happened;
        yields a note (what was frozen)."""
        raise DrillError(f"the {self.runtime.name} runtime has no way to freeze a sandbox")
        yield ""  # pragma: no cover

    def log_tail(self, redact: list[str]) -> str:
        return commands.log_tail(self.runtime, self.name, redact)

    def log_lines(self) -> list[str]:
        """The agent's startup log (its stdout/stderr), [] when unreadable."""
        try:
            return self.runtime.logs(self.name).startup.splitlines()
        except SandboxError:
            return []

    def log_problems(self, redact: list[str], count: int = 4) -> str:
        """The agent's last ERROR/WARNING lines (its startup log), secrets replaced."""
        try:
            text = self.runtime.logs(self.name).startup
        except SandboxError as exc:
            return f"(no logs: {exc})"
        lines = [ln.strip() for ln in text.splitlines() if " ERROR " in ln or " WARNING " in ln]
        out = " | ".join(lines[-count:]) or "(no warnings or errors logged)"
        for value in redact:
            if value:
                out = out.replace(value, "***")
        return printable(out)


@dataclass
class AgentLog:
    """What the agent logged during a drill: its watchdog firing, its reconnect delays."""

    watchdog_fired: int
    backoff_s: list[float]

    @classmethod
    def since(cls, box: Box, mark: int) -> AgentLog:
        lines = box.log_lines()[mark:]
        delays = [float(m.group(1)) for ln in lines if (m := BACKOFF_RE.search(ln))]
        return cls(sum(WATCHDOG_LOG in ln for ln in lines), delays)

    def notes(self) -> list[str]:
        fired = (
            f"the SDK's heartbeat watchdog fired {self.watchdog_fired} time(s)"
            if self.watchdog_fired
            else "the SDK's heartbeat watchdog did not fire (the agent saw its socket fail first)"
        )
        if not self.backoff_s:
            return [fired, "no SDK reconnect delay logged"]
        waits = ", ".join(f"{d:.1f}" for d in self.backoff_s)
        return [fired, f"SDK reconnect backoff: {len(self.backoff_s)} wait(s) of {waits}s"]
