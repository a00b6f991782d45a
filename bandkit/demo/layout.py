"""Where a demo run keeps its files, and the small run record `status`/`down`/`logs` read.

    <run_dir>/demo/           0700, the host's side
        manifest.json         the run manifest (every resource, recorded before it exists)
        run.json              this run's settings: runtime, platform URLs, box root (no key)
        transcript.txt        the last meeting's transcript (kept after the teardown)
    <box root>/               what the sandboxes see (traversable by the agent uid)
        workspaces/<role>/    the staged workspace copies (removed by the teardown)
        runtimes/<runtime>/   the runtime's state; caches (each box's uv cache, the SDK
                              home) stay for speed

The box root is `<run_dir>/demo-boxes`, except as root: then the local runtime runs each
agent as a uid of its own, which must traverse every directory above the box root,
and the run directory is private (0700) once the local platform keeps its key there. As
root the box root is the fixed `/tmp/band-demo-0-<hash of run_dir>` (kept across runs for
its caches). Anyone can create that name first, so `make_home` makes it, or takes it only
as a real directory (never a link) that root owns and nobody else can write, checked on a
descriptor after the mkdir; anything else stops the run before anything is put there.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from bandkit.demo import DemoError
from bandkit.fsio import PRIVATE_DIR_MODE, UnsafePathError, own_dir, write_private
from examples.docker_demo.cast import Role

SHARED_TMP = Path("/tmp")  # noqa: S108 - a fixed, ownership-checked directory under it


class RunInfo(BaseModel):
    """What a run chose, for the commands that come after it (no secret in here)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: str = "1"
    runtime: str
    platform: str
    rest_url: str
    ws_url: str
    room_url: str = ""
    box_root: str
    scenario: str


@dataclass(frozen=True)
class DemoLayout:
    run_dir: Path
    box_root: Path

    @classmethod
    def for_run_dir(cls, run_dir: Path) -> DemoLayout:
        run_dir = Path(run_dir).absolute()
        return cls(run_dir, box_root_for(run_dir))

    @property
    def home(self) -> Path:
        return self.run_dir / "demo"

    @property
    def manifest(self) -> Path:
        return self.home / "manifest.json"

    @property
    def run_file(self) -> Path:
        return self.home / "run.json"

    @property
    def transcript(self) -> Path:
        return self.home / "transcript.txt"

    @property
    def workspaces(self) -> Path:
        return self.box_root / "workspaces"

    @property
    def runtimes(self) -> Path:
        return self.box_root / "runtimes"

    def workspace(self, role: Role) -> Path:
        return self.workspaces / role.value

    def make_home(self) -> None:
        """The run's private home, then the box root: ours, a real directory, 0755 (the
        agent uid must traverse it), refused (DemoError) when someone else made it."""
        self.home.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        try:
            own_dir(self.box_root, mode=0o755, what="the demo's box root", parents=True)
        except UnsafePathError as exc:
            raise DemoError(f"{exc} (it would hold the workspaces and proxy.json)") from None

    def write_info(self, info: RunInfo) -> None:
        write_private(self.run_file, info.model_dump_json(indent=2) + "\n")

    def read_info(self) -> RunInfo | None:
        try:
            return RunInfo.model_validate_json(self.run_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValidationError, ValueError):
            raise DemoError(
                f"run record {self.run_file} is unreadable; delete it (the manifest beside "
                "it still lists what to remove)"
            ) from None


def box_root_for(run_dir: Path) -> Path:
    if os.geteuid() != 0:
        return run_dir / "demo-boxes"
    digest = hashlib.sha256(str(run_dir).encode()).hexdigest()[:12]
    shared = SHARED_TMP / f"band-demo-{os.geteuid()}-{digest}"
    if shared.is_symlink() or (shared.exists() and not shared.is_dir()):
        raise DemoError(f"{shared} is not a plain directory; remove it and re-run")
    if shared.exists() and shared.stat().st_uid != os.geteuid():
        raise DemoError(f"{shared} belongs to another user; remove it and re-run")
    return shared
