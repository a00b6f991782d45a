"""Git state from a real repository: the release tag, a clean tree, the commit."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bandkit.release.gather import git_state
from bandkit.release.versions import parse


def git(cwd: Path, *argv: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.test", *argv],
        cwd=cwd, check=True, capture_output=True, timeout=30,
    )  # fmt: skip


def test_tag_cleanliness_and_commit(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "a").write_text("a")
    git(tmp_path, "add", "a")
    git(tmp_path, "commit", "-qm", "one")
    state = git_state(parse("1.2.0-r1"), tmp_path)
    assert state.clean
    assert not state.tag_present
    assert len(state.commit) == 40
    git(tmp_path, "tag", "band-sdk-v1.2.0")
    assert git_state(parse("1.2.0-r1"), tmp_path).tag_present  # a rebuild needs its base tag
    (tmp_path / "b").write_text("untracked")
    assert not git_state(parse("1.2.0"), tmp_path).clean
