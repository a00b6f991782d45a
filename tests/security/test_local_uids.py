"""The local runtime, as root, gives every box its own identity: box B cannot read box A's
`/proc/<pid>/environ` (and with it A's proxy token), an agent that drops its environment
tag (`setsid env -i sleep 600`) is still ended by the teardown, box B cannot write into
the uv cache box A's `uv sync` reads, a box's cache is its own copy of the SDK home's
seed (it syncs the starter offline, and what it writes there never reaches the seed), and
a workspace under a directory the box uid cannot traverse (a 0700 parent: `/root`, any
`mktemp -d`) still connects.

Each test drives the real runtime (`LocalRuntime`, the real launcher, real processes);
the agents are an idle program (no dependencies: `uv sync` has nothing to fetch) whose
box still gets a credential proxy, so its environment holds a real proxy token.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from bandkit import processes
from bandkit.manifest import Manifest, teardown
from bandkit.runtimes import boxnet, hostbox
from bandkit.runtimes.base import SandboxSpec, SandboxStatus, Secret
from bandkit.runtimes.local import LocalRuntime
from bandkit.runtimes.sdk_home import recorded_seed
from tests.runtimes.helpers import Platform, echo_workspace, emulator
from tests.support.wait import wait_for

pytestmark = [
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("setpriv") is None,
        reason="a uid per box needs root and setpriv (as another user every box runs as you)",
    ),
    pytest.mark.usefixtures("agent_sdk"),
]

CANARY = "canary-local-uids-7e1d3c9a5b"  # the agent key the boxes' proxies hold
PLATFORM = {"BAND_REST_URL": "http://127.0.0.1:9", "BAND_WS_URL": "ws://127.0.0.1:9/ws"}
ENDPOINTS = {"rest_url": PLATFORM["BAND_REST_URL"], "ws_url": PLATFORM["BAND_WS_URL"]}
IDLE_MAIN = """\
import os, subprocess, sys, time
if os.environ.get("ESCAPE") == "1":
    # Leave the box's process group and drop the whole environment (the teardown tag).
    subprocess.Popen(["setsid", "env", "-i", "sleep", "600"], start_new_session=True)
print("idle agent up", flush=True)
time.sleep(600)
"""
PYPROJECT = """\
[project]
name = "idle-agent"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = []

[tool.uv]
package = false
"""
UV_LOCK = """\
version = 1
revision = 5
requires-python = ">=3.11"

