"""The converge loop's pure parts and its records: the plan, the source digest, the fresh
copy (a planted link in the old copy is never followed), the refusals made before anything
is touched, and a rollout's batches and rollback (the apply step faked)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bandkit.fleet import FleetError, converge, load
from bandkit.fleet.converge import Action, Applied, Have, Target, Wanted, plan
from bandkit.image.agent import source_digest
from bandkit.image.facts import STARTER_DIR
from bandkit.kit.band_yaml import read_agent_id
from bandkit.manifest import Kind, Manifest, Resource
from bandkit.runtimes.base import Limits, SandboxStatus
from launcher.constants import PLACEHOLDER_AGENT_ID

RUNNING, STOPPED = SandboxStatus.RUNNING, SandboxStatus.STOPPED


def _want(name: str, **changes: object) -> Wanted:
    base: dict[str, object] = {
        "name": name,
        "description": "an agent of the test fleet",
        "runtime": "docker",
        "image": "band-python-kit:local",
        "workspace": Path("/src") / name,
        "limits": Limits(cpus="0.25", memory_bytes=2**28),
        "source": "abc",
    }
    return Wanted(**{**base, **changes})  # type: ignore[arg-type]


def _have(want: Wanted, status: SandboxStatus = RUNNING, **details: str) -> Have:
    return Have({**want.details(Path("/f.yaml")), "done": "yes", **details}, status)


def _actions(steps: list[converge.Step]) -> list[tuple[str, Action, str]]:
    return [(s.name, s.action, s.why) for s in steps]


def test_the_plan_names_each_difference_and_keeps_what_the_file_dropped() -> None:
    same, new, stopped = _want("same"), _want("new"), _want("stopped")
    image, source = _want("image"), _want("source")
    limits, moved, unfinished = _want("limits"), _want("moved"), _want("unfinished")
    have = {
        "same": _have(same),
        "stopped": _have(stopped, STOPPED),
        "image": _have(image, image="band-python-kit:old"),
        "source": _have(source, source="old"),
        "limits": _have(limits, limits=converge.limits_text(Limits(cpus="1"))),
        "moved": _have(moved, runtime="local"),
        "unfinished": _have(unfinished, done=""),
        "dropped": _have(_want("dropped")),
    }
    wanted = [same, new, stopped, image, source, limits, moved, unfinished]
    assert _actions(plan(wanted, have, prune=False)) == [
        ("same", Action.UNCHANGED, ""),
        ("new", Action.CREATE, "new"),
        ("stopped", Action.RESTART, "its sandbox is stopped"),
        ("image", Action.UPDATE, "image changed"),
        ("source", Action.UPDATE, "source changed"),
        ("limits", Action.UPDATE, "limits changed"),
        ("moved", Action.REPLACE, "runtime local -> docker: a new agent"),
        ("unfinished", Action.CREATE, "an earlier run stopped before it ended"),
        ("dropped", Action.KEPT, "not in the file; --prune removes it"),
    ]
    pruned = plan(wanted, have, prune=True)
    assert pruned[-1].action is Action.REMOVE
    assert [s.line() for s in pruned[:2]] == ["  = same: unchanged", "  + new: create (new)"]


def test_nothing_changed_is_a_plan_with_nothing_to_do() -> None:
    wanted = [_want("a"), _want("b")]
    steps = plan(wanted, {w.name: _have(w) for w in wanted}, prune=True)
    assert [s.action for s in steps] == [Action.UNCHANGED, Action.UNCHANGED]
    assert not [s for s in steps if s.action in converge.ACTING]


def test_the_source_digest_follows_files_modes_and_links_but_not_caches(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "main.py").write_text("print('hi')\n")
    first = source_digest(ws)
    for cache in (".venv", "__pycache__", ".git"):
        (ws / cache).mkdir()
        (ws / cache / "x").write_text("noise")
    assert source_digest(ws) == first
    (ws / "main.py").chmod(0o755)
    executable = source_digest(ws)
    assert executable != first
    (ws / "pkg" / "link").symlink_to("../main.py")
    linked = source_digest(ws)
    assert linked != executable
    (ws / "pkg" / "link").unlink()
    (ws / "pkg" / "link").symlink_to("elsewhere")
    assert source_digest(ws) != linked


def test_a_fresh_copy_never_follows_a_link_the_sandbox_planted(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep me")
    copy = tmp_path / "run" / "fleet" / "workspaces" / "one"
    converge.fresh_copy(STARTER_DIR, copy, "")
    assert read_agent_id(copy) == PLACEHOLDER_AGENT_ID
    (copy / "planted").symlink_to(outside)
    (copy / "band.yaml").unlink()
    (copy / "band.yaml").symlink_to(outside / "precious")
    converge.fresh_copy(STARTER_DIR, copy, "11111111-2222-3333-4444-555555555555")
    assert (outside / "precious").read_text() == "keep me"
    assert sorted(os.listdir(outside)) == ["precious"]
    assert not (copy / "planted").exists()
    assert not (copy / "band.yaml").is_symlink()
    assert read_agent_id(copy) == "11111111-2222-3333-4444-555555555555"
    assert not (copy / ".venv").exists()


def _target(run_dir: Path) -> Target:
    return Target("http://127.0.0.1:9", "ws://127.0.0.1:9/ws", "user-key", {}, run_dir)


def _fleet_file(tmp_path: Path, name: str = "fleet.yaml") -> Path:
    path = tmp_path / name
    path.write_text(
        "version: 1\nagents:\n"
        "  - name: one\n    description: an agent of the test fleet\n"
        f"    workspace: {STARTER_DIR}\n"
    )
    return path


def test_another_fleet_file_in_the_same_run_directory_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with Manifest.open(converge.state_path(run_dir)) as state:
        state.record(Kind.MEMBER, "one", file=str(tmp_path / "other.yaml"), done="yes")
    fleet = load(_fleet_file(tmp_path))
    with pytest.raises(FleetError, match=r"holds the fleet of .*other.yaml; run `uv run invoke"):
        converge.up(fleet, _target(run_dir), runtime="local", out=lambda _l: None)


def test_a_name_provisioned_outside_the_fleet_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with Manifest.open(run_dir / "provision" / "one" / "manifest.json") as m:
        m.record(Kind.ROOM, "somewhere")
    fleet = load(_fleet_file(tmp_path))
    with pytest.raises(FleetError, match=r"one: provisioned in .* outside the fleet"):
        converge.up(fleet, _target(run_dir), runtime="local", out=lambda _l: None)


IMAGE_ID = "sha256:0123456789abcdef0123456789abcdef"
FAKE_DOCKER = """#!/bin/sh
[ -n "$FAKE_MISSING" ] && { echo "Error: No such image: $5" >&2; exit 1; }
case "$*" in
  *"{{.Id}}"*) echo @ID@ ;;
  *Config.Labels*) echo "{\\"bandkit.agent.workspace\\": \\"$FAKE_CARRY\\"}" ;;
  *) exit 2 ;;
