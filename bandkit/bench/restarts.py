"""Restarts benchmark (issue 26): how long a restart keeps agents away, on the local runtime.

Everything is real and on 127.0.0.1: the local platform (`platform.up`'s `service.up`, its
state on disk), echo agents provisioned as `kit.provision --runtime local` does (as root,
each box a uid of its own), the kit's own task functions (`kit.ping`, `kit.resume --all`)
called in process so the figures hold no interpreter start-up.

- (a) platform crash: `kill -9` the platform while its agent runs, `platform.up` (the same
  address, from its state), then `kit.ping` until the agent answers (its mention waits in
  the room while the agent reconnects by itself). Figures: kill -> answering, the
  platform.up itself, and platform back -> answering, which is what the smoke's platform
  drill measures (platform restored -> reconnected: 4.5 s with an unchanged address, the
  anchor). `ROUNDS` crashes (1 in quick mode), p50 and max, each on an agent whose
  connection has settled (held as long as band-sdk's ReconnectPolicy needs to forget
  earlier drops: `stable_reset_s`, `rapid_window_s`; not waited for in quick mode). Then,
  in full mode, `BACK_TO_BACK` crashes each right after the agent answered: the SDK
  counts quick drops and failed connects, and from the third holds off its next attempt.
- (b) a reboot, simulated: every host process the kit started killed by SIGKILL (the
  platform; each box's agent, launcher and credential proxy, found by their tags), then
  `kit.resume --all` (the platform from its state, every box started again, each proven
  connected), then every agent pinged at once. Figures: resume -> every agent connected
  (its return) and resume -> every agent answering, for 1 and for 10 agents (1 only in
  quick mode). No anchor: the numbers are stated as measured.

The upstream kit has no local platform, no resume and no local runtime: nothing to
compare with. `BAND_*` settings of this process are set aside while it runs (the agents
are on the bench's own platform, never the user's).
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from bandkit import daemons, processes
from bandkit.bench import quick, sized
from bandkit.emulator import service
from bandkit.image.facts import STARTER_DIR
from bandkit.kit import commands, resume
from bandkit.kit.resume import RECONNECT_GRACE_S
from bandkit.runtimes.local import LocalRuntime

ROUNDS = 3
BACK_TO_BACK = 2  # full mode: crashes each right after the agent answered
SIZES = (1, 10)
ANCHOR_PLATFORM_S = 4.5  # the smoke's platform drill: platform back -> reconnected
PING_TIMEOUT_S = 120.0  # one mention, answered once the agent is back
GONE_TIMEOUT_S = 10.0


@contextmanager
def _no_band_env() -> Iterator[None]:
    """This process's BAND_* settings set aside: the bench's own local platform only."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("BAND_")}
    for key in saved:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.update(saved)


class _Run:
    """One run directory: its platform, its agents' workspaces, their boxes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.run_dir = root / ".run"
        self.names: list[str] = []

    def boxes_root(self) -> Path:
        return LocalRuntime(self.run_dir / "runtimes" / "local").boxes_root()

    def provision(self, name: str) -> None:
        ws = self.root / name
        shutil.copytree(STARTER_DIR, ws, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
        for path in (ws, *ws.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        commands.main(
            name=name,
            description="the restarts benchmark's echo agent",
            workspace=ws,
            agent_name="",
            host="",
            rest_url="",
            create=True,
            kit=None,
            runtime="local",
            timeout=120,
            run_dir=self.run_dir,
        )
        self.names.append(name)

    def ping(self, name: str) -> float:
        """`kit.ping --name NAME`: seconds from the mention to the reply."""
        pong = commands.main_ping(
            name=name, rest_url="", run_dir=self.run_dir, timeout=PING_TIMEOUT_S
        )
        return pong.seconds

    def kill_platform(self) -> None:
        record = service.running(self.run_dir)
        if record is None:
            raise RuntimeError(f"no platform runs in {self.run_dir}")
        os.kill(record.pid, signal.SIGKILL)
        _until(lambda: not daemons.runs_module(record.pid, service.MODULE), "the platform")

    def box_pids(self) -> list[int]:
        """Every process of this run's boxes (agents, launchers, credential proxies)."""
        root = str(self.boxes_root()).encode()
        tag = f"{processes.TAG_ENV}=".encode()
        return processes.scan(lambda p: any(e.startswith(tag) and root in e for e in p.environ))

    def reboot(self) -> int:
        """Every host process of the run killed, as a power cut does; how many."""
        pids = self.box_pids()
        for pid in pids:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.kill_platform()
        _until(lambda: not self.box_pids(), "the boxes' processes")
        return len(pids) + 1

    def cleanup(self) -> list[str]:
        """`kit.unprovision` of every agent, then whatever is left of the scratch run
        killed and deleted; a line for each agent whose unprovision did not finish."""
        problems = []
        for name in self.names:
            try:
                lines, clean = commands.main_unprovision(
                    name=name, rest_url="", run_dir=self.run_dir
                )
            except Exception as exc:  # the platform's or the runtime's words: the line says
                lines, clean = [f"{type(exc).__name__}: {exc}"], False
            if not clean:
                said = "; ".join(lines)
                problems.append(f"restarts: cleanup failed: kit.unprovision {name}: {said}")
        for pid in self.box_pids():
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        service.down(self.run_dir)
        boxes = self.boxes_root()
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(boxes, ignore_errors=True)
        return problems


