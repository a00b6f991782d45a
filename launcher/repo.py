"""The repo phase: clone the configured repository into the fenced project path,
or validate and reuse an existing checkout. The engine is band-sdk's
`band.docker.repo_init` (clone/validate under a file lock, SSH preflight, metadata
and optional context index under the state path); it is imported only when
band.yaml has a `repo:` section.
"""

from __future__ import annotations

import logging
from pathlib import Path

from launcher.config import RepoSpec
from launcher.constants import REPO_LOCK_TIMEOUT_S
from launcher.errors import LauncherError, Phase

logger = logging.getLogger("launcher.repo")


def planned_action(project: Path) -> str:
    """What the repo phase would do (for --check): no side effects."""
    if (project / ".git").exists():
        return f"reuse and validate the existing checkout at {project}"
    if not project.exists() or (project.is_dir() and not any(project.iterdir())):
        return f"clone into {project}"
    return f"fail: {project} exists and is not a Git checkout"


def bootstrap_repository(repo: RepoSpec, *, project: Path, state_path: Path, agent_id: str) -> None:
    try:
        from band.docker.repo_init import initialize_repo
    except ImportError:
        raise LauncherError(
            Phase.REPO,
            "band.yaml has a repo: section but band-sdk (band.docker.repo_init) is not "
            "installed next to the launcher",
        ) from None
    config = {
        "repo": {
            "url": repo.url,
            "path": str(project),
            "branch": repo.branch,
            "index": repo.index,
        }
    }
    try:
        result = initialize_repo(
            config,
            agent_key=agent_id,
            state_dir=state_path,
            context_dir=state_path / "context",
            lock_timeout_s=REPO_LOCK_TIMEOUT_S,
        )
    except (ValueError, OSError) as exc:
        raise LauncherError(Phase.REPO, f"repository bootstrap failed: {exc}") from None
    logger.info(
        "phase repo: %s at %s (indexed: %s)",
        "cloned" if result.cloned else "reused checkout",
        project,
        result.indexed,
    )