esac
""".replace("@ID@", IMAGE_ID)


def _image_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, carry: str) -> Path:
    """A fleet file of one image-only agent, and a `docker` that knows its image."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER)
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CARRY", carry)
    path = tmp_path / "images.yaml"
    path.write_text(
        "version: 1\nagents:\n  - name: one\n    description: an agent of the test fleet\n"
        "    image: band-agent-one:1\n"
    )
    return path


def test_an_image_only_agent_runs_its_image_with_the_workspace_it_carries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = load(_fleet_file(tmp_path))
    assert {w.runtime for w in converge.wanted(fleet, "sbx", tmp_path)} == {"sbx"}
    path = _image_only(tmp_path, monkeypatch, "/workspace")
    (want,) = converge.wanted(load(path), "docker", tmp_path / "run")
    assert (want.image, want.carried, want.source) == ("band-agent-one:1", "/workspace", IMAGE_ID)
    assert want.workspace == tmp_path / "run" / "fleet" / "images" / "0123456789abcdef"
    member = Resource(kind=Kind.MEMBER, key="one", details=want.details(path))
    assert Wanted.of(member) == want  # what a rollout reads back


def test_an_image_only_agent_is_refused_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _image_only(tmp_path, monkeypatch, "/srv/agent")
    with pytest.raises(FleetError, match=r"the local runtime cannot run; give --runtime docker"):
        converge.wanted(load(path), "local", tmp_path)
    with pytest.raises(FleetError, match=r"holds its workspace at /srv/agent, not at "):
        converge.wanted(load(path), "docker", tmp_path)
    monkeypatch.setenv("FAKE_MISSING", "1")
    with pytest.raises(FleetError, match=r"not on this machine; build it: `uv run invoke kit"):
        converge.wanted(load(path), "swarm", tmp_path)


