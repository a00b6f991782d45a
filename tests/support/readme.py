"""Running the README as written: its ```sh blocks, a newcomer's shell environment, and the
local platform's listings (the fresh-clone fixture `clone` is in tests/conftest.py)."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[2]
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def readme_section(heading: str) -> str:
    """The text under `## heading` (or `### heading`) up to the next `## ` heading."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def readme_block(heading: str) -> list[str]:
    """The commands of the first ```sh block under `## heading`, one per line."""
    return readme_blocks(heading)[0][1]


def readme_blocks(heading: str) -> list[tuple[str, list[str]]]:
    """Every ```sh block under `heading`: the prose paragraph just before it, and its
    commands, one per line."""
    parts = readme_section(heading).split("```sh\n")
    blocks = []
    for before, part in itertools.pairwise(parts):
        prose = before.rsplit("```", 1)[-1].strip().rsplit("\n\n", 1)[-1]
        block = part.split("```", 1)[0]
        blocks.append((prose, [line for line in block.splitlines() if line.strip()]))
    return blocks


def clean_env() -> dict[str, str]:
    """The environment of a newcomer's shell: no platform settings, no nox/uv venv."""
    env = dict(os.environ)
    for name in list(env):
        if name.startswith(("BAND_", "BANDKIT_", "NOX_", "SBX_")) or name in (
            "VIRTUAL_ENV",
            "UV_PROJECT_ENVIRONMENT",
            "PYTHONPATH",
        ):
            del env[name]
    return env


def attempt(line: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`line` as a newcomer's shell runs it, whatever its exit code."""
    return subprocess.run(
        ["bash", "-c", line],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def run(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = attempt(line, cwd)
    assert proc.returncode == 0, f"`{line}` failed:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def platform_listing(clone: Path, path: str) -> list[dict[str, object]]:
    record = json.loads((clone / ".run" / "platform.json").read_text())
    key = Path(record["user_key_file"]).read_text().strip()
    response = httpx.get(f"{record['rest_url']}{path}", headers={"X-API-Key": key}, timeout=10)
    response.raise_for_status()
    data: list[dict[str, object]] = response.json()["data"]
    return data
