"""What every smoke step shares: the directory layout, the state recorder, the output.

Layout under a run directory (`.run` by default):

    smoke/             0700: state.json, state.<run_id>.json, evidence.md (smoke.state)
    smoke-platform/    0700: the smoke's own local platform (run file, user key, state, log)
    smoke-kit/         the provisioning area: provision/<sandbox>/manifest.json, the
                       runtimes' state (runtimes/local/...) and workspaces/<run_id>/, the
                       run's copy of smoke/agent (provisioning writes agent.id there)

The run directory may be private (`platform.up` makes `.run` 0700, pytest's tmp is 0700):
as root the local runtime then keeps the box outside it (`LocalRuntime.boxes_root`) and
stages the workspace copy into the box (`bandkit.runtimes.boxworkspace`), as it does for
`kit.provision`; docker mounts the workspace into its container.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bandkit.terminal import printable
from smoke.state import SmokeState, StateStore

AGENT_SRC = Path(__file__).resolve().parent / "agent"
Log = Callable[[str], None]


def utc_now() -> datetime:
    return datetime.now(UTC)


def stderr_log(line: str) -> None:
    """The smoke's progress on stderr; a line may quote the agent's log (escaped)."""
    print(printable(line), file=sys.stderr, flush=True)


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
