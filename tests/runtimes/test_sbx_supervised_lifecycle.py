"""The lifecycle contract on simulated sbx 0.47, where a sandbox with no attached session
stops after the idle time and the kit's entrypoint (the agent) runs only while attached:
create -> the agent answers a mention -> an idle period longer than the auto-stop -> it
still answers -> its `sbx run` killed (the supervisor attaches again; the agent restarts)
-> answers -> teardown -> nothing left; and create -> answers -> the supervisor killed
(start() replaces it) -> answers -> stop -> start -> answers -> teardown -> nothing left.
Without the supervisor the agent never answers and the sandbox stops by itself."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bandkit import processes
from bandkit.manifest import Kind, Manifest, Resource, teardown
from bandkit.runtimes.base import SandboxSpec, SandboxStatus, Secret
from bandkit.runtimes.sbx import SbxRuntime, supervisor
from bandkit.runtimes.select import removers
from tests.fakes.simharness import Sim, simulator, watchers
from tests.runtimes.helpers import (
    INSECURE,
    Platform,
    echo_workspace,
    make_kit,
    scratch_dir,
)
from tests.support.wait import wait_for

# Restart drills on a real agent (sessions and supervisors killed, stop/start): e2e.
pytestmark = pytest.mark.e2e

IDLE_S = 3.0
REPLY_S = 90.0


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sim]:
    with simulator("0.47.0", idle_s=IDLE_S) as s:
        s("policy", "init", "balanced", check=True)
        for key, value in s.env.items():
            monkeypatch.setenv(key, value)
        yield s


def spec_for(platform: Platform, scratch: Path, name: str, agent_id: str, key: str) -> SandboxSpec:
    ws = echo_workspace(
        scratch, agent_id=agent_id, rest_url=platform.rest_url, ws_url=platform.ws_url
    )
    host = urlsplit(platform.rest_url).hostname or ""
    return SandboxSpec(
        name=name,
        workspaces=(ws,),
        kit=str(make_kit(scratch)),  # spec.yaml in the current shape, used as it is
        env={**INSECURE, "BAND_REST_URL": platform.rest_url, "BAND_WS_URL": platform.ws_url},
        secrets=(Secret("BAND_API_KEY", (host,), key),),
        egress=(f"{host}:{urlsplit(platform.rest_url).port}",),
    )


def answers(platform: Platform, rt: SbxRuntime, room: str, agent_id: str, name: str) -> None:
    try:
        reply = platform.round_trip(room, agent_id, timeout=REPLY_S)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- attach log\n{rt.logs(name).startup[-3000:]}") from None
    assert reply.startswith("echo: ")


def session_pids(sim: Sim, name: str) -> list[int]:
    marker = f"SBX_SIM_STATE={sim.state}".encode()

    def session(p: processes.Proc) -> bool:
        cmd = p.cmdline.rstrip(b"\0").split(b"\0")
        return cmd[-3:] == [b"run", b"--name", name.encode()] and marker in p.environ

    return processes.scan(session)


@dataclass
class Supervised:
    """A supervised sandbox whose agent has answered once, inside an open manifest."""

    rt: SbxRuntime
    name: str
    room: str
    agent_id: str
    log: Path  # the supervisor's log

    def answers(self, platform: Platform) -> None:
        answers(platform, self.rt, self.room, self.agent_id, self.name)


@contextmanager
def supervised(sim: Sim, platform: Platform, prefix: str) -> Iterator[Supervised]:
    """Create a supervised sandbox on simulated 0.47 and prove its agent answers; after the
    body, tear the manifest down and check nothing is left: no sandbox, session,
    supervisor, box, rule or idle watcher, and the agent key in no output or file."""
    scratch = scratch_dir(f"rt-{prefix}-")
    name = f"{prefix}-{secrets.token_hex(3)}"
    manifest_path = scratch / "run" / "manifest.json"
    agent_id, key = platform.register(name)
    try:
        with Manifest.open(manifest_path) as manifest:
            rt = SbxRuntime(manifest=manifest, kits_dir=scratch / "run" / "sbx" / "kits")
            manifest.record(Kind.AGENT, name, id=agent_id)
            rt.create(spec_for(platform, scratch, name, agent_id, key))
            staged = json.loads(sim("ls", "--json").stdout)["sandboxes"][0]
            assert staged["status"] == "running"
            box = Supervised(
                rt,
                name,
                platform.room_with(agent_id),
                agent_id,
                supervisor.paths(rt.supervisors_dir, name)[1],
            )
            box.answers(platform)
            yield box

            def remove_agent(resource: Resource) -> None:
                platform.delete_agent(resource.details["id"])

            report = teardown(manifest, {**removers([rt]), Kind.AGENT: remove_agent})
            assert report.clean, report.lines()
            assert {Kind.SANDBOX, Kind.SECRET, Kind.AGENT, Kind.PROCESS} <= {
                r.kind for r in report.removed
            }
        assert not manifest_path.exists()
        assert name not in rt.list()
        assert not session_pids(sim, name)
        assert processes.tagged_pids(rt.supervisor_tag(name)) == []
        assert not list((sim.state / "vms").glob("[!.]*"))  # caches aside
        assert json.loads(sim("policy", "ls", "--json").stdout)["rules"] == []
        wait_for(lambda: not watchers(sim.state), 5, "the idle watchers to exit")
        texts = [sim.outputs(), *(p.read_text(errors="replace") for p in _files(scratch))]
        assert all(key not in text for text in texts)
    finally:
        if manifest_path.exists():
            with Manifest.open(manifest_path) as manifest:
                leftover = SbxRuntime(kits_dir=scratch / "run" / "sbx" / "kits")
                teardown(manifest, removers([leftover]))
        if any(a["id"] == agent_id for a in platform.agents()):
            platform.delete_agent(agent_id)
        shutil.rmtree(scratch, ignore_errors=True)


def test_the_agent_outlives_the_idle_stop_and_a_killed_session(
    sim: Sim, platform: Platform, agent_sdk: None
) -> None:
    with supervised(sim, platform, "sup-idle") as box:
        time.sleep(IDLE_S * 2)  # the property under test: an idle period past auto-stop
        assert box.rt.status(box.name) is SandboxStatus.RUNNING
        box.answers(platform)

        found = session_pids(sim, box.name)
        assert len(found) == 1, box.log.read_text()[-4000:]
        os.kill(found[0], signal.SIGKILL)
        wait_for(lambda: "(run 2)" in box.log.read_text(), 30, "the supervisor's restart")
        box.answers(platform)


def test_a_killed_supervisor_is_replaced_and_stop_start_keeps_the_agent(
    sim: Sim, platform: Platform, agent_sdk: None
) -> None:
    with supervised(sim, platform, "sup-restart") as box:
        rt, name = box.rt, box.name
        first = supervisor.verified_pid(rt.supervisors_dir, name, rt.supervisor_tag(name))
        assert first is not None
        os.kill(first, signal.SIGKILL)  # its `sbx run` loses the pty: SIGHUP
        wait_for(lambda: not session_pids(sim, name), 30, "the session to end")
        rt.start(name)
        box.answers(platform)

        began = time.monotonic()
        rt.stop(name)
        stopped_s = time.monotonic() - began
        assert rt.status(name) is SandboxStatus.STOPPED
        began = time.monotonic()
        rt.start(name)
        started_s = time.monotonic() - began
        assert rt.status(name) is SandboxStatus.RUNNING
        box.answers(platform)
        assert "launch" in rt.logs(name).startup.lower()
        print(f"sbx 0.47 supervised: stop {stopped_s:.1f} s, start {started_s:.1f} s")


def test_without_the_supervisor_the_agent_never_answers(
    sim: Sim, platform: Platform, agent_sdk: None
) -> None:
    scratch = scratch_dir("rt-nosup-")
    name = f"nosup-{secrets.token_hex(3)}"
    agent_id, key = platform.register(name)
    rt = SbxRuntime(supervise=False)
    try:
        rt.create(spec_for(platform, scratch, name, agent_id, key))
        room = platform.room_with(agent_id)
        wait_for(lambda: rt.status(name) is SandboxStatus.STOPPED, IDLE_S + 20, "auto-stop")
        with pytest.raises(AssertionError):
            platform.round_trip(room, agent_id, timeout=IDLE_S)
        assert "no attached session" in (sim.state / "autostop.log").read_text()
    finally:
        rt.remove(name)
        platform.delete_agent(agent_id)
        shutil.rmtree(scratch, ignore_errors=True)


def _files(root: Path) -> Iterator[Path]:
    return (p for p in root.rglob("*") if p.is_file() and "keychain" not in p.parts)
