"""The local runtime's drills: the box is a tree of host processes (`bandkit.runtimes.hostbox`).

- **network**: the platform holds every agent request and socket upgrade
  (`faults/pause`: connects hang, as on a black-holed network), then aborts every
  socket with no close frame (`faults/drop`); restored when the pause ends on the
  platform's own timer.
- **sleep** (`LocalBox.frozen`): SIGSTOP of every process of the box (the launcher/agent
  tree, found by its tag), held past the SDK's heartbeat watchdog; restored by SIGCONT.
- **daemon**: `Runtime.stop` (the box's processes end), then `Runtime.start` (the
  launcher starts the agent again). When the agent does not come back, the documented
  recovery: reap the dead agent and room, re-provision, probe the new agent.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bandkit import processes
from bandkit.runtimes import boxnet, hostbox
from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.local import LocalRuntime
from smoke.context import Layout
from smoke.drills.box import AgentLog, Box
from smoke.drills.context import DrillContext, hold_until, offline_within
from smoke.drills.plan import Drill, DrillError, DrillResult, Timings
from smoke.drills.recovery import after_daemon, observe, recover
from smoke.drills.shared import SHARED, Runner


@dataclass
class LocalBox(Box):
    """The local runtime's sandbox: the box's host processes, found by their tag."""

    def root(self) -> Path:
        """The box root, where the runtime keeps it (outside a private run directory)."""
        if not isinstance(self.runtime, LocalRuntime):
            raise DrillError(f"the {self.runtime.name} runtime has no box processes to freeze")
        return self.runtime.boxes_root() / self.name

    def pids(self) -> list[int]:
        return processes.tagged_pids(hostbox.box_tag(self.root()))

    def signal(self, pids: list[int], sig: signal.Signals) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[str]:
        """SIGSTOP the box's process tree; SIGCONT it on the way out, whatever happened."""
        pids = self.pids()
        if not pids:
            raise DrillError(f"sandbox {self.name} has no running processes to freeze")
        self.signal(pids, signal.SIGSTOP)
        try:
            yield f"{len(pids)} process(es) stopped (SIGSTOP)"
        finally:
            self.signal(pids, signal.SIGCONT)


def network_cut(ctx: DrillContext) -> DrillResult:
    t = Timings()
    notes: list[str] = []
    mark = len(ctx.box.log_lines())
    cut = time.monotonic()
    ctx.target.pause(ctx.network_outage_s)  # first: the reconnect attempts then hang
    restore_at = cut + ctx.network_outage_s
    dropped = ctx.target.drop_sockets()
    notes.append(f"{dropped} socket(s) dropped; agent traffic held {ctx.network_outage_s:g}s")
    t.offline_after_s = offline_within(ctx, cut, restore_at)
    token = ctx.send_outage_marker()
    hold_until(restore_at)
    ctx.target.wait_serving(10.0)
    restored = restore_at  # the platform's pause timer started after `cut`: a lower bound
    t.outage_s = restored - cut
    ok = recover(ctx, Drill.NETWORK, token, restored, t, notes)
    seen = AgentLog.since(ctx.box, mark)
    notes += seen.notes()[1:]
    if ok:
        observe(ctx, Drill.NETWORK, t, "; ".join(notes))
    return DrillResult(Drill.NETWORK, ok, t, notes, seen.backoff_s)


def daemon_restart(ctx: DrillContext) -> DrillResult:
    t = Timings()
    notes: list[str] = []
    cut = time.monotonic()
    try:
        ctx.box.runtime.stop(ctx.box.name)
    except SandboxError as exc:
        raise DrillError(f"could not stop sandbox {ctx.box.name}: {exc}") from None
    notes.append(f"sandbox stopped in {time.monotonic() - cut:.1f}s ({ctx.box.status()})")
    t.offline_after_s = offline_within(ctx, cut, time.monotonic() + 10.0)
    token = ctx.send_outage_marker()
    hold_until(time.monotonic() + ctx.daemon_down_s)
    if ctx.relaunch:
        try:
            ctx.box.runtime.start(ctx.box.name)
        except SandboxError as exc:
            notes.append(f"relaunch failed: {exc}")
    else:
        notes.append("not relaunched (recovery broken on purpose)")
    restored = time.monotonic()
    t.outage_s = restored - cut
    return after_daemon(ctx, token, restored, t, notes, back=ctx.relaunch)


RUNNERS: dict[Drill, Runner] = {
    **SHARED,
    Drill.NETWORK: network_cut,
    Drill.DAEMON: daemon_restart,
}


def local_dir(layout: Layout) -> Path:
    """The local runtime's state directory of the smoke (`provision.runtime_for`)."""
    return layout.kit_dir / "runtimes" / "local"


def leftovers(layout: Layout, sandbox: str) -> list[str]:
    """The run's box and proxy processes and stored key, when left."""
    found = []
    box = LocalRuntime(local_dir(layout)).boxes_root() / sandbox
    for tag in (hostbox.box_tag(box), boxnet.proxy_tag(box)):
        pids = processes.tagged_pids(tag)
        if pids:
            found.append(f"processes {pids} ({tag.split(':', 1)[0]})")
    keychain = local_dir(layout) / "keychain" / f"{sandbox}.json"
    if keychain.exists():
        found.append(f"stored key {keychain}")
    return found
