"""The automated smoke (`run_all`) and the operator's manual steps, as library calls.

`run_all` on the smoke's own local platform (127.0.0.1) and the local or the docker
runtime (`runtime_choice`: auto is docker when a daemon answers and the kit image is
built, else local; the drills are `smoke.drills.local` / `smoke.drills.docker`):

    provision → initial probe → network cut → sleep/wake → daemon restart →
    platform restart → cleanup → evidence report

The phases advance as the operator's would (`started` → `awaiting-wifi-recovery` →
`awaiting-sleep-wake` → `daemon-restart` → `completed`); a drill that is not selected is
skipped (its requirement stays NOT RUN, so the verdict is INCOMPLETE). The first failure
moves the run to `failed` and stops the drilling; cleanup and the report always run.
Nothing is left behind: the run's agents, rooms, sandbox (box processes, or the
container, its network and its host-side proxies), stored key, manifest and workspace
copy are reaped, the platform is stopped and its key and state files removed (its log
stays), and a `leftovers` observation says what was checked.

The manual path (`step_*`) works on the same state and report: the operator runs each
probe by label, moves the phase, records observations, renders the report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from bandkit.dockercli import docker_answers, image_exists
from bandkit.errors import BandkitError
from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.docker import DEFAULT_IMAGE
from bandkit.runtimes.select import resolve_name
from smoke import drills as dr
from smoke import report as rp
from smoke import state as st
from smoke.cleanup import cleanup, cleanup_for_reprovision
from smoke.context import Layout, Log, Recorder, stderr_log, utc_now
from smoke.drills import docker as docker_drills
from smoke.drills import local as local_drills
from smoke.outcome import ProbeFailed, fail, redact
from smoke.probe import probe
from smoke.provision import provision, runtime_for
from smoke.state import TERMINAL, Label, Phase, SmokeState
from smoke.target import Target, choose, local_target

PHASE_BEFORE = {
    dr.Drill.NETWORK: Phase.AWAITING_WIFI_RECOVERY,
    dr.Drill.SLEEP: Phase.AWAITING_SLEEP_WAKE,
    dr.Drill.DAEMON: Phase.DAEMON_RESTART,
    dr.Drill.PLATFORM: Phase.DAEMON_RESTART,
}
LEFTOVERS_KEY = "leftovers"
PLATFORM_SECRETS = ("platform-user-key", "platform-state.json")


class SmokeError(BandkitError):
    """The smoke cannot run as asked; the message says why and what to do."""


@dataclass
class Options:
    drills: list[dr.Drill] = field(default_factory=lambda: list(dr.Drill))
    runtime: str = "local"
    agent_env: dict[str, str] = field(default_factory=dict)  # knobs for the smoke agent
    freeze_s: float | None = None  # None: the agent's watchdog threshold + margin
    watchdog_s: float | None = None  # the smoke agent's watchdog (None: the SDK's own)
    network_outage_s: float | None = None  # None: local 8 s, docker past the SDK watchdog
    platform_down_s: float = dr.PLATFORM_DOWN_S
    daemon_down_s: float = dr.DAEMON_DOWN_S
    reconnect_timeout_s: float = dr.RECONNECT_TIMEOUT_S
    relaunch: bool = True
    image: str | None = None  # docker: the kit image (None: the runtime's default)
    heal_after_s: float | None = None  # docker: restart an agent offline this long after
    # the network returned (the kit's health check; None: measure the SDK's own recovery)


@dataclass
class Outcome:
    run_id: str
    verdict: rp.Verdict
    evidence: Path
    results: list[dr.DrillResult]
    wall_s: float
    leftovers: list[str]

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict is rp.Verdict.PASS else 1


def sdk_version() -> str:
    try:
        return metadata.version("band-sdk")
    except metadata.PackageNotFoundError:
        return ""


def runtime_choice(choice: str, image: str | None = None, log: Log = stderr_log) -> str:
    """The runtime the automated drills use: `local` or `docker`. `auto` is docker when a
    daemon answers and the kit image is built, else local (sbx is for the manual run)."""
    image = image or DEFAULT_IMAGE
    if choice == "local":
        return "local"
    if choice == "auto":
        if not docker_answers():
            log("smoke: no Docker daemon answers; using the local runtime")
            return "local"
        if not image_exists(image):
            log(f"smoke: image {image} is not built (`uv run invoke build`); using local")
            return "local"
        return "docker"
    try:
        name = resolve_name(choice)
    except SandboxError as exc:
        raise SmokeError(str(exc)) from None
    if name.value != "docker":
        raise SmokeError(
            f"the automated drills run on the local or docker runtime, not {name}; run the "
            "manual smoke on sbx (see smoke/README.md) or pass --runtime docker or local"
        )
    if not docker_answers():
        raise SmokeError(
            "no Docker daemon answers: start one (`uv run invoke ci.prepare --lane "
            "docker_tests`) or pass --runtime local"
        )
    if not image_exists(image):
        raise SmokeError(f"image {image} is missing: run `uv run invoke build` (or pass --image)")
    return "docker"


def fresh_run(layout: Layout, log: Log) -> Recorder:
    """A new run: a live earlier one is marked failed (superseded) and archived first."""
    store = layout.store
    current = store.load()
    if current is not None and current.phase not in TERMINAL:
        now = utc_now()
        note = "superseded by an automated run before it finished"
        current = st.record_observation(current, "superseded", note, now=now)
        store.save(st.advance(current, Phase.FAILED, now=now))
        log(f"smoke: run {current.run_id} was unfinished; marked failed and archived")
    return Recorder(store, store.begin(utc_now()), log=log)


def _advance_to(rec: Recorder, phase: Phase) -> None:
    while rec.state.phase is not phase and rec.state.phase not in TERMINAL:
        rec.update(st.advance, st.FORWARD[rec.state.phase])


def _fail_run(rec: Recorder, why: str) -> None:
    if rec.state.phase not in TERMINAL:
        rec.update(st.record_observation, "failure", why)
        rec.update(st.advance, Phase.FAILED)
    rec.log(f"smoke: run failed: {why}")


def run_all(run_dir: Path, options: Options | None = None, *, log: Log = stderr_log) -> Outcome:
    """The whole automated smoke; the outcome's verdict is derived from the state."""
    options = options or Options()
    started = time.monotonic()
    layout = Layout(Path(run_dir).absolute())
    runtime = runtime_choice(options.runtime, options.image, log)
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    rec = fresh_run(layout, log)
    rec.update(st.with_fields, sdk_version=sdk_version(), runtime=runtime)
    log(f"smoke: run {rec.state.run_id} ({', '.join(options.drills)}) on the {runtime} runtime")
    target = local_target(layout.platform_dir, start=True)
    results: list[dr.DrillResult] = []
    try:
        _drive(rec, layout, target, runtime, options, results)
    except ProbeFailed as exc:
        _fail_run(rec, str(exc))
    except Exception as exc:  # a drill that crashed: recorded, then cleaned up
        _fail_run(rec, redact(f"{type(exc).__name__}: {exc}", target))
    finally:
        leftovers = _finish(rec, layout, target, runtime)
    evidence = write_report(layout, rec.state)
    outcome = Outcome(
        rec.state.run_id,
        rp.verdict(rec.state),
        evidence,
        results,
        time.monotonic() - started,
        leftovers,
    )
    log(f"smoke: {outcome.verdict} in {outcome.wall_s:.0f}s; evidence: {evidence}")
    return outcome


