from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bandkit.ci import lanes


def test_matrix_lists_every_lane_with_its_session() -> None:
    entries = lanes.matrix()["include"]
    assert [e["lane"] for e in entries] == [lane.id for lane in lanes.LANES if not lane.live]
    for entry in entries:
        assert entry["session"]
        assert set(entry) >= {"docker", "sbx", "live", "browser"}


def test_matrix_hides_live_lanes_unless_asked() -> None:
    registry = (lanes.Lane("a", "a"), lanes.Lane("b", "b", live=True))
    assert [e["lane"] for e in lanes.matrix(registry)["include"]] == ["a"]
    assert [e["lane"] for e in lanes.matrix(registry, live=True)["include"]] == ["a", "b"]


def test_every_lane_session_exists_in_noxfile(repo_root: Path) -> None:
    text = (repo_root / "noxfile.py").read_text()
    for lane in lanes.LANES:
        assert f"def {lane.session}(session" in text, lane.session


def test_gated_lanes_reads_expressions_and_literal_lists() -> None:
    text = """
jobs:
  a:
    if: matrix.lane == 'docker_tests'
    strategy:
      matrix:
        lane: [lint, ghost]
    steps:
      - run: echo ${{ matrix.lane != "other" }}
"""
    assert lanes.gated_lanes(text) == {"docker_tests", "lint", "ghost", "other"}


def test_unknown_lane_in_a_workflow_is_reported(tmp_path: Path) -> None:
    (tmp_path / "good.yml").write_text("jobs:\n  a:\n    if: matrix.lane == 'lint'\n")
    (tmp_path / "bad.yml").write_text("jobs:\n  a:\n    if: matrix.lane == 'nonexistent'\n")
    assert lanes.unknown_lanes(tmp_path) == {"bad.yml": {"nonexistent"}}


def test_repo_workflows_use_only_known_lanes(repo_root: Path) -> None:
    assert lanes.unknown_lanes(repo_root / ".github" / "workflows") == {}


def test_lane_lookup_names_known_lanes() -> None:
    with pytest.raises(KeyError, match="known lanes"):
        lanes.lane("nope")


def _run_main(cwd: Path, output: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bandkit.ci.lanes"],
        cwd=cwd,
        env={"GITHUB_OUTPUT": str(output), "PYTHONPATH": str(Path(__file__).parents[2])},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_main_prints_json_and_writes_github_output(tmp_path: Path) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    out = tmp_path / "gh_output"
    proc = _run_main(tmp_path, out)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed == json.loads(lanes.matrix_json())
    assert out.read_text() == f"matrix={lanes.matrix_json()}\n"


def test_main_fails_on_workflow_with_unknown_lane(tmp_path: Path) -> None:
    wf = tmp_path / ".github" / "workflows"
    wf.mkdir(parents=True)
    (wf / "ci.yml").write_text("jobs:\n  x:\n    if: matrix.lane == 'phantom'\n")
    proc = _run_main(tmp_path, tmp_path / "o")
    assert proc.returncode == 1
    assert "unknown lane(s) phantom" in proc.stderr
    assert "Traceback" not in proc.stderr
