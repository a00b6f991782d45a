"""Checks. Each session installs from the lock through `_sync` and runs one tool.

`nox` with no arguments runs the default checks (tests, e2e, lint, typecheck, docker_tests,
cluster_tests);
CI runs one lane per session name, the matrix coming from `nox -s lanes` (see
bandkit/ci/lanes.py). The four test lanes split by marker: `tests` is the everyday loop
(no `e2e`, `docker`, `cluster` or `live` mark; every test within 20 s), `e2e` the whole
commands, `docker_tests` everything that needs a daemon, and `cluster_tests` the local
multi-node swarm. The first three run on pytest-xdist workers.
`floors` installs every direct dependency at its declared floor and runs a part of `tests`
there (a CI lane, not a default session: it resolves against PyPI).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox

from bandkit.ci import floors as floor_check
from bandkit.dockercli import docker_answers

# run_install (used by _sync) so `nox -R` skips reinstalls; uv backend since 2024.
nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True
# The cluster lane before the docker lane: it needs only the amd64 base, so the arm64 one
# (qemu, minutes) that `.ci/run` makes in the background has until the docker lane to end.
nox.options.sessions = ["tests", "e2e", "lint", "typecheck", "cluster_tests", "docker_tests"]

ROOT = Path(__file__).parent
# Every uv project with its own lock besides the root one (`uv lock --check` in lint).
LOCKED_PROJECTS = (
    "docker/band_python_kit/echo-agent",
    "docker/band_python_kit/sdk",
    "smoke/agent",
    "examples/docker_demo/agents/pm",
    "examples/docker_demo/agents/dev",
    "examples/docker_demo/agents/architect",
)
GITHUB = ROOT / ".github"  # the workflows and dependabot.yml
WORKFLOWS = GITHUB / "workflows"
# hadolint's inputs: every tracked or new Dockerfile* in any folder (git pathspec).
DOCKERFILES = ":(glob)**/Dockerfile*"


def _sync(session: nox.Session, *groups: str) -> None:
    """Install the project and the given dependency groups, exactly as locked, compiled to
    bytecode; and let every Python process of the session cache what it compiles. The
    lanes start hundreds of Python processes (each `invoke`, service, proxy, simulator
    call): with no bytecode each one compiles its imports from source again (`invoke
    --help` 0.67 s without, 0.13 s with, measured here), and a machine may set
    PYTHONDONTWRITEBYTECODE (an empty value switches it off)."""
    session.env["UV_PROJECT_ENVIRONMENT"] = session.virtualenv.location
    session.env["PYTHONDONTWRITEBYTECODE"] = ""
    args = ["uv", "sync", "--locked", "--no-default-groups", "--compile-bytecode"]
    for group in groups:
        args += ["--group", group]
    session.run_install(*args, silent=True)


# The unit suite reaches nothing but this machine: loopback and UNIX sockets only, so no
# test can quietly depend on the internet (pytest-socket blocks the connect in-process).
DENY_NETWORK = ("--disable-socket", "--allow-unix-socket", "--allow-hosts=127.0.0.1,::1,localhost")


def _pytest(
    session: nox.Session,
    *,
    marks: str,
    workers: int,
    groups: tuple[str, ...] = ("dev",),
    pytest_args: tuple[str, ...] = (),
) -> None:
    """pytest on `workers` xdist workers (0: in this process; `-n 0` in posargs too), each
    taking the next test as it frees up; the slowest 15 are listed, so CI shows where its
    minutes go."""
    _sync(session, *groups)
    session.run("uv", "--version", external=True)
    parallel = ("-n", str(workers), "--dist", "worksteal") if workers else ("-n", "0")
    session.run("pytest", "-m", marks, "--durations=15", *parallel, *pytest_args, *session.posargs)


def _git_files(session: nox.Session, pattern: str) -> list[str]:
    """Tracked and not-ignored files matching a pathspec (so .venv and .nox never count)."""
    out = session.run(
        "git",
        "ls-files",
        "--cached",
        "--others",
        "--exclude-standard",
        "--",
        pattern,
        external=True,
        silent=True,
    )
    return sorted(set(str(out).split()))


@nox.session
def tests(session: nox.Session) -> None:
    """The everyday loop: unit and in-process integration tests, network denied, each
    within 20 s. Posargs go to pytest."""
    _pytest(
        session,
        marks="not e2e and not docker and not cluster and not live",
        workers=2,
        pytest_args=DENY_NETWORK,
    )


@nox.session
def e2e(session: nox.Session) -> None:
    """Whole commands as a user runs them: demo.up, smoke.run, the README walkthroughs, the
    kill drills, fresh clones, the browser. No Docker (that is docker_tests)."""
    _pytest(
        session,
        marks="e2e and not docker and not live",
        workers=4,
        groups=("dev", "browser"),
        pytest_args=DENY_NETWORK,
    )


@nox.session
def docker_tests(session: nox.Session) -> None:
    """Real containers from the kit image (needs dockerd; `invoke image.bases` first)."""
    if not docker_answers():
        if os.environ.get("CI"):
            session.error(
                "no Docker daemon answers: run `uv run invoke ci.prepare --lane docker_tests`"
            )
        session.skip("no Docker daemon answers (`uv run invoke ci.prepare --lane docker_tests`)")
    # The parallel part, then the tests that restart the Docker daemon itself, alone.
    _pytest(session, marks="docker and not exclusive", workers=3)
    _pytest(session, marks="docker and exclusive", workers=0)


@nox.session
def cluster_tests(session: nox.Session) -> None:
    """The local multi-node Docker Swarm (`cluster.*`): real daemons in namespaces of their
    own, so root and a host daemon (for `docker save`); one test at a time (the cluster's
    names are machine-wide)."""
    missing = [] if docker_answers() else ["no Docker daemon answers"]
    missing += [] if os.geteuid() == 0 else ["not root"]
    if missing:
        why = f"{' and '.join(missing)} (`sudo uv run invoke ci.prepare --lane cluster_tests`)"
        if os.environ.get("CI"):
            session.error(why)
        session.skip(why)
    _pytest(session, marks="cluster", workers=0)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, lock freshness, shellcheck on every *.sh, actionlint on the workflows, zizmor on
    them and on dependabot.yml, hadolint on every Dockerfile."""
    _sync(session, "dev")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("uv", "lock", "--check", external=True)
    for project in LOCKED_PROJECTS:
        session.run("uv", "lock", "--check", "--directory", project, external=True)
    scripts = [".ci/run", *_git_files(session, "*.sh")]
    if shutil.which("shellcheck"):
        session.run("shellcheck", *scripts, external=True)
    elif os.environ.get("CI"):
        session.error("shellcheck is not installed: `apt-get install shellcheck` (CI requires it)")
    else:
        session.warn("shellcheck not installed; skipping (apt-get install shellcheck)")
    session.run("actionlint", *sorted(str(p) for p in WORKFLOWS.glob("*.yml")))
    # Workflow security (template injection, pins, permissions, cache poisoning) and the
    # Dependabot config (its cooldown); offline, so it never asks GitHub. A finding is fixed,
    # not silenced.
    session.run("zizmor", "--offline", "--no-progress", str(GITHUB.relative_to(ROOT)))
    session.run("hadolint", *_dockerfiles(session))


