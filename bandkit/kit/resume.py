"""`kit.status` and `kit.resume`: what a restart took from each provisioned agent, and
bringing it back.

An agent provisioned in a run directory is its manifest (`<run_dir>/provision/<name>/`):
the agent entry (its id, and the platform it is on: URL and identity,
`platforms.PlatformRef`), its sandbox (the runtime that made it) and its home room.

`status` lists, for each agent, every part and whether it is up: the platform
(`platforms.Probe`), the runtime's parts (`Runtime.parts`: the container or the agent's
processes, the firewall chain, the egress and credential proxies, the sbx supervisor) and
whether the platform lists the agent connected in its home room. It changes nothing.

`resume` (one agent, or every one; idempotent) brings back what is down, in the order a
box needs it: first the platform, when it is a local one (`platform.up` again in its run
directory: the same address, from its state); then each agent's sandbox parts
(`Runtime.resume`: the firewall before the container, the proxies where the box looks
for them), read again afterwards: a part still down fails that agent, named, and is
never reported as brought back; then, once every box is started, it proves each agent
connected as provisioning does (the platform lists it online in its home room), polling
all of them together. A box that ran all along reconnects by itself, but the SDK backs off while its
platform is away (up to a minute after a long outage): after `RECONNECT_GRACE_S` without
it, the box is started again once. A platform whose state is gone cannot be resumed: its
agents' records are moot, and `kit.unprovision` clears them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from bandkit.emulator import service
from bandkit.errors import BandkitError
from bandkit.kit import agent_check
from bandkit.kit.commands import choose_platform, log_tail, user_key
from bandkit.kit.platforms import PlatformRef, Probe, Reach, Standing
from bandkit.manifest import Kind, Manifest, ManifestError, Resource
from bandkit.runtimes.base import Part, Runtime, SandboxError, validate_name
from bandkit.runtimes.select import get_runtime

Log = Callable[[str], None]
RECONNECT_GRACE_S = 10.0  # for a box that ran all along: the SDK's first backoff steps
Key = Callable[[], str]  # the user key for a platform without a key file (asked lazily)


class ResumeError(BandkitError):
    """Some agents did not come back; the lines above said which and why."""


def manifests_dir(run_dir: Path) -> Path:
    return run_dir / "provision"


def recorded_names(run_dir: Path) -> list[str]:
    """Every sandbox name provisioned in `run_dir` (a manifest under provision/<name>/)."""
    root = manifests_dir(run_dir)
    if not root.is_dir():
        return []
    names = []
    for child in sorted(root.iterdir()):
        try:
            validate_name(child.name)
        except SandboxError:
            continue  # not one of ours: never a path we join or a name we pass on
        if (child / "manifest.json").is_file():
            names.append(child.name)
    return names


@dataclass(frozen=True)
class Recorded:
    """What a manifest says about one provisioned agent."""

    name: str
    agent_id: str  # "" when provisioning stopped before the platform answered
    platform: PlatformRef
    runtime: str  # "" when no sandbox was made (--no-create)


def read_recorded(manifest: Manifest, name: str) -> Recorded:
    agent = next((r for r in manifest.resources if r.kind is Kind.AGENT), None)
    ref = PlatformRef.of(agent) if agent is not None else PlatformRef("")
    sandbox = next(
        (
            r
            for r in manifest.resources
            if r.kind is Kind.SANDBOX and r.details.get("name") == name and "runtime" in r.details
        ),
        None,
    )
    runtime = sandbox.details["runtime"] if sandbox is not None else ""
    agent_id = agent.details.get("id", "") if agent is not None else ""
    return Recorded(name, agent_id, ref, runtime)


def platform_key(ref: PlatformRef, fallback: Key) -> str:
    """The user key for `ref`: a `platform.up` platform's own key file, else `fallback`."""
    if ref.run_dir:
        try:
            return (Path(ref.run_dir) / service.KEY_FILE).read_text(encoding="utf-8").strip()
        except OSError:
            pass
    return fallback()


def _runtime(recorded: Recorded, run_dir: Path, manifest: Manifest) -> Runtime:
    return get_runtime(recorded.runtime, run_dir=run_dir / "runtimes", manifest=manifest)