def _until(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not die within {GONE_TIMEOUT_S:g}s of SIGKILL")
        time.sleep(0.02)


def _p50(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"p50 {statistics.median(values):.2f}s (max {max(values):.2f}s, n={len(values)})"


def _policy() -> tuple[float, str]:
    """(how long the SDK must hold a connection before a drop counts as a first one again,
    its hold-down after repeated quick drops), from band-sdk's ReconnectPolicy."""
    from phoenix_channels_python_client.client_types import (  # type: ignore[import-untyped]
        ReconnectPolicy,
    )

    p = ReconnectPolicy(reconnect_on_normal_close=True)
    low, high = p.rapid_hold_down_jitter_low_ratio, p.rapid_hold_down_jitter_high_ratio
    hold = f"{p.rapid_cooldown_base_s * low:g}-{p.rapid_cooldown_base_s * high:g}s"
    return float(max(p.stable_reset_s, p.rapid_window_s)), hold


@dataclass(frozen=True)
class Crash:
    total_s: float  # kill -9 -> the agent answered
    up_s: float  # platform.up itself
    back_s: float  # platform.up returned -> the agent answered


def _crash(run: _Run, name: str, rest_url: str) -> Crash:
    """kill -9 the platform, platform.up, then kit.ping until the agent answers."""
    killed = time.monotonic()
    run.kill_platform()
    started = time.monotonic()
    record, _ = service.up(run.run_dir)  # what `platform.up` does
    restored = time.monotonic()
    if record.rest_url != rest_url:
        raise RuntimeError(f"platform.up moved the platform from {rest_url} to {record.rest_url}")
    run.ping(name)  # its mention waits in the room while the agent reconnects
    answered = time.monotonic()
    return Crash(answered - killed, restored - started, answered - restored)


def bench_platform_crash(run: _Run, name: str, rounds: int) -> list[str]:
    """(a): kill -9 the platform, platform.up, the agent answering kit.ping again; each
    crash on an agent whose connection has settled, then (full mode) two back to back."""
    before = service.running(run.run_dir)
    assert before is not None
    forget_s, hold = _policy()
    settle = sized(forget_s, 0.0)
    crashes = []
    run.ping(name)
    answered = time.monotonic()
    for _ in range(rounds):
        time.sleep(max(0.0, answered + settle - time.monotonic()))
        crashes.append(_crash(run, name, before.rest_url))
        answered = time.monotonic()
    back = [c.back_s for c in crashes]
    verdict = "within" if statistics.median(back) <= ANCHOR_PLATFORM_S else "OVER"
    settled = (
        f"each kill {settle:g}s after the agent last connected, when the SDK's reconnect "
        "counters have reset"
        if settle
        else "quick mode: the kill right after provisioning"
    )
    lines = [
        f"restarts (a) platform kill -9 -> platform.up -> agent answering kit.ping ({settled}):",
        f"restarts (a)   kill -> answering {_p50([c.total_s for c in crashes])}",
        f"restarts (a)   platform.up (same address {before.rest_url}, from its state) "
        f"{_p50([c.up_s for c in crashes])}",
        f"restarts (a)   platform back -> agent answering {_p50(back)} ({verdict} the "
        f"{ANCHOR_PLATFORM_S:g} s the smoke's platform drill measured with an unchanged address)",
    ]
    if quick():
        return lines
    again = [_crash(run, name, before.rest_url) for _ in range(BACK_TO_BACK)]
    shown = ", ".join(f"{c.back_s:.2f}s" for c in again)
    lines.append(
        f"restarts (a) back to back (each kill right after the agent answered): platform back "
        f"-> answering {shown}. The SDK counts each quick drop and failed connect within "
        f"{forget_s:g}s and from the third holds off {hold}; kit.resume starts again a box "
        f"not back {RECONNECT_GRACE_S:g}s after its platform"
    )
    return lines


def bench_reboot(run: _Run) -> list[str]:
    """(b): a simulated reboot, kit.resume --all, every agent answering."""
    killed = run.reboot()
    notes: list[str] = []
    started = time.monotonic()
    outcomes = resume.main_resume(run_dir=run.run_dir, every=True, log=notes.append)
    connected = time.monotonic() - started
    with ThreadPoolExecutor(max_workers=len(run.names)) as pool:
        list(pool.map(run.ping, run.names))
    answered = time.monotonic() - started
    each = [o.seconds for o in outcomes if o.seconds is not None]
    count = len(run.names)
    return [
        f"restarts (b) {count} agent(s), {killed} host processes killed: kit.resume --all -> "
        f"every agent connected {connected:.2f}s (per agent {_p50(each)}); -> every agent "
        f"answering kit.ping {answered:.2f}s (no target: as measured)"
    ]


def run() -> list[str]:
    root = Path(tempfile.mkdtemp(prefix="bench-restarts-", dir="/tmp"))
    root.chmod(0o755)  # the agent uids read the workspaces in place
    scratch = _Run(root)
    lines = []
    with _no_band_env():
        try:
            service.up(scratch.run_dir)
            scratch.provision("restarts-0")
            lines += bench_platform_crash(scratch, "restarts-0", sized(ROUNDS, 1))
            for size in sized(SIZES, SIZES[:1]):
                while len(scratch.names) < size:
                    scratch.provision(f"restarts-{len(scratch.names)}")
                lines += bench_reboot(scratch)
        finally:
            problems = scratch.cleanup()
    return lines + problems


if __name__ == "__main__":
    print("\n".join(run()))
