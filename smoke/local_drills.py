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

from bandkit.runtimes import boxnet, hostbox, processes
from bandkit.runtimes.base import SandboxError
from smoke import drills as dr
from smoke.context import Layout


@dataclass
class LocalBox(dr.Box):
    """The local runtime's sandbox: the box's host processes, found by their tag."""

    def root(self) -> Path:
        run_dir = getattr(self.runtime, "run_dir", None)
        if run_dir is None:
            raise dr.DrillError(f"the {self.runtime.name} runtime has no box processes to freeze")
        return Path(run_dir) / "boxes" / self.name

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
            raise dr.DrillError(f"sandbox {self.name} has no running processes to freeze")
        self.signal(pids, signal.SIGSTOP)
        try:
            yield f"{len(pids)} process(es) stopped (SIGSTOP)"
        finally:
            self.signal(pids, signal.SIGCONT)


def network_cut(ctx: dr.DrillContext) -> dr.DrillResult:
    t = dr.Timings()
    notes: list[str] = []
    mark = len(ctx.box.log_lines())
    cut = time.monotonic()
    ctx.target.pause(ctx.network_outage_s)  # first: the reconnect attempts then hang
    restore_at = cut + ctx.network_outage_s
    dropped = ctx.target.drop_sockets()
    notes.append(f"{dropped} socket(s) dropped; agent traffic held {ctx.network_outage_s:g}s")
    t.offline_after_s = dr.offline_within(ctx, cut, restore_at)
    token = ctx.send_outage_marker()
    dr.hold_until(restore_at)
    ctx.target.wait_serving(10.0)
    restored = restore_at  # the platform's pause timer started after `cut`: a lower bound
    t.outage_s = restored - cut
    ok = dr.recover(ctx, dr.Drill.NETWORK, token, restored, t, notes)
    seen = dr.AgentLog.since(ctx.box, mark)
    notes += seen.notes()[1:]
    if ok:
        dr.observe(ctx, dr.Drill.NETWORK, t, "; ".join(notes))
    return dr.DrillResult(dr.Drill.NETWORK, ok, t, notes, seen.backoff_s)


def daemon_restart(ctx: dr.DrillContext) -> dr.DrillResult:
    t = dr.Timings()
    notes: list[str] = []
    cut = time.monotonic()
    try:
        ctx.box.runtime.stop(ctx.box.name)
    except SandboxError as exc:
        raise dr.DrillError(f"could not stop sandbox {ctx.box.name}: {exc}") from None
    notes.append(f"sandbox stopped in {time.monotonic() - cut:.1f}s ({ctx.box.status()})")
    t.offline_after_s = dr.offline_within(ctx, cut, time.monotonic() + 10.0)
    token = ctx.send_outage_marker()
    dr.hold_until(time.monotonic() + ctx.daemon_down_s)
    if ctx.relaunch:
        try:
            ctx.box.runtime.start(ctx.box.name)
        except SandboxError as exc:
            notes.append(f"relaunch failed: {exc}")
    else:
        notes.append("not relaunched (recovery broken on purpose)")
    restored = time.monotonic()
    t.outage_s = restored - cut
    return dr.after_daemon(ctx, token, restored, t, notes, back=ctx.relaunch)


RUNNERS: dict[dr.Drill, dr.Runner] = {
    **dr.SHARED,
    dr.Drill.NETWORK: network_cut,
    dr.Drill.DAEMON: daemon_restart,
}


def leftovers(layout: Layout, sandbox: str) -> list[str]:
    """The run's box and proxy processes and stored key, when left."""
    found = []
    box = layout.kit_dir / "runtimes" / "local" / "boxes" / sandbox
    for tag in (hostbox.box_tag(box), boxnet.proxy_tag(box)):
        pids = processes.tagged_pids(tag)
        if pids:
            found.append(f"processes {pids} ({tag.split(':', 1)[0]})")
    keychain = layout.kit_dir / "runtimes" / "local" / "keychain" / f"{sandbox}.json"
    if keychain.exists():
        found.append(f"stored key {keychain}")
    return found
