"""Staged workspaces: a copy of each role's workspace that the run may change.

The tracked `examples/docker_demo/agents/<role>/` is never modified. `stage` records the
copy in the manifest, copies the role's files (band.yaml, the locked project, the persona)
and the one agent program of all three roles (`examples/docker_demo/agent_main.py` as
`main.py`, and `brain.py`), writes `script.json` (that role's scenario lines) and
puts the platform's endpoints into the copy's band.yaml (comments kept, ruamel round
trip). Provisioning later writes the agent id into that same copy. Everything is left
readable by the agent uid (directories 0755, files 0644): it holds no secret.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Final

from ruamel.yaml import YAML

from bandkit.demo import DemoError
from bandkit.manifest import Kind, Manifest
from examples.docker_demo import brain, brains_frameworks
from examples.docker_demo.cast import Role
from examples.docker_demo.scenario import Scenario, agent_script

AGENTS_DIR: Final = Path(__file__).resolve().parents[2] / "examples" / "docker_demo" / "agents"
BRAIN_SOURCE: Final = Path(brain.__file__)
MAIN_SOURCE: Final = Path(brain.__file__).with_name("agent_main.py")
# A role's own files; the program (main.py, brain.py) is shared and added at staging.
WORKSPACE_FILES: Final = ("pyproject.toml", "uv.lock", "band.yaml", "prompt.md")
PROGRAM_FILES: Final = {
    "main.py": MAIN_SOURCE,
    "brain.py": BRAIN_SOURCE,
    "brains_frameworks.py": Path(brains_frameworks.__file__),
}


def write_endpoints(band_yaml: Path, *, rest_url: str, ws_url: str) -> None:
    """Set band.restUrl / band.wsUrl in a staged band.yaml, keeping its comments."""
    yaml = YAML()
    yaml.preserve_quotes = True
    data = yaml.load(band_yaml.read_text(encoding="utf-8"))
    data["band"]["restUrl"] = rest_url
    data["band"]["wsUrl"] = ws_url
    out = io.StringIO()
    yaml.dump(data, out)
    band_yaml.write_text(out.getvalue(), encoding="utf-8")


def stage(
    manifest: Manifest,
    target: Path,
    role: Role,
    scenario: Scenario,
    *,
    topic: str,
    rest_url: str,
    ws_url: str,
    source: Path = AGENTS_DIR,
    brains: str = "scripted",
) -> Path:
    """Record, then make the staged copy of `role`'s workspace at `target`."""
    if target.exists() or target.is_symlink():
        raise DemoError(
            f"{target} already exists (left by an earlier run?); remove it, or run "
            "`uv run invoke demo.down` if that run is still recorded"
        )
    manifest.record(Kind.WORKSPACE, str(target), role=role.value)
    origin = source / role.value
    target.mkdir(mode=0o755, parents=True)
    try:
        for name in WORKSPACE_FILES:
            shutil.copyfile(origin / name, target / name)
        for name, program in PROGRAM_FILES.items():
            shutil.copyfile(program, target / name)
    except OSError as exc:
        raise DemoError(f"cannot stage the {role.value} workspace from {origin}: {exc}") from None
    script = {**agent_script(scenario, role, topic=topic), "brains": brains}
    (target / brain.SCRIPT_FILE).write_text(json.dumps(script, indent=1) + "\n", encoding="utf-8")
    write_endpoints(target / "band.yaml", rest_url=rest_url, ws_url=ws_url)
    for path in (target, *target.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target
