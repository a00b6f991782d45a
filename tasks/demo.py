"""`demo.*`: the three-agent design meeting (bandkit/demo/, examples/docker_demo/).

`demo.build` makes the images `demo.up --runtime docker` runs: the kit image, and for
`--brains stub|real` the CLI image on it (bandkit/demo/cli_image.py), proven to run.

Exit codes of `demo.up`: 0 verdict reached, 1 failure, 2 the presenter ended it before a
verdict, 3 hard kill on the message cap, 4 hard kill on the wall clock, 130 interrupted
(Ctrl-C/SIGTERM; torn down). See examples/docker_demo/README.md.
"""

from __future__ import annotations

import signal
import threading

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from bandkit.errors import BandkitError
from tasks._common import RUN_DIR_HELP, need, reports, resolve_run_dir


@task(
    name="up",
    auto_shortflags=False,
    help={
        "platform": "local (the emulator; default) or real (BAND_REST_URL, BAND_WS_URL, "
        "BAND_API_KEY_USER)",
        "runtime": "auto (sbx, else docker, else local), sbx, docker, swarm (the local cluster) "
        "or local",
        "brains": "scripted (deterministic, offline; the default); stub (the real Claude SDK, "
        "Codex and CrewAI adapters against the local LLM stub, offline); real (the same "
        "adapters against the providers: ANTHROPIC_API_KEY, OPENAI_API_KEY; base URLs "
        "ANTHROPIC_BASE_URL, OPENAI_BASE_URL to override)",
        "scenario": "happy (default), no-handoff, runaway, slow, silent-architect, presenter-end",
        "topic": "what the meeting is about",
        "headless": "close after the grace period instead of opening the floor after the verdict",
        "keep": "leave everything running afterwards (`demo.down` removes it)",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("demo.up")
def demo_up(
    c: Context,
    platform: str = "local",
    runtime: str = "auto",
    brains: str = "scripted",
    scenario: str = "happy",
    topic: str = "",
    headless: bool = False,
    keep: bool = False,
    run_dir: str = "",
) -> None:
    """Hold the design meeting: Maya (PM), Sam (Dev), Jordan (Architect), each sandboxed."""
    from bandkit.demo.preflight import UpOptions
    from bandkit.demo.run import up
    from examples.docker_demo.cast import DEFAULT_TOPIC

    result = up(
        UpOptions(
            run_dir=resolve_run_dir(c, run_dir),
            platform=platform,
            runtime=runtime,
            brains=brains,
            scenario=need(scenario, "--scenario", "happy"),
            topic=topic or DEFAULT_TOPIC,
            headless=headless,
            keep=keep,
        )
    )
    if result.exit_code:
        raise Exit(code=result.exit_code)


@task(
    name="build",
    help={
        "brains": "scripted (default): the kit image; stub or real: also the CLI image "
        "(kit + the pinned codex CLI), which the docker runtime runs them on",
        "no_cache": "rebuild every layer (the bases stay)",
    },
)
@reports("demo.build")
def demo_build(c: Context, brains: str = "scripted", no_cache: bool = False) -> None:
    """Build the images `demo.up --runtime docker --brains BRAINS` needs; prove they run."""
    from bandkit.demo import cli_image

    for built in cli_image.build(brains, no_cache=no_cache):
        print(f"demo.build: {built.line()}")


@task(
    name="down",
    help={
        "run_dir": RUN_DIR_HELP,
        "forget_unreachable": (
            "also clear the records of agents and rooms on a platform that does not answer "
            "(each one listed), for a platform you know is gone for good"
        ),
    },
)
@reports("demo.down")
def demo_down(c: Context, run_dir: str = "", forget_unreachable: bool = False) -> None:
    """Remove exactly what the last demo run recorded; safe to re-run until clean."""
    from bandkit.demo.teardown import down

    if not down(resolve_run_dir(c, run_dir), log=print, forget=forget_unreachable):
        raise BandkitError("some resources remain (listed above); fix what each says and re-run")


@task(name="status", help={"run_dir": RUN_DIR_HELP})
@reports("demo.status")
def demo_status(c: Context, run_dir: str = "") -> None:
    """Say what a demo run has recorded, whether its sandboxes run, and its room page."""
    from bandkit.demo.status import status_lines

    print("\n".join(status_lines(resolve_run_dir(c, run_dir))))


@task(
    name="logs",
    help={
        "role": "pm, dev or architect (default: all three)",
        "lines": "how many of the last lines of each log (default 60)",
        "follow": "keep going: every new line of the three sandboxes' logs, prefixed with "
        "the role, as `docker compose logs -f`; ends with the run, or on Ctrl-C",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("demo.logs")
def demo_logs(
    c: Context, role: str = "", lines: int = 60, follow: bool = False, run_dir: str = ""
) -> None:
    """Show the demo agents' startup and launcher logs; `--follow` streams them live."""
    from bandkit.demo.status import role_logs, roles_for

    where = resolve_run_dir(c, run_dir)
    if not follow:
        print(role_logs(where, role, lines=lines))
        return
    from bandkit.demo.follow import follow as follow_run

    stop = threading.Event()

    def on_ctrl_c(_signum: int, _frame: object) -> None:
        if stop.is_set():  # a second Ctrl-C: now, even mid-read
            raise KeyboardInterrupt
        stop.set()

    def sleep(seconds: float) -> None:  # Ctrl-C ends the follow here, between two reads
        if stop.wait(seconds):
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        ended = follow_run(where, roles=roles_for(role), lines=lines, out=_flushed, sleep=sleep)
        print(ended, flush=True)
    except KeyboardInterrupt:  # Ctrl-C is how a follow ends: not a failure
        print("demo.logs: stopped", flush=True)
    finally:
        signal.signal(signal.SIGINT, previous)


def _flushed(line: str) -> None:
    print(line, flush=True)
