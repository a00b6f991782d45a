"""The docker runtime's drills: the sandbox is a container on its own internal network
(`bandkit.runtimes.docker`), whose only way out is its egress proxy on the host.

- **network**: `docker network disconnect` of the container from its sandbox network,
  held past the SDK's heartbeat watchdog (its dead threshold + `FREEZE_MARGIN_S`, like
  the sleep drill): a black hole, not a close. The agent's socket sees nothing, the
  platform drops it on its keepalive, the SDK's watchdog forces a reconnect whose
  attempts fail until `docker network connect` restores the same endpoint (address,
  gateway, aliases, pinned addresses, links, driver options: compared after, a
  difference fails the drill). With `heal_after_s` set, the kit's health check runs
  after the restore: an agent still offline that long (the SDK waiting out its
  reconnect backoff) gets its container restarted (`docker restart`).
- **sleep** (`DockerBox.frozen`): `docker pause` (the cgroup freezer: every process of
  the container stops at once) past the watchdog, then `docker unpause`.
- **daemon**: the Docker daemon itself is stopped and started again the way it was
  started (`bandkit.ci.dockerd`; back and answering on the way out whatever
  happened, within a deadline). Refused while containers other than the run's are
  running (after waiting up to `OTHERS_WAIT_S` for them to end): they would stop too.
  What happened to the container is measured and recorded (its restart policy, the
  daemon's live-restore, its state after). When it did not survive: `Runtime.start`
  (egress proxy, `docker start`: the launcher runs the agent again); when the agent
  still does not come back: the documented recovery (reap the dead agent and room,
  re-provision).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

from bandkit import processes
from bandkit.ci import dockerd
from bandkit.proxies import egress
from bandkit.runtimes import boxnet
from bandkit.runtimes.base import SandboxError, SandboxStatus, run_tool
from bandkit.runtimes.docker import LABEL, DockerRuntime, Endpoint
from smoke.context import Layout
from smoke.drills.box import AgentLog, Box
from smoke.drills.context import DrillContext, hold_until, offline_within
from smoke.drills.plan import Drill, DrillError, DrillResult, Timings, default_freeze_s
from smoke.drills.recovery import after_daemon, observe, recover
from smoke.drills.shared import SHARED, Runner

T_DOCKER = 60.0
OTHERS_WAIT_S = 120.0  # how long the daemon drill waits for other containers to end


def default_network_outage_s(watchdog_s: float | None = None) -> float:
    """Longer than the agent's heartbeat watchdog, so the silent-socket path is proven."""
    return default_freeze_s(watchdog_s)


@dataclass
class DockerBox(Box):
    """The docker runtime's sandbox: one container, on its own network."""

    @property
    def docker(self) -> DockerRuntime:
        if not isinstance(self.runtime, DockerRuntime):
            raise DrillError(f"the docker drills need the docker runtime, not {self.runtime}")
        return self.runtime

    @contextlib.contextmanager
    def frozen(self) -> Iterator[str]:
        """`docker pause` for the body; `docker unpause` on the way out, whatever happened."""
        try:
            self.docker.pause(self.name)
        except SandboxError as exc:
            raise DrillError(str(exc)) from None
        try:
            yield "container paused (docker pause: the cgroup freezer)"
        finally:
            self.docker.unpause(self.name)

    @contextlib.contextmanager
    def cut_off(self) -> Iterator[list[Endpoint]]:
        """Disconnected from its network for the body; reconnected on the way out with
        the same endpoint, whatever happened. Yields [before], then [before, after]."""
        try:
            before = self.docker.disconnect(self.name)
        except SandboxError as exc:
            raise DrillError(str(exc)) from None
        endpoints = [before]
        try:
            yield endpoints
        finally:
            try:
                endpoints.append(self.docker.reconnect(self.name, before))
            except SandboxError as exc:
                raise DrillError(f"restoring the network failed: {exc}") from None

    def inspect(self, template: str) -> str:
        result = run_tool(
            [self.docker.binary, "inspect", "--type", "container", "--format", template, self.name],
            what="docker inspect",
            timeout=T_DOCKER,
            check=False,
        )
        return result.stdout.strip() if result.returncode == 0 else ""

    def survival_facts(self) -> str:
        """What decides whether the container outlives a daemon restart."""
        policy = json.loads(self.inspect("{{json .HostConfig.RestartPolicy}}") or "{}")
        live = run_tool(
            [self.docker.binary, "info", "--format", "{{.LiveRestoreEnabled}}"],
            what="docker info",
            timeout=T_DOCKER,
            check=False,
        ).stdout.strip()
        return f"restart policy {policy.get('Name') or 'no'}, live-restore {live or 'unknown'}"

    def restart(self) -> float:
        """`docker restart` (the launcher runs the agent again); seconds it took."""
        started = time.monotonic()
        run_tool(
            [self.docker.binary, "restart", "--time", "5", self.name],
            what="docker restart",
            timeout=T_DOCKER,
        )
        return time.monotonic() - started

    def others_running(self) -> list[str]:
        """Running containers other than this sandbox (a daemon restart stops them too)."""
        out = run_tool(
            [self.docker.binary, "ps", "--format", "{{.Names}}"],
            what="docker ps",
            timeout=T_DOCKER,
        ).stdout
        return sorted(set(out.split()) - {self.name})


def _box(ctx: DrillContext) -> DockerBox:
    if not isinstance(ctx.box, DockerBox):
        raise DrillError("the docker drills need a docker sandbox")
    return ctx.box


