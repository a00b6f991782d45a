"""Every release test writes its publish record under its own temp dir, never the repo's dist/."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandkit.release import record


@pytest.fixture(autouse=True)
def record_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "dist" / "release.json"
    monkeypatch.setattr(record, "RECORD", path)
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    return path
