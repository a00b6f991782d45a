"""The sync phase: `uv sync --locked` into the sandbox-owned venv, or skip it.

The image's pinned uv (BAND_SDK_UV) runs in the project with the venv at
runtime.environmentPath, the cache at runtime.cachePath, the SDK's base
interpreter (never a download) and HOME=/home/agent, serialized by a file lock
under runtime.statePath. Without a committed uv.lock nothing is resolved: the
launch stops with the `uv lock` hint. Fast path: when uv.lock, pyproject.toml and
the interpreter are unchanged since the last successful sync, and so are uv's settings
that select what it installs (`SYNC_SELECTION_ENV`), and the venv is intact (see
`launcher.stamp`), uv is not run at all.
"""

from __future__ import annotations

import logging
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from launcher.constants import AGENT_HOME, SYNC_LOCK_FILENAME, SYNC_LOCK_TIMEOUT_S, EnvVar
from launcher.errors import LauncherError, Phase
from launcher.stamp import (
    installed_distributions,
    remove_stamp_sync,
    schema_fingerprint,
    sync_fingerprint,
    sync_selection,
    sync_skip_reason,
    trusted_config_digest,
    write_stamp,
)

if TYPE_CHECKING:
    from launcher.handoff import ResolvedLaunch

logger = logging.getLogger("launcher.sync")

UV_TIMEOUT_S = 1800.0
TAIL_LINES = 15


@dataclass(frozen=True)
class SyncPlan:
    needed: bool
    reason: str
    fingerprint: dict[str, Any]


def require_locked_project(project: Path) -> None:
    if not (project / "pyproject.toml").is_file():
        raise LauncherError(
            Phase.SYNC,
            f"pyproject.toml not found in {project}: the project must be a uv project (`uv init`)",
        )
    if not (project / "uv.lock").is_file():
        raise LauncherError(
            Phase.SYNC,
            f"uv.lock not found in {project}: run `uv lock` and commit uv.lock (the launcher "
            "only installs locked dependencies)",
        )


def plan_sync(launch: ResolvedLaunch) -> SyncPlan:
    """Decide whether uv must run (no side effects)."""
    require_locked_project(launch.project)
    fingerprint = sync_fingerprint(
        launch.project, launch.environment_path, launch.interpreter, sync_selection(os.environ)
    )
    skip, reason = sync_skip_reason(
        launch.stamp, fingerprint, launch.environment_path, launch.interpreter
    )
    return SyncPlan(needed=not skip, reason=reason, fingerprint=fingerprint)


def resolve_uv(uv: str) -> Path:
    if not uv:
        raise LauncherError(
            Phase.SYNC, f"{EnvVar.SDK_UV} is not set: the image must point it at its pinned uv"
        )
    path = Path(uv)
    if not path.is_file() or not os.access(path, os.X_OK):
        raise LauncherError(Phase.SYNC, f"the pinned uv is not an executable file: {path}")
    return path


def uv_environment(launch: ResolvedLaunch) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        UV_PROJECT_ENVIRONMENT=str(launch.environment_path),
        UV_CACHE_DIR=str(launch.cache_path),
        UV_PYTHON=str(launch.interpreter),
        UV_PYTHON_DOWNLOADS="never",
        HOME=AGENT_HOME,
    )
    return env


def _redacted_tail(text: str, secrets: dict[str, str]) -> str:
    tail = "\n".join(text.strip().splitlines()[-TAIL_LINES:])
    for value in secrets.values():
        if len(value) >= 4:
            tail = tail.replace(value, "***")
    return tail


def run_uv_sync(launch: ResolvedLaunch, uv: Path) -> None:
    logger.info("phase sync: uv sync --locked into %s", launch.environment_path)
    try:
        result = subprocess.run(
            [str(uv), "sync", "--locked"],
            cwd=launch.project,
            env=uv_environment(launch),
            capture_output=True,
            text=True,
            check=False,
            timeout=UV_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise LauncherError(Phase.SYNC, f"uv sync did not finish in {UV_TIMEOUT_S:.0f}s") from None
    if result.returncode != 0:
        raise LauncherError(
            Phase.SYNC,
            "uv sync --locked failed (is uv.lock up to date with pyproject.toml? run `uv lock` "
            "and commit it; does requires-python accept the image's Python?); last lines of "
            f"uv's output:\n{_redacted_tail(result.stderr or result.stdout, launch.credentials)}",
        )


def synchronize(launch: ResolvedLaunch) -> None:
    """Run the phase; records the stamp after a successful sync (or a changed config)."""
    plan = plan_sync(launch)
    stamp = dict(launch.stamp)
    if not plan.needed:
        logger.info("phase sync: skipped uv (%s)", plan.reason)
    else:
        logger.info("phase sync: needed (%s)", plan.reason)
        uv = resolve_uv(launch.sdk_uv)
        from filelock import FileLock, Timeout

        launch.state_path.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(launch.state_path / SYNC_LOCK_FILENAME))
        try:
            lock.acquire(timeout=SYNC_LOCK_TIMEOUT_S)
        except Timeout:
            raise LauncherError(
                Phase.SYNC,
                f"timed out after {SYNC_LOCK_TIMEOUT_S:.0f}s waiting for the dependency-sync "
                f"lock {launch.state_path / SYNC_LOCK_FILENAME} (another launch is syncing?)",
            ) from None
        try:
            remove_stamp_sync(launch.state_path)
            run_uv_sync(launch, uv)
            stamp["sync"] = {
                **plan.fingerprint,
                "distributions": installed_distributions(launch.environment_path),
            }
        finally:
            lock.release()
    if plan.needed or trusted_config_digest(stamp) != launch.config_digest:
        stamp.update(config_sha256=launch.config_digest, schema=schema_fingerprint())
        write_stamp(launch.state_path, stamp)
