"""`.github/dependabot.yml` covers every uv project directory (each lock git tracks) and the
workflow actions, grouped, with a cooldown no shorter than the quarantine gate
(`release.lock-age`, release.max_age_days); the lint session has zizmor audit it."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from bandkit.release import lock_refresh
from bandkit.release.settings import DEFAULTS
from tests.ci.support import dependabot_problems

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / ".github" / "dependabot.yml"
GATE_DAYS = float(str(DEFAULTS["max_age_days"]))


def config() -> dict[str, Any]:
    data = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def projects() -> list[str]:
    """Every uv project directory: where git tracks a uv.lock (`.` is the root)."""
    tracked = subprocess.run(
        ["git", "ls-files", "--", "uv.lock", "**/uv.lock"], cwd=REPO, capture_output=True,
        text=True, check=True, timeout=30,
    ).stdout.split()  # fmt: skip
    return sorted(str(Path(p).parent) for p in tracked)


def noxfile_projects() -> list[str]:
    namespace: dict[str, Any] = {}
    source = (REPO / "noxfile.py").read_text(encoding="utf-8")
    start = source.index("LOCKED_PROJECTS = (")
    exec(source[start : source.index(")\n", start) + 2], namespace)  # noqa: S102 - our own file
    return sorted([".", *namespace["LOCKED_PROJECTS"]])


def test_the_config_covers_every_uv_project_and_the_actions_with_the_gates_cooldown() -> None:
    found = projects()
    assert "." in found
    assert len(found) >= 7
    assert dependabot_problems(config(), found, GATE_DAYS) == []


def test_the_project_lists_agree_with_the_tracked_locks() -> None:
    assert noxfile_projects() == projects() == sorted(lock_refresh.UV_PROJECTS)


def test_a_missing_project_directory_fails() -> None:
    bad = copy.deepcopy(config())
    uv = next(u for u in bad["updates"] if u["package-ecosystem"] == "uv")
    uv["directories"].remove("/smoke/agent")
    assert dependabot_problems(bad, projects(), GATE_DAYS) == [
        "uv project smoke/agent is not in any uv update's directories"
    ]


@pytest.mark.parametrize("ecosystem", ["uv", "github-actions"])
def test_a_cooldown_shorter_than_the_gate_fails(ecosystem: str) -> None:
    bad = copy.deepcopy(config())
    update = next(u for u in bad["updates"] if u["package-ecosystem"] == ecosystem)
    update["cooldown"]["default-days"] = int(GATE_DAYS) - 1
    (problem,) = dependabot_problems(bad, projects(), GATE_DAYS)
    assert problem == (
        f"{ecosystem} update: cooldown default-days {int(GATE_DAYS) - 1} is shorter than the "
        f"{GATE_DAYS:g}-day gate"
    )
    del update["cooldown"]
    assert dependabot_problems(bad, projects(), GATE_DAYS) == [
        f"{ecosystem} update: no cooldown default-days (the gate needs {GATE_DAYS:g})"
    ]


def test_no_actions_update_and_no_group_fail() -> None:
    bad = copy.deepcopy(config())
    bad["updates"] = [u for u in bad["updates"] if u["package-ecosystem"] == "uv"]
    del bad["updates"][0]["groups"]
    assert dependabot_problems(bad, projects(), GATE_DAYS) == [
        "no github-actions update: the workflows' SHA pins would go stale",
        "uv update: not grouped (one pull request per ecosystem: patterns ['*'])",
    ]


def test_lint_has_zizmor_audit_the_dependabot_config() -> None:
    text = (REPO / "noxfile.py").read_text(encoding="utf-8")
    lint = text[text.index("def lint(") : text.index("def typecheck(")]
    assert (
        'session.run("zizmor", "--offline", "--no-progress", str(GITHUB.relative_to(ROOT)))' in lint
    )
    assert 'GITHUB = ROOT / ".github"' in text