def _members(run_dir: Path, names: list[str]) -> None:
    with Manifest.open(converge.state_path(run_dir)) as state:
        for name in names:
            want = _want(name, workspace=STARTER_DIR, image="kit:1")
            state.record(Kind.MEMBER, name, **want.details(Path("/f.yaml")), done="yes", runs="a")


def _rows(run_dir: Path) -> dict[str, dict[str, str]]:
    return {r.key: dict(r.details) for r in Manifest.read(converge.state_path(run_dir))}


def test_a_rollout_goes_batch_by_batch_and_puts_a_failed_batch_back(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _members(run_dir, ["a", "b", "c", "d", "e"])
    calls: list[tuple[str, str]] = []

    def fake(want: Wanted, image: str, _log: converge.Log) -> Applied:
        calls.append((want.name, image))
        if (want.name, image) == ("d", "kit:2"):
            raise FleetError("d did not connect")
        return Applied("id-" + want.name, f"agent-{want.name}:{image}", "abc", 0.1)

    lines: list[str] = []
    with pytest.raises(FleetError, match=r"batch 2 failed, put back") as failed:
        converge.rollout(_target(run_dir), "kit:2", parallel=2, out=lines.append, apply_one=fake)
    assert "d: d did not connect" in str(failed.value)
    assert "the 2 agent(s) of the batches before it run kit:2" in str(failed.value)
    first, second = sorted(calls[:2]), sorted(calls[2:4])
    assert first == [("a", "kit:2"), ("b", "kit:2")]
    assert second == [("c", "kit:2"), ("d", "kit:2")]
    assert sorted(calls[4:]) == [("c", "kit:1"), ("d", "kit:1")]  # the batch, put back
    assert ("e", "kit:2") not in calls  # stopped at the failed batch
    rows = _rows(run_dir)
    assert [rows[n]["image"] for n in "abcde"] == ["kit:2", "kit:2", "kit:1", "kit:1", "kit:1"]
    assert rows["a"]["runs"] == "agent-a:kit:2"
    assert rows["c"]["runs"] == "agent-c:kit:1"
    assert all(rows[n]["done"] == "yes" for n in "abcde")
    assert "fleet.rollout: batch 1/3 connected again" in lines[1]


def test_a_member_that_cannot_be_put_back_is_left_for_fleet_up(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _members(run_dir, ["a"])

    def fake(want: Wanted, image: str, _log: converge.Log) -> Applied:
        raise FleetError(f"no luck on {image}")

    with pytest.raises(FleetError, match="batch 1 failed"):
        converge.rollout(_target(run_dir), "kit:2", out=lambda _l: None, apply_one=fake)
    assert _rows(run_dir)["a"]["done"] == ""  # the plan makes it again


def test_a_rollout_of_a_local_fleet_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with Manifest.open(converge.state_path(run_dir)) as state:
        want = _want("a", runtime="local")
        state.record(Kind.MEMBER, "a", **want.details(Path("/f.yaml")), done="yes")
    with pytest.raises(FleetError, match="local runtime, which runs no image"):
        converge.rollout(_target(run_dir), "kit:2", out=lambda _l: None)


def test_limits_round_trip_through_the_record() -> None:
    limits = Limits(cpus="0.5", memory_bytes=2**29, constraints=("node.role==worker",))
    assert converge.limits_of(converge.limits_text(limits)) == limits
    assert json.loads(converge.limits_text(Limits()))["cpus"] == ""
