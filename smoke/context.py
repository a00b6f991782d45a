"""What every smoke step shares: the directory layout, the state recorder, the output.

Layout under a run directory (`.run` by default):

    smoke/             0700: state.json, state.<run_id>.json, evidence.md (smoke.state)
    smoke-platform/    0700: the smoke's own local platform (run file, user key, state, log)
    smoke-kit/         the provisioning area: provision/<sandbox>/manifest.json, the
                       runtimes' state (runtimes/local/...) and workspaces/<run_id>/, the
                       run's copy of smoke/agent (provisioning writes agent.id there)

As root the local runtime runs the agent as the agent uid, which must be able to enter
`smoke-kit/`: every directory above it must be searchable by others (`check_reachable`).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from smoke.state import SmokeState, StateError, StateStore

AGENT_SRC = Path(__file__).resolve().parent / "agent"
Log = Callable[[str], None]


def utc_now() -> datetime:
    return datetime.now(UTC)


def stderr_log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Layout:
    run_dir: Path

    @property
    def root(self) -> Path:
        return self.run_dir / "smoke"

    @property
    def store(self) -> StateStore:
        return StateStore(self.root)

    @property
    def kit_dir(self) -> Path:
        return self.run_dir / "smoke-kit"

    @property
    def platform_dir(self) -> Path:
        return self.run_dir / "smoke-platform"

    def workspace(self, run_id: str) -> Path:
        return self.kit_dir / "workspaces" / run_id

    def manifest(self, sandbox: str) -> Path:
        return self.kit_dir / "provision" / sandbox / "manifest.json"


def unreachable_dirs(path: Path) -> list[Path]:
    """Directories on the way to `path` that other users cannot enter (o+x missing)."""
    bad = []
    for parent in [*reversed(Path(path).absolute().parents), Path(path).absolute()]:
        try:
            mode = parent.stat().st_mode
        except FileNotFoundError:
            break
        if not mode & stat.S_IXOTH:
            bad.append(parent)
    return bad


def check_reachable(path: Path) -> None:
    """As root, refuse a root the agent uid could not enter (it runs as another user)."""
    if os.geteuid() != 0:
        return
    bad = unreachable_dirs(path)
    if bad:
        raise StateError(
            f"the agent runs as another user and cannot enter {bad[0]} (mode "
            f"{stat.S_IMODE(bad[0].stat().st_mode):o}); pass --run-dir under /tmp or "
            f"`chmod o+x {bad[0]}`"
        )


@dataclass
class Recorder:
    """The current state, saved after every change (`update`), times from `clock`."""

    store: StateStore
    state: SmokeState
    clock: Callable[[], datetime] = utc_now
    log: Log = field(default=stderr_log)

    def update(self, change: Callable[..., SmokeState], *args: Any, **kwargs: Any) -> SmokeState:
        self.state = change(self.state, *args, now=self.clock(), **kwargs)
        self.store.save(self.state)
        return self.state
