from __future__ import annotations

import json
import os
from pathlib import Path

from launcher.stamp import (
    STAMP_VERSION,
    base_interpreter,
    installed_distributions,
    read_stamp,
    schema_fingerprint,
    sync_fingerprint,
    sync_selection,
    sync_skip_reason,
    trusted_config_digest,
    venv_problem,
    write_stamp,
)
from tests.launcher.fakes import Box


def test_write_is_atomic_owner_only_and_round_trips(tmp_path: Path) -> None:
    write_stamp(tmp_path / "state", {"config_sha256": "abc", "schema": schema_fingerprint()})
    path = tmp_path / "state" / "launcher-stamp.json"
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in (tmp_path / "state").iterdir()] == ["launcher-stamp.json"]
    stamp = read_stamp(tmp_path / "state")
    assert stamp["version"] == STAMP_VERSION
    assert trusted_config_digest(stamp) == "abc"


def test_foreign_or_broken_stamps_are_ignored(tmp_path: Path) -> None:
    assert read_stamp(tmp_path) == {}
    (tmp_path / "launcher-stamp.json").write_text("{not json")
    assert read_stamp(tmp_path) == {}
    (tmp_path / "launcher-stamp.json").write_text(json.dumps({"version": 999}))
    assert read_stamp(tmp_path) == {}
    assert trusted_config_digest({"config_sha256": "abc", "schema": "other"}) is None


def _venv(root: Path) -> Path:
    venv = root / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (venv / "bin" / "python").symlink_to(base_interpreter())
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (site / "six-1.0.dist-info").mkdir()
    return venv


def test_skip_needs_every_input_unchanged_and_an_intact_venv(box: Box) -> None:
    (box.ws / "uv.lock").write_text("version = 1\n")
    venv = _venv(box.root)
    interpreter = base_interpreter()
    fingerprint = sync_fingerprint(box.ws, venv, interpreter, {})
    stamp = {"sync": {**fingerprint, "distributions": installed_distributions(venv)}}
    assert sync_skip_reason(stamp, fingerprint, venv, interpreter)[0]

    assert sync_skip_reason({}, fingerprint, venv, interpreter) == (
        False,
        "no record of a previous sync",
    )
    for key, reason in (
        ("lock_sha256", "uv.lock changed"),
        ("pyproject_sha256", "pyproject.toml changed"),
        ("interpreter", "the base interpreter changed"),
        ("environment", "runtime.environmentPath changed"),
        ("selection", "uv's dependency selection (UV_NO_DEFAULT_GROUPS and the like) changed"),
    ):
        changed = {**fingerprint, key: "different"}
        assert sync_skip_reason(stamp, changed, venv, interpreter) == (False, reason)

    (venv / "lib/python3.11/site-packages/extra-2.0.dist-info").mkdir()
    assert "distributions changed" in sync_skip_reason(stamp, fingerprint, venv, interpreter)[1]


def test_venv_problems(tmp_path: Path) -> None:
    venv = _venv(tmp_path)
    assert venv_problem(venv, base_interpreter()) == ""
    assert "not the base interpreter" in venv_problem(venv, Path("/bin/sh"))
    os.unlink(venv / "bin" / "python")
    assert "no bin/python" in venv_problem(venv, base_interpreter())
    (venv / "pyvenv.cfg").unlink()
    assert "pyvenv.cfg" in venv_problem(venv, base_interpreter())


def test_the_selection_is_the_uv_settings_that_change_what_is_installed() -> None:
    """A venv synced without the default groups (a demo's scripted brains) is not the one
    its stub brains need: UV_NO_DEFAULT_GROUPS is in the fingerprint, UV_CACHE_DIR not."""
    environ = {"UV_NO_DEFAULT_GROUPS": "true", "UV_CACHE_DIR": "/c", "HOME": "/h"}
    assert sync_selection(environ) == {"UV_NO_DEFAULT_GROUPS": "true"}
    assert sync_selection({}) == {}
