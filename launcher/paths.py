"""The paths phase: fence every configured path.

Workspace paths (project, entrypoint, the secrets file) must stay inside their
root after symlinks are resolved, so `../` and links that point out both fail.
Runtime paths (venv, state, cache, logs) are sandbox-owned: absolute, and
outside both the mounted workspace (a host directory) and the read-only SDK home.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from launcher.config import WorkspaceSpec
from launcher.errors import LauncherError, Phase


@dataclass(frozen=True)
class ResolvedPaths:
    project: Path
    entrypoint: Path
    environment_path: Path
    state_path: Path
    cache_path: Path
    log_path: Path


def resolve_inside(root: Path, value: str, *, name: str, phase: Phase) -> Path:
    """`value` (relative to `root`, or absolute) with symlinks resolved; must stay in `root`."""
    candidate = Path(value)
    resolved = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise LauncherError(
            phase, f"{name} must stay inside {root} (symlinks resolved), got {value!r}"
        )
    return resolved


def runtime_path_problem(value: str, *, workspace: Path, sdk_home: Path) -> str:
    """Why `value` cannot be a runtime path, or "" when it can (pure path math)."""
    path = Path(value)
    if not value or not path.is_absolute():
        return "must be an absolute path"
    resolved = path.resolve()
    for root, label in ((workspace, "the mounted workspace"), (sdk_home, "the SDK home")):
        if resolved.is_relative_to(root.resolve()):
            return f"must live outside {label} ({root})"
    return ""


def require_project_present(project: Path, entrypoint: Path) -> None:
    """Checked at resolve time for a mounted project, after the repo phase for a clone."""
    if not project.is_dir():
        raise LauncherError(Phase.PATHS, f"project path is not a directory: {project}")
    if not entrypoint.is_file():
        raise LauncherError(
            Phase.PATHS,
            f"entrypoint is not a file: {entrypoint} (set agent.entrypoint, relative to "
            "project.path)",
        )


def resolve_paths(spec: WorkspaceSpec, workspace: Path, sdk_home: Path) -> ResolvedPaths:
    project = resolve_inside(workspace, spec.project_path, name="project.path", phase=Phase.PATHS)
    entrypoint = resolve_inside(
        project, spec.entrypoint, name="agent.entrypoint", phase=Phase.PATHS
    )
    if spec.repo is None:
        require_project_present(project, entrypoint)
    elif project == workspace:
        raise LauncherError(
            Phase.REPO,
            "project.path must be a subdirectory of the workspace when repo.url is set "
            "(the workspace root holds band.yaml), e.g. `project: {path: app}`",
        )
    runtime: dict[str, Path] = {}
    for field, key in (
        ("environment_path", "runtime.environmentPath"),
        ("state_path", "runtime.statePath"),
        ("cache_path", "runtime.cachePath"),
        ("log_path", "runtime.logPath"),
    ):
        value = getattr(spec.runtime, field)
        if problem := runtime_path_problem(value, workspace=workspace, sdk_home=sdk_home):
            raise LauncherError(Phase.PATHS, f"{key} {problem}, got {value!r}")
        runtime[field] = Path(value).resolve()
    return ResolvedPaths(project=project, entrypoint=entrypoint, **runtime)
