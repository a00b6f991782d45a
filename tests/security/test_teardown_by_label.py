"""Teardown removes only what this run made, and names never become paths or options.

- docker: a same-named container (or network) without our owner label is reported and
  kept; ours is removed (a recording stand-in for the CLI, then a real container with
  `-m docker`);
- sbx: a same-named sandbox whose id is not the one recorded at create is kept;
- `--name ../..` (and other bad names) fail with a clear error before any path is
  joined or any command runs, in every runtime and in the kit.allow / kit.policy-log
  tasks.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.errors import BandkitError
from bandkit.kit import policy
from bandkit.manifest import Kind, Manifest, teardown
from bandkit.runtimes.base import SandboxError, SandboxSpec, validate_name
from bandkit.runtimes.docker import LABEL, OWNER_LABEL, DockerRuntime
from bandkit.runtimes.local import LocalRuntime
from bandkit.runtimes.sbx import SbxRuntime
from bandkit.runtimes.select import removers
from tests.fakes.simharness import Sim, simulator
from tests.security.support import fake_docker

BAD_NAMES = ["../..", "..", "a/b", "-rf", "--all", "Upper", "a" * 64, "", "box\n1", "x y"]


def record_docker_sandbox(manifest: Manifest, name: str, owner: str) -> None:
    """The entries a docker create records before it makes anything."""
    manifest.record(
        Kind.SANDBOX,
        f"docker/{name}/network",
        runtime="docker",
        name=name,
        part="network",
        network=f"bandkit-{name}-{owner[:12]}",
        owner=owner,
    )
    manifest.record(Kind.SANDBOX, f"docker/{name}", runtime="docker", name=name, owner=owner)


# -- docker, with the recording stand-in
def test_a_same_named_container_without_our_label_is_kept_and_reported(tmp_path: Path) -> None:
    fake = fake_docker(tmp_path / "bin")
    fake.add_container("box-1", {LABEL: "box-1"})  # someone else's, looks like ours by name
    rt = DockerRuntime(tmp_path / "run", binary=str(fake.binary))
    with Manifest.open(tmp_path / "m.json") as manifest:
        record_docker_sandbox(manifest, "box-1", rt.run_id)
        report = teardown(manifest, removers([rt]))
    assert not report.clean
    [(resource, message)] = report.failed
    assert resource.key == "docker/box-1"
    assert "was not created by this run" in message
    assert "kept it" in message
    assert "box-1" in fake.data()["containers"]
    assert not [c for c in fake.data()["calls"] if c[:2] == ["rm", "--force"]]
    assert (tmp_path / "m.json").exists()  # still listed: re-run once it is dealt with


def test_a_container_with_another_runs_label_is_kept(tmp_path: Path) -> None:
    fake = fake_docker(tmp_path / "bin")
    fake.add_container("box-1", {LABEL: "box-1", OWNER_LABEL: "another-run"})
    rt = DockerRuntime(tmp_path / "run", binary=str(fake.binary))
    with pytest.raises(SandboxError, match="not created by this run"):
        rt.remove("box-1")  # and no owner record at all: nothing proves it ours
    assert "box-1" in fake.data()["containers"]


def test_our_labelled_container_and_network_are_removed(tmp_path: Path) -> None:
    fake = fake_docker(tmp_path / "bin")
    rt = DockerRuntime(tmp_path / "run", binary=str(fake.binary))
    fake.add_container("box-1", {LABEL: "box-1", OWNER_LABEL: rt.run_id})
    data = fake.data()
    data["networks"][f"bandkit-box-1-{rt.run_id[:12]}"] = {OWNER_LABEL: rt.run_id}
    fake.state.write_text(json.dumps(data))
    with Manifest.open(tmp_path / "m.json") as manifest:
        record_docker_sandbox(manifest, "box-1", rt.run_id)
        report = teardown(manifest, removers([rt]))
    assert report.clean, report.lines()
    assert fake.data()["containers"] == {}
    assert fake.data()["networks"] == {}


def test_a_foreign_network_of_the_same_name_is_kept(tmp_path: Path) -> None:
    fake = fake_docker(tmp_path / "bin")
    rt = DockerRuntime(tmp_path / "run", binary=str(fake.binary))
    network = f"bandkit-box-1-{rt.run_id[:12]}"
    data = fake.data()
    data["networks"][network] = {}
    fake.state.write_text(json.dumps(data))
    with Manifest.open(tmp_path / "m.json") as manifest:
        record_docker_sandbox(manifest, "box-1", rt.run_id)
        report = teardown(manifest, removers([rt]))
    assert [r.key for r, _ in report.failed] == ["docker/box-1/network"]
    assert network in fake.data()["networks"]


# -- names
def test_the_name_rule() -> None:
    for good in ("a", "my-agent", "rt-0f3a9c", "9lives", "a" * 63):
        assert validate_name(good) == good
    for bad in BAD_NAMES:
        with pytest.raises(SandboxError, match="invalid sandbox name"):
            validate_name(bad)


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """A directory a `../..` name would reach from the run dir (it must survive)."""
    sentinel = tmp_path / "keep-me.txt"
    sentinel.write_text("still here\n")
    yield sentinel
    assert sentinel.read_text() == "still here\n"


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_docker_refuses_a_bad_name_before_any_path_or_command(
    bad: str, tmp_path: Path, outside: Path
) -> None:
    fake = fake_docker(tmp_path / "bin")
    run = tmp_path / "a" / "run"
    rt = DockerRuntime(run, binary=str(fake.binary))
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    calls = [
        lambda: rt.create(SandboxSpec(name=bad, workspaces=(ws,))),
        lambda: rt.start(bad),
        lambda: rt.stop(bad),
        lambda: rt.exec(bad, ["true"]),
        lambda: rt.status(bad),
        lambda: rt.logs(bad),
        lambda: rt.remove(bad),
        lambda: rt.allow(bad, "pypi.org"),
        lambda: rt.policy_log(bad),
        lambda: rt.has_secret(bad, "h"),
    ]
    for call in calls:
        with pytest.raises(SandboxError, match="invalid sandbox name"):
            call()
    with pytest.raises(SandboxError, match="invalid sandbox name"):
        DockerRuntime(run, key_in_container=[bad])
    assert fake.data()["calls"] == []
    assert not run.exists()


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_local_refuses_a_bad_name_before_any_path(bad: str, tmp_path: Path, outside: Path) -> None:
    run = tmp_path / "a" / "run"
    rt = LocalRuntime(run)
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    for call in (
        lambda: rt.create(SandboxSpec(name=bad, workspaces=(ws,))),
        lambda: rt.start(bad),
        lambda: rt.stop(bad),
        lambda: rt.exec(bad, ["true"]),
        lambda: rt.status(bad),
        lambda: rt.logs(bad),
        lambda: rt.remove(bad),
        lambda: rt.has_secret(bad, "h"),
    ):
        with pytest.raises(SandboxError, match="invalid sandbox name"):
            call()
    assert not run.exists()


def test_sbx_refuses_a_bad_name_before_any_command(tmp_path: Path) -> None:
    never = tmp_path / "sbx-never-run"  # running it would fail differently
    rt = SbxRuntime(binary=str(never))
    rt.cli._version = (0, 47, 0)
    ws = tmp_path / "ws"
    for bad in BAD_NAMES:
        for call in (
            lambda: rt.create(SandboxSpec(name=bad, workspaces=(ws,))),  # noqa: B023
            lambda: rt.start(bad),  # noqa: B023
            lambda: rt.stop(bad),  # noqa: B023
            lambda: rt.exec(bad, ["true"]),  # noqa: B023
            lambda: rt.status(bad),  # noqa: B023
            lambda: rt.remove(bad),  # noqa: B023
            lambda: rt.has_secret(bad, "h"),  # noqa: B023
            lambda: rt.remove_secret(bad, "h", "p"),  # noqa: B023
        ):
            with pytest.raises(SandboxError, match="invalid sandbox name"):
                call()


@pytest.mark.parametrize("task", ["kit.allow", "kit.policy-log"])
def test_the_policy_tasks_refuse_a_bad_name_before_any_path(task: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    argv = ["invoke", task, "--name", "../..", "--run-dir", str(run)]
    argv += ["--host", "pypi.org"] if task == "kit.allow" else []
    result = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 1
    assert f"{task}: invalid sandbox name '../..'" in result.stderr
    assert not run.exists()
    with pytest.raises(BandkitError, match="invalid sandbox name"):
        policy.allow(name="../..", host="pypi.org", run_dir=run)


def test_kit_allow_needs_a_provisioned_docker_sandbox(tmp_path: Path) -> None:
    with pytest.raises(BandkitError, match="no sandbox 'ghost' was provisioned"):
        policy.allow(name="ghost", host="pypi.org", run_dir=tmp_path)
    assert not (tmp_path / "provision" / "ghost").exists()


# -- sbx: the id recorded at create is the proof
@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sim]:
    with simulator("0.47.0") as s:
        s("policy", "init", "balanced", check=True)
        for key, value in s.env.items():
            monkeypatch.setenv(key, value)
        yield s


def test_sbx_keeps_a_same_named_sandbox_it_did_not_create(sim: Sim, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with Manifest.open(tmp_path / "m.json") as manifest:
        rt = SbxRuntime(manifest=manifest)
        rt.create(SandboxSpec(name="box-1", workspaces=(ws,)))
        entry = manifest.find(Kind.SANDBOX, "sbx/box-1")
        assert entry is not None
        assert entry.details["id"]
        # Ours goes away by hand; someone else makes one with the same name.
        sim("rm", "-f", "box-1", check=True)
        sim("create", "--name", "box-1", "shell", str(ws), check=True)
        report = teardown(manifest, rt.removers())
        assert [r.key for r, _ in report.failed] == ["sbx/box-1"]
        assert "not created by this run" in report.failed[0][1]
        assert "box-1" in SbxRuntime().list()
        sim("rm", "-f", "box-1", check=True)
        assert teardown(manifest, rt.removers()).clean
    assert not (tmp_path / "m.json").exists()


# -- docker, a real same-named container
@pytest.mark.docker
def test_a_real_foreign_container_survives_our_teardown(tmp_path: Path, kit_image: str) -> None:
    rt = DockerRuntime(tmp_path / "run")
    name = f"sec-foreign-{rt.run_id[:6]}"
    subprocess.run(
        ["docker", "create", "--name", name, "--label", f"{LABEL}={name}", kit_image, "true"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    try:
        with Manifest.open(tmp_path / "m.json") as manifest:
            record_docker_sandbox(manifest, name, rt.run_id)
            report = teardown(manifest, removers([rt]))
            assert [r.key for r, _ in report.failed] == [f"docker/{name}"]
            assert "kept it" in report.failed[0][1]
            assert rt.status(name).value == "stopped"  # still there
            subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=True)
            assert teardown(manifest, removers([rt])).clean
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
        shutil.rmtree(tmp_path / "run", ignore_errors=True)
