"""`smoke.*`: the sandbox smoke (smoke/): automated drills, or the operator's manual steps.

`smoke.run` drills every interruption automatically on the local or docker runtime and
the smoke's own local platform; the other tasks are the manual path (staging on real sbx, see
smoke/README.md) and share the same state (`<run dir>/smoke/state.json`) and report
(`evidence.md`). Nothing printed here holds a key.
"""

from __future__ import annotations

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from bandkit.errors import BandkitError
from tasks._common import RUN_DIR_HELP, need, reports, resolve_run_dir


@task(
    help={
        "drills": "all, or a comma list of network, sleep, daemon, platform (default all)",
        "runtime": "auto, local or docker (auto: docker when a daemon answers and the kit "
        "image is built, else local)",
        "image": "docker: the kit image (default band-python-kit:local)",
        "heal_after": "docker: restart the container of an agent still offline N seconds "
        "after the network returns (the kit's health check; default off)",
        "freeze": "seconds the sleep drill freezes the sandbox (default: the agent's "
        "heartbeat watchdog threshold + 5)",
        "watchdog": "seconds: the smoke agent's heartbeat watchdog (heartbeats at half of it), "
        "so the sleep drill and docker's network drill wait seconds, not a minute (default: "
        "the SDK's own, 60)",
        "run_dir": RUN_DIR_HELP,
    }
)
@reports("smoke.run")
def run(
    c: Context,
    drills: str = "all",
    runtime: str = "auto",
    freeze: str = "",
    image: str = "",
    heal_after: str = "",
    watchdog: str = "",
    run_dir: str = "",
) -> None:
    """Provision, probe, drill every interruption, clean up, report: exit 0 on PASS only."""
    from smoke import drills as dr
    from smoke import run as smoke_run

    try:
        freeze_s = float(freeze) if freeze else None
    except ValueError:
        raise BandkitError(f"--freeze takes seconds, e.g. --freeze 65 (got {freeze!r})") from None
    if freeze_s is not None and freeze_s <= 0:
        raise BandkitError("--freeze must be more than 0 seconds")
    try:
        heal_s = float(heal_after) if heal_after else None
    except ValueError:
        raise BandkitError(f"--heal-after takes seconds, e.g. 3 (got {heal_after!r})") from None
    try:
        watchdog_s = float(watchdog) if watchdog else None
    except ValueError:
        raise BandkitError(f"--watchdog takes seconds, e.g. 8 (got {watchdog!r})") from None
    if watchdog_s is not None and not 2 <= watchdog_s <= 600:
        raise BandkitError("--watchdog must be between 2 and 600 seconds")
    options = smoke_run.Options(
        drills=dr.parse(drills),
        runtime=runtime,
        freeze_s=freeze_s,
        image=image or None,
        heal_after_s=heal_s,
        watchdog_s=watchdog_s,
    )
    outcome = smoke_run.run_all(resolve_run_dir(c, run_dir), options)
    for result in outcome.results:
        print(
            f"{result.drill}: {'PASS' if result.passed else 'FAIL'} ({result.timings.describe()})"
        )
    print(f"smoke.run: {outcome.verdict} (run {outcome.run_id}, {outcome.wall_s:.0f}s)")
    print(f"evidence: {outcome.evidence}")
    if outcome.exit_code:
        raise Exit(code=outcome.exit_code)


@task(help={"runtime": "auto, local, docker or sbx (default auto)", "run_dir": RUN_DIR_HELP})
@reports("smoke.preflight")
def preflight(c: Context, runtime: str = "auto", run_dir: str = "") -> None:
    """PASS/FAIL per precondition (never a value); exit 1 when any fails."""
    from smoke import preflight as pf

    found = pf.checks(resolve_run_dir(c, run_dir), runtime=runtime)
    for check in found:
        print(check.line())
    if not pf.ok(found):
        raise Exit(code=1)


@task(
    help={
        "label": "provision, initial, after-wifi-reconnect, after-sleep-wake, "
        "after-daemon-restart or cleanup",
        "runtime": "for provision: auto, local, docker or sbx (default auto)",
        "run_dir": RUN_DIR_HELP,
    }
)
@reports("smoke.probe")
def probe(c: Context, label: str = "", runtime: str = "auto", run_dir: str = "") -> None:
    """Run one probe of the live run by label and record it; exit 1 when it fails."""
    from smoke import run as smoke_run
    from smoke.state import OPERATOR_MESSAGES, Label

    need(label, "--label", "initial")
    try:
        which = Label(label)
    except ValueError:
        raise BandkitError(f"unknown label {label!r}; one of {', '.join(Label)}") from None
    state = smoke_run.step_probe(resolve_run_dir(c, run_dir), which, runtime=runtime)
    print(f"smoke.probe: {which} PASS (run {state.run_id}, phase {state.phase})")
    print(f"next: {OPERATOR_MESSAGES[state.phase]}")


@task(help={"phase": "the phase to enter (the next one, or failed)", "run_dir": RUN_DIR_HELP})
@reports("smoke.phase")
def phase(c: Context, phase: str = "", run_dir: str = "") -> None:
    """Move the live run to its next phase (or to failed) and say what to do next."""
    from smoke import run as smoke_run
    from smoke.state import OPERATOR_MESSAGES, Phase

    need(phase, "--phase", "awaiting-wifi-recovery")
    try:
        which = Phase(phase)
    except ValueError:
        raise BandkitError(f"unknown phase {phase!r}; one of {', '.join(Phase)}") from None
    state = smoke_run.step_phase(resolve_run_dir(c, run_dir), which)
    print(f"smoke.phase: run {state.run_id} is {state.phase}")
    print(f"next: {OPERATOR_MESSAGES[state.phase]}")


@task(
    help={
        "key": "network_cut, sleep_wake, daemon_restart, platform_restart or a free lowercase key",
        "text": "what you saw (no secrets)",
        "run_dir": RUN_DIR_HELP,
    }
)
@reports("smoke.observe")
def observe(c: Context, key: str = "", text: str = "", run_dir: str = "") -> None:
    """Record an observation on the live run (a later one for the same key replaces it)."""
    from smoke import run as smoke_run

    need(key, "--key", "sleep_wake")
    need(text, "--text", '"reconnected 2 s after wake"')
    state = smoke_run.step_observe(resolve_run_dir(c, run_dir), key, text)
    print(f"smoke.observe: recorded {key} on run {state.run_id}")


@task(help={"run_dir": RUN_DIR_HELP})
@reports("smoke.report")
def report(c: Context, run_dir: str = "") -> None:
    """Render evidence.md from the state; print the verdict and where the report is."""
    from smoke import run as smoke_run

    verdict, path = smoke_run.step_report(resolve_run_dir(c, run_dir))
    print(f"smoke.report: {verdict}")
    print(f"evidence: {path}")


@task(help={"run_dir": RUN_DIR_HELP})
@reports("smoke.clean")
def clean(c: Context, run_dir: str = "") -> None:
    """Reap what smoke runs left (agents, rooms, sandboxes, keys), stop the smoke platform."""
    from smoke import run as smoke_run

    for line in smoke_run.step_clean(resolve_run_dir(c, run_dir)):
        print(f"smoke.clean: {line}")
