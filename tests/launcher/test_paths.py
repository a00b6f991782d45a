from __future__ import annotations

from pathlib import Path

import pytest

from launcher.config import build_spec
from launcher.errors import LauncherError, Phase
from launcher.paths import resolve_inside, resolve_paths, runtime_path_problem
from tests.launcher.fakes import Box

SDK = Path("/opt/band")


def test_resolve_inside_follows_links_and_fences(box: Box) -> None:
    assert resolve_inside(box.ws, "main.py", name="x", phase=Phase.PATHS) == box.ws / "main.py"
    with pytest.raises(LauncherError, match=r"^\[paths\] x must stay inside"):
        resolve_inside(box.ws, "../home", name="x", phase=Phase.PATHS)
    with pytest.raises(LauncherError):
        resolve_inside(box.ws, str(box.home), name="x", phase=Phase.PATHS)
    (box.ws / "out").symlink_to(box.home)
    with pytest.raises(LauncherError):
        resolve_inside(box.ws, "out", name="x", phase=Phase.PATHS)


def test_runtime_path_rule(box: Box) -> None:
    assert runtime_path_problem(str(box.home / "v"), workspace=box.ws, sdk_home=SDK) == ""
    assert "absolute" in runtime_path_problem("v", workspace=box.ws, sdk_home=SDK)
    assert "absolute" in runtime_path_problem("", workspace=box.ws, sdk_home=SDK)
    assert "workspace" in runtime_path_problem(str(box.ws / "v"), workspace=box.ws, sdk_home=SDK)
    assert "SDK home" in runtime_path_problem("/opt/band/v", workspace=box.ws, sdk_home=SDK)
    (box.home / "link").symlink_to(box.ws)
    assert "workspace" in runtime_path_problem(
        str(box.home / "link" / "v"), workspace=box.ws, sdk_home=SDK
    )


def test_resolved_paths(box: Box) -> None:
    paths = resolve_paths(build_spec(box.config()), box.ws, SDK)
    assert paths.project == box.ws
    assert paths.entrypoint == box.ws / "main.py"
    assert paths.environment_path == box.home / "venv"
    assert paths.log_path == box.home / "logs"


def test_missing_project_pieces(box: Box) -> None:
    with pytest.raises(LauncherError, match="project path is not a directory"):
        resolve_paths(build_spec(box.config(project={"path": "nope"})), box.ws, SDK)
    with pytest.raises(LauncherError, match="entrypoint is not a file"):
        resolve_paths(build_spec(box.config(agent={"entrypoint": "x.py"})), box.ws, SDK)


def test_repo_mode_defers_existence_and_refuses_the_root(box: Box) -> None:
    repo = {"url": "https://github.com/o/r"}
    spec = build_spec(box.config(project={"path": "app"}, repo=repo))
    assert resolve_paths(spec, box.ws, SDK).project == box.ws / "app"
    with pytest.raises(LauncherError, match=r"^\[repo\] project.path must be a subdirectory"):
        resolve_paths(build_spec(box.config(repo=repo)), box.ws, SDK)