def network_cut(ctx: DrillContext) -> DrillResult:
    box = _box(ctx)
    t = Timings()
    mark = len(box.log_lines())
    cut = time.monotonic()
    with box.cut_off() as endpoints:
        notes = [
            f"disconnected from {endpoints[0].network} ({endpoints[0]}) for "
            f"{ctx.network_outage_s:g}s (SDK heartbeat watchdog: {ctx.watchdog_s:g}s)"
        ]
        token = ctx.send_outage_marker()
        restore_at = cut + ctx.network_outage_s
        t.offline_after_s = offline_within(ctx, cut, restore_at)
        hold_until(restore_at)
    restored = time.monotonic()
    t.outage_s = restored - cut
    notes.append(f"reconnected in {restored - restore_at:.1f}s with the same endpoint")
    if t.offline_after_s is None:
        notes.append("the platform kept the cut-off agent's socket open")
    if ctx.heal_after_s is not None:
        notes.append(_heal(ctx, box, ctx.heal_after_s))
    ok = recover(ctx, Drill.NETWORK, token, restored, t, notes)
    seen = AgentLog.since(box, mark)
    notes += seen.notes()
    if ok:
        observe(ctx, Drill.NETWORK, t, "; ".join(notes))
    return DrillResult(Drill.NETWORK, ok, t, notes, seen.backoff_s)


def _heal(ctx: DrillContext, box: DockerBox, grace_s: float) -> str:
    """The kit's health check: an agent still offline `grace_s` after the network came
    back (the SDK waiting out its backoff) gets its container restarted."""
    if ctx.wait_online(True, grace_s) is not None:
        return f"health check: the agent was back within {grace_s:g}s, nothing to do"
    try:
        took = box.restart()
    except SandboxError as exc:
        return f"health check: restarting the container failed: {exc}"
    return (
        f"health check: the agent was still offline {grace_s:g}s after the network "
        f"returned; restarted its container (docker restart) in {took:.1f}s"
    )


def daemon_restart(ctx: DrillContext) -> DrillResult:
    box = _box(ctx)
    deadline = time.monotonic() + OTHERS_WAIT_S
    while (others := box.others_running()) and time.monotonic() < deadline:
        time.sleep(1.0)  # a container that is about to end: give it a moment
    if others:
        shown = ", ".join(others[:5]) + (" ..." if len(others) > 5 else "")
        raise DrillError(
            f"other containers run on this Docker daemon ({shown}); restarting it would stop "
            "them: stop them first, or leave the daemon drill out (--drills network,sleep,platform)"
        )
    try:
        daemon = dockerd.find()
    except dockerd.DockerdError as exc:
        raise DrillError(str(exc)) from None
    t = Timings()
    notes = [f"restarted {daemon.describe()}; the container's {box.survival_facts()}"]
    cut = time.monotonic()
    try:
        with dockerd.stopped(daemon) as restart:
            notes.append(f"dockerd exited {restart.stop_s:.1f}s after TERM")
            token = ctx.send_outage_marker()
            t.offline_after_s = offline_within(ctx, cut, time.monotonic() + 10.0)
            hold_until(time.monotonic() + ctx.daemon_down_s)
    except dockerd.DockerdError as exc:
        raise DrillError(f"the Docker daemon restart failed: {exc}") from None
    restored = time.monotonic()
    t.outage_s = restored - cut
    notes.append(f"dockerd answered {restart.start_s or 0:.1f}s after its relaunch")
    state = box.inspect("{{.State.Status}} (exit code {{.State.ExitCode}})") or "absent"
    survived = box.status() is SandboxStatus.RUNNING
    notes.append(
        f"the container {'survived' if survived else 'did not survive'} the restart: {state}"
    )
    if not survived and ctx.relaunch:
        started = time.monotonic()
        try:
            box.runtime.start(box.name)
            notes.append(
                f"relaunched (egress proxy, docker start) in {time.monotonic() - started:.1f}s"
            )
        except SandboxError as exc:
            notes.append(f"relaunch failed: {exc}")
    elif not survived:
        notes.append("not relaunched (recovery broken on purpose)")
    return after_daemon(ctx, token, restored, t, notes, back=survived or ctx.relaunch)


RUNNERS: dict[Drill, Runner] = {
    **SHARED,
    Drill.NETWORK: network_cut,
    Drill.DAEMON: daemon_restart,
}


def leftovers(layout: Layout, sandbox: str) -> list[str]:
    """The run's container, network, host-side proxies and stored key, when left."""
    rt_dir = layout.kit_dir / "runtimes" / "docker"
    box = rt_dir / "docker" / sandbox
    found = []
    for kind, argv in (
        ("container", ["ps", "--all", "--filter", f"label={LABEL}={sandbox}"]),
        ("network", ["network", "ls", "--filter", f"label={LABEL}={sandbox}"]),
    ):
        result = run_tool(
            ["docker", *argv, "--format", "{{.Name}}" if kind == "network" else "{{.Names}}"],
            what=f"docker {kind} list",
            timeout=T_DOCKER,
            check=False,
        )
        if result.returncode != 0:
            found.append(f"docker {kind}s not listable: {result.stderr.strip()[:200]}")
        found += [f"docker {kind} {name}" for name in result.stdout.split()]
    for tag in (egress.egress_tag(box), boxnet.proxy_tag(box)):
        pids = processes.tagged_pids(tag)
        if pids:
            found.append(f"processes {pids} ({tag.split(':', 1)[0]})")
    keychain = rt_dir / "keychain" / f"{sandbox}.json"
    if keychain.exists():
        found.append(f"stored key {keychain}")
    if box.exists():
        found.append(f"box directory {box}")
    return found