[[package]]
name = "idle-agent"
version = "0.1.0"
source = { virtual = "." }
"""
TIMEOUT_S = 15.0


@pytest.fixture
def private_parent() -> Iterator[Path]:
    """A `mktemp -d` directory: mode 0700, so no other uid can traverse it."""
    path = Path(tempfile.mkdtemp(prefix="sec-uids-"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def idle_workspace(parent: Path, name: str) -> Path:
    """The echo starter's band.yaml with an idle program and an empty lock."""
    ws = echo_workspace(parent, agent_id=f"agent-{name}", **ENDPOINTS, name=f"ws-{name}")
    (ws / "main.py").write_text(IDLE_MAIN)
    (ws / "pyproject.toml").write_text(PYPROJECT)
    (ws / "uv.lock").write_text(UV_LOCK)
    for path in (ws, *ws.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return ws


def spec(name: str, ws: Path, **env: str) -> SandboxSpec:
    return SandboxSpec(
        name=name,
        workspaces=(ws,),
        env={"BAND_KIT_ALLOW_INSECURE_ENDPOINTS": "1", **PLATFORM, **env},
        secrets=(
            Secret(
                "BAND_API_KEY",
                ("127.0.0.1",),
                CANARY,
                scopes=boxnet.band_key_scopes(PLATFORM["BAND_REST_URL"], PLATFORM["BAND_WS_URL"]),
            ),
        ),
    )


def environ_of(pid: int) -> dict[str, str]:
    environ = processes.environ(pid)
    assert environ is not None, f"pid {pid}'s environment is gone or not ours to read"
    pairs = (entry.split(b"=", 1) for entry in environ if b"=" in entry)
    return {k.decode(): v.decode(errors="replace") for k, v in pairs}


def agent_pid(rt: LocalRuntime, name: str) -> int:
    """The box's agent (the launcher has exec'd main.py), once it runs."""

    def running() -> int:
        for pid in processes.tagged_pids(hostbox.box_tag(rt._box(name))):
            if any(arg.endswith(b"main.py") for arg in processes.cmdline(pid) or ()):
                return pid
        return 0

    return int(wait_for(running, TIMEOUT_S, f"box {name}'s agent", 0.05))


def proxy_token(pid: int) -> str:
    rest = environ_of(pid)["BAND_REST_URL"]
    token = urlsplit(rest).path.strip("/").split("/")[0]
    assert len(token) > 20, rest
    return token


def uid_of(pid: int) -> int:
    uid = processes.owner(pid)
    assert uid is not None, f"pid {pid} is gone"
    return uid


def tree_digest(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def test_box_b_cannot_read_box_a_environment(private_parent: Path) -> None:
    parent = private_parent
    parent.chmod(0o755)  # this test is about /proc, not about reaching the workspace
    rt = LocalRuntime(parent / "run")
    try:
        rt.create(spec("box-a", idle_workspace(parent, "a")))
        rt.create(spec("box-b", idle_workspace(parent, "b")))
        a, b = agent_pid(rt, "box-a"), agent_pid(rt, "box-b")
        token = proxy_token(a)
        assert token != proxy_token(b)

        got = rt.exec("box-b", ["cat", f"/proc/{a}/environ"])

        assert token not in got.stdout + got.stderr
        assert "BAND_REST_URL" not in got.stdout
        assert got.returncode != 0
        assert uid_of(a) != uid_of(b)
    finally:
        rt.remove("box-a")
        rt.remove("box-b")


def test_an_agent_that_drops_its_tag_is_ended_by_the_teardown(private_parent: Path) -> None:
    parent = private_parent
    parent.chmod(0o755)
    run = parent / "run"
    with Manifest.open(run / "manifest.json") as manifest:
        rt = LocalRuntime(run, manifest=manifest)
        rt.create(spec("escapee", idle_workspace(parent, "e"), ESCAPE="1"))
        uid = uid_of(agent_pid(rt, "escapee"))

        def escaped() -> int:
            def sleeping(p: processes.Proc) -> bool:
                return p.cmdline == b"sleep\x00600\x00" and uid_of(p.pid) == uid

            found = processes.scan(sleeping)
            return found[0] if found else 0

        pid = int(wait_for(escaped, TIMEOUT_S, "the escaped sleep", 0.05))
        assert not any(e.startswith(b"BANDKIT_TAG=") for e in processes.environ(pid) or ())

        report = teardown(manifest, rt.removers())

    assert report.clean, report.lines()
    assert not processes.alive(pid), "the escapee outlived the teardown"
    left = processes.scan(lambda p: _uid_or_none(p.pid) == uid)
    assert left == [], f"processes of the box uid {uid} left: {left}"


def _uid_or_none(pid: int) -> int | None:
    try:
        return uid_of(pid)
    except OSError:
        return None


def test_box_b_cannot_write_into_the_cache_box_a_syncs_from(private_parent: Path) -> None:
    parent = private_parent
    parent.chmod(0o755)
    rt = LocalRuntime(parent / "run")
    try:
        rt.create(spec("cache-a", idle_workspace(parent, "a")))
        rt.create(spec("cache-b", idle_workspace(parent, "b")))
        agent_pid(rt, "cache-a")  # its uv sync has run
        agent_pid(rt, "cache-b")
        config = yaml.safe_load((rt._box("cache-a") / "band.yaml").read_text())
        cache = Path(config["runtime"]["cachePath"])
        venv = Path(config["runtime"]["environmentPath"])
        assert cache.is_dir()
        assert any(cache.iterdir()), "box A's uv sync left no cache"
        before = tree_digest(cache), tree_digest(venv)
        planted = cache / "planted-by-b"
        poison = (
            f"echo poison > {planted}; "
            f"find {cache} {venv} -type f -exec sh -c 'echo poison >> \"$1\"' _ {{}} \\; ; "
            f"mkdir -p {cache}/wheels-v5/pypi/planted"
        )

        rt.exec("cache-b", ["sh", "-c", poison])

        assert not planted.exists()
        assert not (cache / "wheels-v5" / "pypi" / "planted").exists()
        after = tree_digest(cache), tree_digest(venv)
        changed = {k for i in (0, 1) for k in before[i].keys() ^ after[i].keys()}
        changed |= {k for i in (0, 1) for k in before[i] if before[i][k] != after[i].get(k)}
        assert not changed
    finally:
        rt.remove("cache-a")
        rt.remove("cache-b")


def test_a_new_box_syncs_from_its_copy_of_the_seed_and_cannot_change_the_seed(
    private_parent: Path,
) -> None:
    """The starter's lock syncs with uv offline (so only from the seed), band-sdk imports
    from the files compiled into the seed (none is compiled again), and what the box
    writes into its cache stays in its own copy."""
    parent = private_parent
    parent.chmod(0o755)
    seed = recorded_seed(Path(os.environ[hostbox.SDK_ENV]))
    assert seed is not None, "the SDK home recorded no seed"
    seeded = tree_digest(seed)
    ws = echo_workspace(parent, agent_id="agent-seeded", **ENDPOINTS, name="ws-seeded")
    (ws / "main.py").write_text(IDLE_MAIN)  # the starter's lock, a program that stops at once
    rt = LocalRuntime(parent / "run")
    try:
        rt.create(spec("seeded", ws, UV_OFFLINE="1"))
        uid = uid_of(agent_pid(rt, "seeded"))  # its sync, offline, has run
        config = yaml.safe_load((rt._box("seeded") / "band.yaml").read_text())
        cache = Path(config["runtime"]["cachePath"])
        venv = Path(config["runtime"]["environmentPath"])
        python = venv / "bin" / "python"
        assert rt.exec("seeded", [str(python), "-c", "import band"]).returncode == 0
        compiled = list(venv.glob("lib/python3*/site-packages/band/**/*.pyc"))
        assert compiled, "band-sdk was installed with no compiled files"
        assert all(p.stat().st_nlink > 1 for p in compiled), "compiled again in the box"
        assert {p.lstat().st_uid for p in (cache, *cache.rglob("*"))} == {uid}

        each = 'for f; do echo poison >> "$f"; done'
        poison = f"find {cache} -type f -name '*.py' -exec sh -c '{each}' _ {{}} +"
        rt.exec("seeded", ["sh", "-c", poison])

        assert tree_digest(cache) != seeded  # the box did write into its own copy
        assert tree_digest(seed) == seeded
    finally:
        rt.remove("seeded")


def test_the_first_box_of_a_fresh_run_dir_is_seeded_too(
    private_parent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No shared SDK home: the box's own (`boxes/.sdk`) is made before its cache, so even
    the first box syncs the starter offline."""
    monkeypatch.delenv(hostbox.SDK_ENV, raising=False)
    parent = private_parent
    parent.chmod(0o755)
    ws = echo_workspace(parent, agent_id="agent-first", **ENDPOINTS, name="ws-first")
    (ws / "main.py").write_text(IDLE_MAIN)
    rt = LocalRuntime(parent / "run")
    try:
        rt.create(spec("first", ws, UV_OFFLINE="1"))
        agent_pid(rt, "first")  # its sync, offline, has run
    finally:
        rt.remove("first")


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    with emulator(Path(tmp_path_factory.mktemp("emulator"))) as p:
        yield p


def test_a_workspace_under_a_private_parent_connects(
    private_parent: Path, platform: Platform
) -> None:
    """`git clone` under /root, or a `mktemp -d` workspace: the box uid cannot traverse
    the parent, and the agent still connects (and answers)."""
    name = "private-parent"
    agent_id, key = platform.register(name)
    ws = echo_workspace(
        private_parent, agent_id=agent_id, rest_url=platform.rest_url, ws_url=platform.ws_url
    )
    host = urlsplit(platform.rest_url).hostname or ""
    rt = LocalRuntime(private_parent / "run")
    try:
        rt.create(
            SandboxSpec(
                name=name,
                workspaces=(ws,),
                env={
                    "BAND_KIT_ALLOW_INSECURE_ENDPOINTS": "1",
                    "BAND_REST_URL": platform.rest_url,
                    "BAND_WS_URL": platform.ws_url,
                },
                secrets=(
                    Secret(
                        "BAND_API_KEY",
                        (host,),
                        key,
                        scopes=boxnet.band_key_scopes(platform.rest_url, platform.ws_url),
                    ),
                ),
            )
        )
        room = platform.room_with(agent_id)
        assert platform.round_trip(room, agent_id, timeout=TIMEOUT_S).startswith("echo: ")
        assert stat.S_IMODE(private_parent.stat().st_mode) == 0o700  # no grant was made
    finally:
        rt.remove(name)
        platform.delete_agent(agent_id)


def test_a_removed_boxs_cache_is_parked_and_handed_to_the_next_box_of_its_name(
    private_parent: Path,
) -> None:
    parent = private_parent
    parent.chmod(0o755)
    rt = LocalRuntime(parent / "run")
    try:
        rt.create(spec("again", idle_workspace(parent, "a")))
        first = uid_of(agent_pid(rt, "again"))
        cache = rt._cache("again")
        assert (cache.stat().st_uid, stat.S_IMODE(cache.stat().st_mode)) == (first, 0o700)
        synced = tree_digest(cache)
        rt.remove("again")

        # Between two boxes of the name, no uid (the next holder of `first` included) owns it.
        assert all(p.lstat().st_uid == 0 for p in (cache, *cache.rglob("*")))
        assert stat.S_IMODE(cache.stat().st_mode) == 0o700

        rt.create(spec("again", idle_workspace(parent, "b")))
        second = uid_of(agent_pid(rt, "again"))
        assert second != first
        assert all(p.lstat().st_uid == second for p in (cache, *cache.rglob("*")))
        assert set(synced) <= set(tree_digest(cache))  # warm: what the first box synced
    finally:
        rt.remove("again")


@pytest.mark.parametrize("plant", ["hardlink", "foreign-owner"])
def test_a_cache_that_could_hand_over_a_file_outside_it_is_deleted_not_reowned(
    plant: str, private_parent: Path
) -> None:
    victim = private_parent / "victim"
    victim.write_text("root's own\n")
    victim.chmod(0o600)
    cache = private_parent / "cache"
    (cache / "archive-v0").mkdir(parents=True)
    (cache / "archive-v0" / "ok.py").write_text("x = 1\n")
    if plant == "hardlink":
        os.link(victim, cache / "archive-v0" / "planted")  # as a box could (no protection)
    else:
        for path in (cache, *cache.rglob("*")):
            os.lchown(path, 1_900_065_000, 1_900_065_000)  # another box's, never parked
    new_uid = 1_900_065_001

    hostbox.hand_over(cache, new_uid)

    assert (victim.stat().st_uid, victim.read_text()) == (0, "root's own\n")
    assert list(cache.iterdir()) == []  # started afresh
    assert cache.stat().st_uid == new_uid


def test_a_tag_forged_by_another_box_does_not_pass_for_the_box_running(
    private_parent: Path,
) -> None:
    """Box B puts box A's tag on a process of its own: A still reads as stopped, and
    starting A really starts A's agent."""
    parent = private_parent
    parent.chmod(0o755)
    rt = LocalRuntime(parent / "run")
    try:
        rt.create(spec("forged-a", idle_workspace(parent, "a")))
        rt.create(spec("forged-b", idle_workspace(parent, "b")))
        agent_pid(rt, "forged-a")
        rt.stop("forged-a")
        assert rt.status("forged-a") is SandboxStatus.STOPPED
        tag = hostbox.box_tag(rt._box("forged-a"))
        rt.exec("forged-b", ["env", f"BANDKIT_TAG={tag}", "sleep", "60"], detach=True)
        wait_for(lambda: processes.tagged_pids(tag), TIMEOUT_S, "box B's forged process")

        assert rt.status("forged-a") is SandboxStatus.STOPPED

        rt.start("forged-a")
        assert uid_of(agent_pid(rt, "forged-a")) != uid_of(agent_pid(rt, "forged-b"))
    finally:
        rt.remove("forged-a")
        rt.remove("forged-b")
