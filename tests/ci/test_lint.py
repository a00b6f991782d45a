"""The lint session's Dockerfile and workflow linters see what they must, and ignores say why.

`nox -s lint` hands hadolint every `Dockerfile*` through one git pathspec (new files
included, so a Dockerfile added in a pull request is linted before it is committed) and runs
zizmor offline over the workflows.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKFLOW_FILES = sorted((REPO / ".github" / "workflows").glob("*.y*ml"))


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_zizmor_ignores_say_why(path: Path) -> None:
    for line in path.read_text(encoding="utf-8").splitlines():
        if "zizmor: ignore" in line:
            assert re.search(r"zizmor: ignore\[[\w-]+\]\s+\S", line), line


def _listed(*pathspec: str) -> list[str]:
    argv = ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *pathspec]
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=30, check=True)
    return sorted(set(out.stdout.split()))


def _dockerfiles() -> list[str]:
    """What the lint session hands hadolint: the noxfile's pathspec, through git."""
    noxfile = (REPO / "noxfile.py").read_text(encoding="utf-8")
    (pathspec,) = re.findall(r'^DOCKERFILES = "([^"]+)"$', noxfile, flags=re.M)
    return [path for path in _listed(pathspec) if not path.endswith(".dockerignore")]


def test_hadolint_sees_every_dockerfile_in_the_repo() -> None:
    listed = _dockerfiles()
    assert "docker/band_python_kit/Dockerfile" in listed
    every = [
        path
        for path in _listed()
        if Path(path).name.startswith("Dockerfile") and not path.endswith(".dockerignore")
    ]
    assert listed == every


def test_hadolint_ignores_give_a_reason_just_above() -> None:
    for name in _dockerfiles():
        lines = (REPO / name).read_text(encoding="utf-8").splitlines()
        for index, line in enumerate(lines):
            if not line.startswith("# hadolint ignore="):
                continue
            block: list[str] = []
            for above in reversed(lines[:index]):
                if not above.startswith("#"):
                    break
                block.append(above)
            reason = " ".join(text.lstrip("# ") for text in block)
            assert re.search(r"\w{3,}", reason), f"{name}:{index + 1}: say why, just above"


def test_lint_runs_zizmor_offline_and_hadolint_on_every_dockerfile() -> None:
    text = (REPO / "noxfile.py").read_text(encoding="utf-8")
    lint = text[text.index("def lint(") : text.index("def typecheck(")]
    assert '"zizmor", "--offline"' in lint
    assert '"hadolint", *_dockerfiles(session)' in lint
    assert 'DOCKERFILES = ":(glob)**/Dockerfile*"' in text
