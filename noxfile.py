"""Checks. Each session installs from the lock through `_sync` and runs one tool.

`nox` with no arguments runs the default checks (tests, lint, typecheck, docker_tests); CI runs one
lane per session name, the matrix coming from `nox -s lanes` (see bandkit/lanes.py).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox

from bandkit.dockercli import docker_answers

# run_install (used by _sync) so `nox -R` skips reinstalls; uv backend since 2024.
nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["tests", "lint", "typecheck", "docker_tests"]

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
WORKFLOWS = ROOT / ".github" / "workflows"
# hadolint's inputs: every tracked or new Dockerfile* in any folder (git pathspec).
DOCKERFILES = ":(glob)**/Dockerfile*"


def _sync(session: nox.Session, *groups: str) -> None:
    """Install the project and the given dependency groups, exactly as locked."""
    session.env["UV_PROJECT_ENVIRONMENT"] = session.virtualenv.location
    args = ["uv", "sync", "--locked", "--no-default-groups"]
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
    groups: tuple[str, ...] = ("dev",),
    pytest_args: tuple[str, ...] = (),
) -> None:
    _sync(session, *groups)
    session.run("uv", "--version", external=True)
    # The slowest tests are listed at the end, so CI shows where its minutes go.
    session.run("pytest", "-m", marks, "--durations=30", *pytest_args, *session.posargs)


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
    """Unit and integration tests (no Docker, no live platform). Posargs go to pytest."""
    _pytest(
        session,
        marks="not docker and not live",
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
    _pytest(session, marks="docker")


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, lock freshness, shellcheck on every *.sh, actionlint and zizmor on the workflows,
    hadolint on every Dockerfile."""
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
    # Workflow security (template injection, pins, permissions, cache poisoning); offline,
    # so it never asks GitHub. Clean, with no ignores: a finding is fixed, not silenced.
    session.run("zizmor", "--offline", "--no-progress", str(WORKFLOWS.relative_to(ROOT)))
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
    """mypy --strict over the library, tasks.py and this noxfile."""
    _sync(session, "dev")
    session.run("mypy")


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