def _drive(
    rec: Recorder,
    layout: Layout,
    target: Target,
    runtime: str,
    options: Options,
    results: list[dr.DrillResult],
) -> None:
    agent_env = dict(options.agent_env)
    if options.watchdog_s is not None:
        agent_env[dr.AGENT_WATCHDOG_ENV] = f"{options.watchdog_s:g}"
    watchdog_s = options.watchdog_s if options.watchdog_s is not None else dr.sdk_watchdog()[1]
    provision(rec, layout, target, runtime=runtime, agent_env=agent_env, image=options.image)
    probe(rec, target, Label.INITIAL)
    docker = runtime == "docker"
    outage = options.network_outage_s
    if outage is None:
        outage = (
            docker_drills.default_network_outage_s(watchdog_s) if docker else dr.NETWORK_OUTAGE_S
        )
    freeze_s = options.freeze_s if options.freeze_s is not None else dr.default_freeze_s(watchdog_s)
    box_type = docker_drills.DockerBox if docker else local_drills.LocalBox
    runners = docker_drills.RUNNERS if docker else local_drills.RUNNERS
    ctx = dr.DrillContext(
        rec=rec,
        layout=layout,
        target=target,
        box=box_type(runtime_for(layout, runtime), rec.state.sandbox_name),
        runtime=runtime,
        agent_env=agent_env,
        reconnect_timeout_s=options.reconnect_timeout_s,
        network_outage_s=outage,
        freeze_s=freeze_s,
        watchdog_s=watchdog_s,
        daemon_down_s=options.daemon_down_s,
        platform_down_s=options.platform_down_s,
        relaunch=options.relaunch,
        image=options.image,
        heal_after_s=options.heal_after_s,
        log=rec.log,
    )
    for drill in dr.Drill:
        _advance_to(rec, PHASE_BEFORE[drill])
        if drill not in options.drills:
            continue
        rec.log(f"smoke: drill {drill}")
        try:
            result = runners[drill](ctx)
        except dr.DrillError as exc:  # the drill itself could not be carried out
            fail(rec, dr.LABELS[drill], "", f"the {drill} drill could not run: {exc}")
            _fail_run(rec, f"the {drill} drill could not run: {exc}")
            return
        results.append(result)
        rec.log(f"smoke: drill {drill}: {'PASS' if result.passed else 'FAIL'}")
        if not result.passed:
            _fail_run(rec, f"the {drill} drill did not recover")
            return


