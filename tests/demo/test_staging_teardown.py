"""Staged workspaces (a recorded copy; the tracked tree untouched) and the teardown
(reverse order, failures kept with a remedy, idempotent `demo.down`, nothing left)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from bandkit.demo import DemoError, teardown
from bandkit.demo.layout import DemoLayout, RunInfo, box_root_for
from bandkit.demo.staging import AGENTS_DIR, BRAIN_SOURCE, MAIN_SOURCE, stage
from bandkit.demo.target import EMULATOR_SERVICE
from bandkit.manifest import Kind, Manifest, Resource, TeardownReport
from examples.docker_demo.cast import CAST, Role
from examples.docker_demo.scenario import load

REST, WS = "http://127.0.0.1:9", "ws://127.0.0.1:9/api/v1/socket/websocket"


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return digest.hexdigest()


def test_stage_makes_a_recorded_copy_and_leaves_the_tracked_tree(tmp_path: Path) -> None:
    before = tree_digest(AGENTS_DIR)
    with Manifest.open(tmp_path / "manifest.json") as manifest:
        target = stage(
            manifest,
            tmp_path / "ws" / "pm",
            Role.PM,
            load("happy"),
            topic="T",
            rest_url=REST,
            ws_url=WS,
        )
        assert [r.ref for r in manifest.resources] == [f"workspace:{target}"]
    assert tree_digest(AGENTS_DIR) == before
    script = json.loads((target / "script.json").read_text())
    assert (script["role"], script["name"]) == ("pm", CAST[Role.PM].name)
    band = (target / "band.yaml").read_text()
    assert f"restUrl: {REST}" in band
    assert f"wsUrl: {WS}" in band
    assert "# band.yaml of the demo's Maya (PM) agent" in band  # comments kept
    assert (target / "brain.py").read_bytes() == BRAIN_SOURCE.read_bytes()
    assert (target / "main.py").read_bytes() == MAIN_SOURCE.read_bytes()
    assert oct(target.stat().st_mode & 0o777) == "0o755"
    assert oct((target / "main.py").stat().st_mode & 0o777) == "0o644"


def test_stage_refuses_a_leftover_copy_without_recording_it(tmp_path: Path) -> None:
    (tmp_path / "pm").mkdir()
    with Manifest.open(tmp_path / "manifest.json") as manifest:
        with pytest.raises(DemoError, match="already exists"):
            stage(
                manifest,
                tmp_path / "pm",
                Role.PM,
                load("happy"),
                topic="T",
                rest_url=REST,
                ws_url=WS,
            )
        assert manifest.resources == ()


def test_the_box_root_is_ours_and_traversable(tmp_path: Path) -> None:
    root = box_root_for(tmp_path)
    if os.geteuid() != 0:
        assert root == tmp_path / "demo-boxes"
    else:
        assert root.parent == Path("/tmp")
        assert root.name.startswith("band-demo-0-")
        assert box_root_for(tmp_path) == root  # the same run dir, the same box root


def test_teardown_removes_in_reverse_and_keeps_failures_with_a_remedy(tmp_path: Path) -> None:
    # The room's platform does not answer (nothing listens on port 9) and the record
    # names no local platform: it may come back, so its entry is kept, and the line says
    # exactly that and the way out for a platform that is gone for good.
    layout = DemoLayout(tmp_path, tmp_path / "boxes")
    layout.make_home()
    made = [tmp_path / "boxes" / "workspaces" / role.value for role in Role]
    lines: list[str] = []
    with Manifest.open(layout.manifest) as manifest:
        for path in made:
            manifest.record(Kind.WORKSPACE, str(path))
            path.mkdir(parents=True)
        manifest.record(Kind.ROOM, "http://127.0.0.1:9#room", url="http://127.0.0.1:9", title="t")
        key = "user-key-b5f0"
        report = teardown.tear_down(manifest, layout, user_key=key, log=lines.append, runtimes=[])
        assert [r.kind for r in report.removed] == [Kind.WORKSPACE] * 3
        assert [r.ref for r, _ in report.failed] == ["room:http://127.0.0.1:9#room"]
        assert [r.kind for r in manifest.resources] == [Kind.ROOM]
    assert not any(path.exists() for path in made)
    failed = [line for line in lines if "FAILED" in line]
    assert len(failed) == 1
    assert "the platform at http://127.0.0.1:9 does not answer" in failed[0]
    assert "re-run `uv run invoke demo.down` once it answers" in failed[0]
    assert "--forget-unreachable drops this record" in failed[0]
    assert [line.split()[-1] for line in lines if "removed" in line] == [
        f"workspace:{path}" for path in reversed(made)
    ]


def test_a_recorded_emulator_is_stopped_by_its_own_remover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stopped: list[Resource] = []
    monkeypatch.setattr(teardown, "stop_emulator", stopped.append)
    with Manifest.open(tmp_path / "manifest.json") as manifest:
        manifest.record(Kind.PROCESS, "emulator:x", service=EMULATOR_SERVICE, run_dir=str(tmp_path))
        table = teardown.removers_for(manifest, [], user_key="k")
        table[Kind.PROCESS](manifest.resources[0])
    assert [r.key for r in stopped] == ["emulator:x"]


def test_down_is_idempotent_and_leaves_nothing(tmp_path: Path) -> None:
    layout = DemoLayout(tmp_path, tmp_path / "boxes")
    layout.make_home()
    layout.write_info(
        RunInfo(
            runtime="local",
            platform="local",
            rest_url=REST,
            ws_url=WS,
            box_root=str(layout.box_root),
            scenario="happy",
        )
    )
    workspace = layout.workspaces / "pm"
    with Manifest.open(layout.manifest) as manifest:
        manifest.record(Kind.WORKSPACE, str(workspace))
    workspace.mkdir(parents=True)
    lines: list[str] = []
    assert teardown.down(tmp_path, env={}, log=lines.append)
    assert lines == [f"teardown: removed workspace:{workspace}"]
    assert not layout.manifest.exists()
    assert not Path(str(layout.manifest) + ".lock").exists()
    assert not layout.run_file.exists()
    again: list[str] = []
    assert teardown.down(tmp_path, env={}, log=again.append)
    assert "nothing to remove" in again[0]


def test_finish_keeps_the_record_of_an_unclean_teardown(tmp_path: Path) -> None:
    layout = DemoLayout(tmp_path, tmp_path / "boxes")
    layout.make_home()
    layout.run_file.write_text("{}")
    unclean = TeardownReport(failed=[(Resource(kind=Kind.ROOM, key="r"), "no")])
    teardown.finish(layout, unclean)
    assert layout.run_file.exists()


def test_a_real_platform_comes_from_the_environment_only(tmp_path: Path) -> None:
    from bandkit.demo.target import PlatformKind, resolve

    env = {
        "BAND_REST_URL": "https://band.example",
        "BAND_WS_URL": "wss://band.example/api/v1/socket/websocket",
        "BAND_API_KEY_USER": "k-1",
    }
    with Manifest.open(tmp_path / "manifest.json") as manifest:
        target = resolve(PlatformKind.REAL, run_dir=tmp_path, manifest=manifest, env=env)
        assert manifest.resources == ()  # nothing to start, nothing recorded
    assert (target.rest_url, target.ws_url, target.user_key) == (
        env["BAND_REST_URL"],
        env["BAND_WS_URL"],
        "k-1",
    )
    assert target.ui_template == "{rest_url}/chat/{chat_id}"
    assert "k-1" not in repr(target)
    with Manifest.open(tmp_path / "manifest.json") as manifest:
        custom = {**env, "DEMO_UI_URL_TEMPLATE": "https://ui.example/r/{chat_id}"}
        target = resolve(PlatformKind.REAL, run_dir=tmp_path, manifest=manifest, env=custom)
    assert target.ui_template == "https://ui.example/r/{chat_id}"