def _dockerfiles(session: nox.Session) -> list[str]:
    """Every Dockerfile in the repo (`Dockerfile`, `Dockerfile.cli`, ...), not their ignores."""
    found = _git_files(session, DOCKERFILES)
    files = [path for path in found if not path.endswith(".dockerignore")]
    if not files:
        session.error(f"no Dockerfile matches {DOCKERFILES!r}: is the pathspec still right?")
    return files


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the library, the launcher, the smoke, the examples, the tasks and
    this noxfile (`[tool.mypy] files`)."""
    _sync(session, "dev")
    session.run("mypy")


# The floors run on requires-python's floor, the oldest interpreter the project supports.
FLOORS_PYTHON = "3.11"


@nox.session(python=FLOORS_PYTHON)
def floors(session: nox.Session) -> None:
    """Every direct dependency at its declared floor: uv's lowest-direct resolution into
    this session's venv (the test tools at their locked versions), then every module
    imports and the fast tests that use each dependency pass (bandkit/ci/floors.py).
    Not a default session: it resolves against PyPI. Posargs go to pytest."""
    python = str(Path(session.bin) / "python")
    tmp = Path(session.create_tmp())
    tools = tmp / "test-tools.txt"
    tools.write_text("".join(f"{pin}\n" for pin in floor_check.locked(ROOT / "uv.lock")))
    pins = tmp / "floors.txt"
    pins.unlink(missing_ok=True)  # `uv pip compile` would prefer the last run's pins
    uv_pip = ("uv", "pip")
    session.run_install(
        *uv_pip, "compile", "--quiet", "--resolution", "lowest-direct", "--python", python,
        "pyproject.toml", str(tools), "--output-file", str(pins), external=True,
    )  # fmt: skip
    session.run_install(*uv_pip, "sync", "--quiet", "--python", python, str(pins), external=True)
    session.run_install(
        *uv_pip, "install", "--quiet", "--no-deps", "--python", python, "-e", ".", external=True
    )
    session.run("python", "-m", "bandkit.ci.floors")
    fast = ("-m", "not e2e and not docker and not live", "-n", "2", *DENY_NETWORK)
    session.run("pytest", *fast, *floor_check.TESTS, *session.posargs)


@nox.session
def lanes(session: nox.Session) -> None:
    """Print the CI matrix as JSON; fail if a workflow gates on a lane we do not emit."""
    _sync(session)
    session.run("python", "-m", "bandkit.ci.lanes")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks against the upstream kit; prints figures and ratios. Posargs pick some."""
    _sync(session, "dev")
    session.run("python", "-m", "bandkit.bench", *session.posargs)