def _finish(rec: Recorder, layout: Layout, target: Target, runtime: str) -> list[str]:
    """Cleanup (recorded), leftovers checked, the platform stopped, the phase's end."""
    report = cleanup(rec, layout, target)
    found = leftovers(layout, target, rec.state, runtime)
    stop_platform(layout, target)
    text = "; ".join(found) if found else f"none: {CHECKED}"
    rec.update(st.record_observation, LEFTOVERS_KEY, text)
    if not report.clean:
        _fail_run(rec, "cleanup left something behind: " + "; ".join(report.problems))
    elif found:
        _fail_run(rec, "the run left something behind: " + text)
    elif rec.state.phase is Phase.DAEMON_RESTART:
        rec.update(st.advance, Phase.COMPLETED)
    return found


CHECKED = (
    "no agent or room on the platform, no box or proxy process, no container or network, "
    "no stored key, no provisioning manifest, no workspace copy; platform stopped, its key "
    "and state removed"
)


def leftovers(layout: Layout, target: Target, state: SmokeState, runtime: str) -> list[str]:
    """What the run left behind (empty when nothing)."""
    found = []
    if target.local:
        try:
            health = target.health()
            if health.get("agents") or health.get("rooms"):
                found.append(f"platform: {health['agents']} agent(s), {health['rooms']} room(s)")
        except BandkitError as exc:
            found.append(f"platform health not readable: {exc}")
    found += [f"unreaped {u.kind} {u.id}" for u in state.unreaped]
    found += [f"live {k} {v}" for k, v in (("agent", state.agent_id), ("room", state.room_id)) if v]
    if state.sandbox_name:
        module = docker_drills if runtime == "docker" else local_drills
        found += module.leftovers(layout, state.sandbox_name)
    manifests = layout.kit_dir / "provision"
    if manifests.is_dir():
        found += [f"manifest {p}" for p in manifests.rglob("manifest.json")]
    if layout.workspace(state.run_id).exists():
        found.append(f"workspace {layout.workspace(state.run_id)}")
    return found


def stop_platform(layout: Layout, target: Target) -> None:
    """Stop the smoke's own platform; remove its key and state files (the log stays)."""
    if not target.local:
        return
    from bandkit.emulator import service

    service.down(layout.platform_dir)
    for name in PLATFORM_SECRETS:
        (layout.platform_dir / name).unlink(missing_ok=True)


def write_report(layout: Layout, state: SmokeState) -> Path:
    return layout.store.write_evidence(rp.render(state, now=utc_now()))


# ---------------------------------------------------------------- manual steps


