"""`invoke kit.validate` and `sbx kit validate` as a user runs them, with the sbx simulator
installed at 0.35 and at 0.47: each generation passes its own shape (auto picks it from
`sbx version`) and refuses the other one with sbx's own decoder message; the kit directory
itself passes 0.47, its legacy directory 0.35."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.kit import spec as kitspec
from tests.fakes.simharness import Sim, simulator

LEGACY, CURRENT = kitspec.default_spec("legacy"), kitspec.default_spec("current")


@pytest.fixture(params=["0.35.0", "0.47.0"], scope="module")
def sim(request: pytest.FixtureRequest) -> Iterator[Sim]:
    with simulator(str(request.param)) as s:
        yield s


def validate(sim: Sim, repo_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", "kit.validate", *args],
        cwd=repo_root,
        env=sim.env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_auto_passes_the_shape_of_the_installed_generation(sim: Sim, repo_root: Path) -> None:
    own = CURRENT if sim.env["SBX_SIM_VERSION"] == "0.47.0" else LEGACY
    done = validate(sim, repo_root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"PASS {own} "), done.stdout
    calls = (sim.state / "calls.jsonl").read_text()
    assert '"kit", "validate"' in calls  # sbx's verdict, not our fallback


def test_sbx_kit_validate_of_the_kit_directories(sim: Sim, repo_root: Path) -> None:
    kit = repo_root / "docker" / "band_python_kit"
    own = kit if sim.env["SBX_SIM_VERSION"] == "0.47.0" else kit / "sbx-below-0.42.1"
    done = subprocess.run(
        ["sbx", "kit", "validate", str(own.relative_to(repo_root))],
        cwd=repo_root, env=sim.env, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("PASS: band-python-kit")


@pytest.mark.parametrize("shape", ["legacy", "current"])
def test_each_shape_on_each_generation(sim: Sim, repo_root: Path, shape: str) -> None:
    done = validate(sim, repo_root, "--spec-shape", shape)
    new = sim.env["SBX_SIM_VERSION"] == "0.47.0"
    if (shape == "current") == new:
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.startswith("PASS ")
        return
    assert done.returncode == 1
    message = (
        "INVALID: field caps not found in type spec.specFileV2"
        if new
        else "INVALID: field permissions not found in type spec"
    )
    assert message in done.stdout + done.stderr