def _platform_part(standing: Standing, ref: PlatformRef) -> Part:
    if standing.reach is Reach.UP:
        who = f" ({ref.platform_id})" if ref.emulator else ""
        return Part("platform", True, f"{standing.rest_url}{who}")
    return Part("platform", False, standing.reason)


def _home_room(manifest: Manifest, name: str) -> Resource | None:
    title = agent_check.home_title(name)
    return next(
        (
            r
            for r in manifest.resources
            if r.kind is Kind.ROOM and r.details.get("title") == title and r.details.get("id")
        ),
        None,
    )


# ---------------------------------------------------------------- status


@dataclass(frozen=True)
class AgentStatus:
    name: str
    agent_id: str
    runtime: str
    parts: tuple[Part, ...]

    @property
    def up(self) -> bool:
        return all(part.up for part in self.parts)

    def lines(self) -> list[str]:
        head = f"{self.name}: agent {self.agent_id or '(not registered)'}"
        head += f", {self.runtime} runtime" if self.runtime else ", no sandbox"
        width = max((len(part.name) for part in self.parts), default=0)
        rows = [
            f"  {part.name.ljust(width)}  {'up  ' if part.up else 'DOWN'}  {part.detail}"
            for part in self.parts
        ]
        return [head, *rows]


def status(run_dir: Path, *, fallback_key: Key) -> list[AgentStatus]:
    """Every recorded agent's parts and whether each is up; changes nothing."""
    out = []
    for name in recorded_names(run_dir):
        try:
            with Manifest.open(manifests_dir(run_dir) / name / "manifest.json") as manifest:
                out.append(_status_of(manifest, name, run_dir, fallback_key))
        except ManifestError as exc:
            out.append(AgentStatus(name, "", "", (Part("manifest", False, str(exc)),)))
    return out


def _status_of(manifest: Manifest, name: str, run_dir: Path, fallback_key: Key) -> AgentStatus:
    recorded = read_recorded(manifest, name)
    if not recorded.agent_id:
        unfinished = Part("registration", False, "unfinished: re-run kit.provision or unprovision")
        return AgentStatus(name, "", recorded.runtime, (unfinished,))
    key = platform_key(recorded.platform, fallback_key)
    standing = Probe(key, rerun="").standing(recorded.platform)
    parts = [_platform_part(standing, recorded.platform)]
    if recorded.runtime:
        try:
            parts += _runtime(recorded, run_dir, manifest).parts(name)
        except SandboxError as exc:
            parts.append(Part("sandbox", False, f"unknown: {exc}"))
    room = _home_room(manifest, name)
    if standing.reach is not Reach.UP or room is None:
        parts.append(Part("connected", False, "no platform" if room else "no home room"))
    else:
        try:
            online = agent_check.is_online(
                api_key=key,
                rest_url=standing.rest_url,
                room_id=room.details["id"],
                agent_id=recorded.agent_id,
            )
        except Exception as exc:  # the platform's answer, whatever it is, is the detail
            parts.append(Part("connected", False, f"unknown: {type(exc).__name__}"))
        else:
            detail = f"online in {room.details.get('title')}" if online else "not connected"
            parts.append(Part("connected", online, detail))
    return AgentStatus(name, recorded.agent_id, recorded.runtime, tuple(parts))


# ---------------------------------------------------------------- resume


@dataclass
class Outcome:
    name: str
    ok: bool = True
    seconds: float | None = None  # from the start of the resume to connected
    notes: list[str] = field(default_factory=list)


@dataclass
class _Job:
    recorded: Recorded
    manifest: Manifest
    outcome: Outcome
    key: str = field(default="", repr=False)
    standing: Standing | None = None
    runtime: Runtime | None = None
    survived: bool = False  # every sandbox part was up: only its platform had gone

    @property
    def rest_url(self) -> str:
        return self.standing.rest_url if self.standing is not None else ""

    def redact(self, text: str) -> str:
        return text.replace(self.key, "***") if self.key else text

    def fail(self, log: Log, message: str) -> None:
        self.outcome.ok = False
        self.outcome.notes.append(message)
        log(f"kit.resume: {self.recorded.name}: FAILED: {message}")