def current_run(layout: Layout, log: Log = stderr_log) -> Recorder:
    """The run to work on: the live one, or a fresh one (`StateStore.begin`)."""
    return Recorder(layout.store, layout.store.begin(utc_now()), log=log)


def step_probe(
    run_dir: Path,
    label: Label,
    *,
    runtime: str = "local",
    log: Log = stderr_log,
    agent_env: dict[str, str] | None = None,
) -> SmokeState:
    """One manual probe by label on the live run; ProbeFailed (recorded) when it fails."""
    layout = Layout(Path(run_dir).absolute())
    rec = current_run(layout, log)
    if label is Label.PROVISION:
        if rec.state.agent_id and rec.state.probes and rec.state.phase is not Phase.DAEMON_RESTART:
            raise SmokeError(
                f"run {rec.state.run_id} already has agent {rec.state.agent_id}; re-provision "
                "only before the first probe or in the daemon-restart phase"
            )
        if rec.state.phase is Phase.DAEMON_RESTART and rec.state.agent_id:
            target = choose(layout.platform_dir, start_local=False)
            report = cleanup_for_reprovision(rec, layout, target)
            if not report.clean:
                raise SmokeError("reaping the old agent failed: " + "; ".join(report.problems))
        else:
            target = choose(layout.platform_dir, start_local=True)
        name = runtime_name(runtime)
        rec.update(st.with_fields, sdk_version=sdk_version())
        provision(rec, layout, target, runtime=name, agent_env=agent_env)
        return rec.state
    target = choose(layout.platform_dir, start_local=False)
    if label is Label.CLEANUP:
        report = cleanup(rec, layout, target)
        if not report.clean:
            raise ProbeFailed("cleanup left ids behind: " + "; ".join(report.problems))
        if rec.state.phase is Phase.DAEMON_RESTART:
            rec.update(st.advance, Phase.COMPLETED)
        return rec.state
    probe(rec, target, label)
    return rec.state


def runtime_name(choice: str) -> str:
    try:
        return resolve_name(choice).value
    except SandboxError as exc:
        raise SmokeError(str(exc)) from None


def step_phase(run_dir: Path, phase: Phase) -> SmokeState:
    layout = Layout(Path(run_dir).absolute())
    rec = current_run(layout)
    return rec.update(st.advance, phase)


def step_observe(run_dir: Path, key: str, text: str) -> SmokeState:
    layout = Layout(Path(run_dir).absolute())
    rec = current_run(layout)
    return rec.update(st.record_observation, key, text)


def step_report(run_dir: Path) -> tuple[rp.Verdict, Path]:
    layout = Layout(Path(run_dir).absolute())
    state = layout.store.load()
    if state is None:
        raise SmokeError(f"no smoke run in {layout.root}; start one with smoke.run or smoke.probe")
    return rp.verdict(state), write_report(layout, state)


def step_clean(run_dir: Path, *, log: Log = stderr_log) -> list[str]:
    """Reap everything the live run and crashed runs left, stop the smoke's platform."""
    layout = Layout(Path(run_dir).absolute())
    state = layout.store.load()
    lines: list[str] = []
    if state is None and not (layout.kit_dir / "provision").is_dir():
        lines.append("no smoke run and no provisioning left")
    else:
        target = choose(layout.platform_dir, start_local=True)
        rec = Recorder(layout.store, state or layout.store.begin(utc_now()), log=log)
        report = cleanup(rec, layout, target)
        lines += report.lines + [f"NOT REAPED: {p}" for p in report.problems]
        if report.clean and rec.state.phase not in TERMINAL:
            if rec.state.phase is Phase.DAEMON_RESTART:
                rec.update(st.advance, Phase.COMPLETED)
            else:
                rec.update(st.advance, Phase.FAILED)
        write_report(layout, rec.state)
        if not report.clean:
            raise SmokeError("; ".join(lines))
    if (layout.platform_dir / "platform.json").exists():
        from bandkit.emulator import service

        lines.append(f"platform: {service.down(layout.platform_dir)}")
        for name in PLATFORM_SECRETS:
            (layout.platform_dir / name).unlink(missing_ok=True)
    return lines
