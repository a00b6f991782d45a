"""The floors check's parts: the test tools' pins from the lock, the import smoke that
reports every module that fails (and counts the rest), and a test list that exists."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bandkit.ci import floors

REPO = Path(__file__).resolve().parents[2]


def test_the_test_tools_come_pinned_from_the_lock(tmp_path: Path) -> None:
    pins = floors.locked(REPO / "uv.lock")
    assert [pin.partition("==")[0] for pin in pins] == list(floors.TEST_TOOLS)
    assert all(pin.partition("==")[2][0].isdigit() for pin in pins), pins
    lock = tmp_path / "uv.lock"
    lock.write_text('version = 1\n[[package]]\nname = "pytest"\nversion = "9.0"\n')
    assert floors.locked(lock, ["pytest"]) == ["pytest==9.0"]
    with pytest.raises(KeyError, match="pins none of pytest-xdist"):
        floors.locked(lock, ["pytest", "pytest-xdist"])


def test_the_import_smoke_reports_each_failure_and_counts_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "floorpkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "good.py").write_text("import json\n")
    (package / "old.py").write_text("from json import no_such_name\n")
    (package / "__main__.py").write_text("raise SystemExit('a program is not imported')\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "deep.py").write_text("import no_such_module_at_the_floor\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    count, failures = floors.import_all(["floorpkg", "missingpkg"])
    for name in [n for n in sys.modules if n.startswith("floorpkg")]:
        monkeypatch.delitem(sys.modules, name)
    assert count == 3  # floorpkg, good, sub
    assert sorted(line.partition(":")[0] for line in failures) == [
        "floorpkg.old",
        "floorpkg.sub.deep",
        "missingpkg",
    ]
    assert any("ImportError: cannot import name 'no_such_name'" in line for line in failures)


def test_every_floors_test_exists_in_the_fast_lane() -> None:
    for path in floors.TESTS:
        text = (REPO / path).read_text(encoding="utf-8")
        assert "pytestmark = pytest.mark.e2e" not in text, path
        assert "pytestmark = pytest.mark.docker" not in text, path