def resume(
    run_dir: Path,
    names: Sequence[str],
    *,
    fallback_key: Key,
    log: Log,
    wait_s: float = agent_check.CONNECT_TIMEOUT_S,
) -> list[Outcome]:
    """Bring back the agents `names` (see the module docstring); one outcome each."""
    started = time.monotonic()
    with ExitStack() as stack:
        jobs = []
        for name in names:
            path = manifests_dir(run_dir) / validate_name(name) / "manifest.json"
            if not path.is_file():
                raise ResumeError(f"nothing provisioned as {name!r} in {run_dir}")
            try:
                manifest = stack.enter_context(Manifest.open(path))
            except ManifestError as exc:
                raise ResumeError(str(exc)) from None
            jobs.append(_Job(read_recorded(manifest, name), manifest, Outcome(name)))
        for job in jobs:
            _platform(job, fallback_key, log)
        for job in jobs:
            if job.outcome.ok:
                _sandbox(job, run_dir, log)
        _prove_all(
            [job for job in jobs if job.outcome.ok and job.standing is not None],
            started,
            wait_s,
            log,
        )
    return [job.outcome for job in jobs]


def _platform(job: _Job, fallback_key: Key, log: Log) -> None:
    recorded = job.recorded
    if not recorded.agent_id:
        job.fail(log, "its provisioning did not finish: re-run kit.provision or kit.unprovision")
        return
    ref = recorded.platform
    job.key = platform_key(ref, fallback_key)
    probe = Probe(job.key, rerun="re-run kit.resume")
    standing = probe.standing(ref)
    if standing.reach is Reach.DOWN and ref.run_dir:
        try:
            record, started = service.up_again(Path(ref.run_dir))
        except service.PlatformError as exc:
            job.fail(log, f"the local platform did not start again: {exc}")
            return
        if started:
            log(
                f"kit.resume: {recorded.name}: the local platform started again from its "
                f"state on {record.rest_url} ({record.platform_id})"
            )
        standing = probe.standing(ref, fresh=True)
    if standing.reach is Reach.GONE:
        job.fail(
            log,
            f"{standing.reason}; `uv run invoke kit.unprovision --name {recorded.name}` "
            "clears its records",
        )
        return
    if standing.reach is Reach.DOWN:
        job.fail(log, standing.reason)
        return
    job.standing = standing


def _sandbox(job: _Job, run_dir: Path, log: Log) -> None:
    name = job.recorded.name
    if not job.recorded.runtime:
        log(f"kit.resume: {name}: no sandbox is recorded here: nothing runs it to resume")
        job.standing = None  # nothing to prove either
        return
    try:
        job.runtime = _runtime(job.recorded, run_dir, job.manifest)
        down = job.runtime.resume(name)
        still = [part for part in job.runtime.parts(name) if not part.up] if down else []
    except SandboxError as exc:
        job.fail(log, str(exc))
        return
    job.survived = not down
    kind = job.recorded.runtime
    if not down:
        log(f"kit.resume: {name}: every part of its {kind} sandbox was up")
        return
    back = [part.name for part in down if part.name not in {p.name for p in still}]
    if back:
        log(f"kit.resume: {name}: brought back ({kind}): {', '.join(back)}")
    if still:  # its start said nothing, yet a part is not up: never reported as back
        listed = ", ".join(
            f"{part.name} ({part.detail})" if part.detail else part.name for part in still
        )
        job.fail(log, f"still down after its {kind} sandbox was started: {listed}")


def _prove_all(jobs: Sequence[_Job], started: float, wait_s: float, log: Log) -> None:
    """Wait until the platform lists every agent connected, polling them together.

    An agent whose box was running all along (only its platform went away) gets
    `RECONNECT_GRACE_S` to reconnect by itself; the SDK backs off while its platform is
    away (up to a minute after a long outage), so after that its box is started again
    once, which connects at once. Every agent then has `wait_s`."""
    pending: dict[int, tuple[_Job, str, float]] = {}
    for index, job in enumerate(jobs):
        room = _room_for(job, log)
        if room:
            grace = RECONNECT_GRACE_S if job.survived else wait_s
            pending[index] = (job, room, time.monotonic() + min(grace, wait_s))
    while pending:
        for index, (job, room, deadline) in list(pending.items()):
            name = job.recorded.name
            try:
                online = agent_check.is_online(
                    api_key=job.key,
                    rest_url=job.rest_url,
                    room_id=room,
                    agent_id=job.recorded.agent_id,
                )
            except Exception as exc:  # the platform's client: say which, never a traceback
                del pending[index]
                job.fail(log, f"checking the connection failed: {job.redact(str(exc))}")
                continue
            if online:
                del pending[index]
                job.outcome.seconds = time.monotonic() - started
                log(
                    f"kit.resume: {name}: agent {job.recorded.agent_id} connected "
                    f"({job.outcome.seconds:.1f}s)"
                )
            elif time.monotonic() >= deadline:
                if job.survived:
                    job.survived = False
                    pending[index] = (job, room, time.monotonic() + wait_s)
                    _restart_box(job, log)
                    if not job.outcome.ok:
                        del pending[index]
                    continue
                del pending[index]
                tail = "\n" + log_tail(job.runtime, name, [job.key]) if job.runtime else ""
                job.fail(
                    log,
                    f"agent {job.recorded.agent_id} did not connect to {job.rest_url} "
                    f"within {wait_s:.0f}s{tail}",
                )
        if pending:
            time.sleep(agent_check.POLL_S)


def _room_for(job: _Job, log: Log) -> str:
    """The agent's home room (made again if the platform lost it), "" after a failure."""
    try:
        return agent_check.home_room(
            job.manifest,
            api_key=job.key,
            rest_url=job.rest_url,
            name=job.recorded.name,
            agent_id=job.recorded.agent_id,
            platform=job.recorded.platform.details(),
        )
    except Exception as exc:  # the platform's answer, whatever it is, is the message
        job.fail(log, f"its home room: {job.redact(str(exc) or type(exc).__name__)}")
        return ""


def _restart_box(job: _Job, log: Log) -> None:
    name = job.recorded.name
    log(
        f"kit.resume: {name}: not connected {RECONNECT_GRACE_S:.0f}s after its platform "
        "came back (the SDK backs off while its platform is away): starting its box again"
    )
    assert job.runtime is not None
    try:
        job.runtime.stop(name)
        job.runtime.start(name)
    except SandboxError as exc:
        job.fail(log, str(exc))


# ---------------------------------------------------------------- the tasks


def _fallback(rest_url: str, run_dir: Path) -> Key:
    """The user key for a platform with no key file here, asked once and only if needed
    (BAND_API_KEY_USER, else the local platform's key file, else a prompt)."""
    known: list[str] = []

    def key() -> str:
        if not known:
            known.append(user_key(choose_platform(rest_url, run_dir, stopped_ok=True)))
        return known[0]

    return key


def main_status(*, run_dir: Path, rest_url: str = "") -> tuple[list[str], bool]:
    """`kit.status`: (lines, every part of every agent up)."""
    found = status(run_dir, fallback_key=_fallback(rest_url, run_dir))
    if not found:
        return [f"kit.status: nothing provisioned in {run_dir}"], True
    lines = [line for agent in found for line in agent.lines()]
    down = [agent.name for agent in found if not agent.up]
    if down:
        lines.append(
            f"kit.status: {len(down)} of {len(found)} agents have parts down ({', '.join(down)}); "
            f"`uv run invoke kit.resume --all` brings them back"
        )
    else:
        lines.append(f"kit.status: all {len(found)} agents up")
    return lines, not down


def main_resume(
    *,
    run_dir: Path,
    name: str = "",
    every: bool = False,
    rest_url: str = "",
    wait: float = agent_check.CONNECT_TIMEOUT_S,
    log: Log,
) -> list[Outcome]:
    """`kit.resume --name N` or `--all`; ResumeError (after trying every agent) when one
    did not come back."""
    if bool(name) == every:
        raise ResumeError("pass --name NAME (one agent) or --all (every agent provisioned here)")
    names = [validate_name(name)] if name else recorded_names(run_dir)
    if not names:
        log(f"kit.resume: nothing provisioned in {run_dir}")
        return []
    outcomes = resume(
        run_dir, names, fallback_key=_fallback(rest_url, run_dir), log=log, wait_s=wait
    )
    failed = [o.name for o in outcomes if not o.ok]
    if failed:
        raise ResumeError(
            f"{len(failed)} of {len(outcomes)} agents did not come back ({', '.join(failed)}); "
            "see the lines above"
        )
    log(f"kit.resume: {len(outcomes)} agents connected")
    return outcomes
