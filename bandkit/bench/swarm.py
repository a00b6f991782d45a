"""Swarm fleet benchmark (`nox -s bench -- swarm`, root, a Docker daemon and the kit image).

A fleet of `AGENTS` echo agents (2 in quick mode) from one workspace, on the local 3-node
cluster, driven by the commands a user types (`python -m invoke ...` with `--run-dir` a
scratch directory): `cluster.up --nodes 3`, `platform.up`, then

- `fleet.up --runtime swarm --parallel 10` from nothing until every agent is proved
  connected (target 60 s), with how busy the machine's CPU was meanwhile (/proc/stat) and
  the engine's bulk-sync stalls (below; one holds an agent's start for 30 s); a second
  `fleet.up`, which has nothing to do (target 5 s);
- the echo round trip with every agent connected: one mention per agent in turn, from
  sent to its answer in the room (polled every 20 ms), p50 and p95 (target p95 1 s);
- `cluster.drain` of the node with the most agents, timed until each of its agents runs on
  another node and answers a mention sent there as soon as it runs (target 30 s for the
  last; the median is printed beside it); a mention sent to each as the drain starts must
  be answered too (lost: target 0); the engine's overlay bulk-sync stalls meanwhile are
  counted from the nodes' daemon logs (each holds a network join, and its agent, for
  Engine 20.10's fixed 30 s: moby/moby#41524); then, for comparison, the same of the
  engine's own drain (`docker node update --availability drain`) of the node with the
  most agents after that, with the stalls `cluster.drain` spares its agents;
- `fleet.rollout --image band-python-kit:local --parallel 5`, which replaces every sandbox
  in batches: a marker sent to each agent as its old sandbox is removed, and how many are
  never answered (target 0), with the CPU and the stalls meanwhile;
- `fleet.down` (timed), `platform.down`, `cluster.down`: each must succeed and leave no
  fleet or cluster record, and `fleet.down` no labelled object on the cluster.

It checks as it goes that the fleet runs one agent image and has the file's limits (the
nodes it runs on are reported); a fault, a lost message or a leftover is a `FAIL` line, which the
quick run's test in the cluster lane fails on (that run is the lane's fleet on swarm).

The agents share one agent image (one source): it is built once and loaded once into each
node. The upstream kit has no cluster runtime: nothing to compare with. `BAND_*` settings
of this process are not handed to the commands.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Final

from bandkit.bench import docker_ok, sized
from bandkit.image.facts import STARTER_DIR

if TYPE_CHECKING:
    from bandkit.cluster import Cluster

REPO: Final = Path(__file__).resolve().parents[2]
AGENTS: Final = 30
PARALLEL_UP: Final = 10
PARALLEL_ROLLOUT: Final = 5
TARGETS: Final = {"up": 60.0, "noop": 5.0, "p95": 1.0, "drain": 30.0}
COMMAND_TIMEOUT_S: Final = 900.0
ANSWER_TIMEOUT_S: Final = 120.0
POLL_S: Final = 0.02  # a round trip's resolution (one mention awaited at a time)
MOVE_POLL_S: Final = 0.25  # a drain's: a dozen awaited at once, each poll a platform request
LIMITS_FORMAT: Final = "{{json .Spec.TaskTemplate.Resources.Limits}}"
STALL: Final = "Bulk sync to node"  # "... <id> timed out": a join held 30 s (moby#41524)

FILE_LIMITS: Final = (250_000_000, 256 * 2**20)  # the fleet file's cpu 250m, memory 256Mi


def _mark(name: str, seconds: float) -> str:
    target = TARGETS[name]
    return f"{seconds:.2f} s ({'within' if seconds <= target else 'OVER'} the {target:g} s target)"


def _cpu() -> tuple[int, int]:
    """(busy, all) jiffies of this machine so far, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _busy(before: tuple[int, int]) -> str:
    busy, total = (now - then for now, then in zip(_cpu(), before, strict=True))
    return f"CPU {100 * busy / max(total, 1):.0f}% busy on {os.cpu_count()} cores"


def _stalled(count: int) -> str:
    return f"the engine's 30 s overlay bulk-sync stalls meanwhile: {count}"


def _lost(count: int) -> str:
    """A lost message is a fault, not a slow figure: FAIL (the quick run's test fails)."""
    return "0 (the 0 target)" if count == 0 else f"{count} (FAIL: the target is 0)"


class _Run:
    """The scratch run directory, the commands in it, and its platform as a user sees it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.run_dir = root / ".run"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("BAND_", "DEMO_"))}
        self.env["PYTHONUNBUFFERED"] = "1"
        self.url = self.key = ""

    def argv(self, task: str, *args: str) -> list[str]:
        """The task's command line; `--run-dir` for every task but `cluster.drain` (it
        acts on the swarm itself)."""
        scoped = [] if task == "cluster.drain" else ["--run-dir", str(self.run_dir)]
        return [sys.executable, "-m", "invoke", task, *scoped, *args]

    def invoke(self, task: str, *args: str) -> float:
        began = time.monotonic()
        done = subprocess.run(
            self.argv(task, *args),
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise RuntimeError(f"{task} exited {done.returncode}:\n{tail}")
        return time.monotonic() - began

    def connect(self) -> None:
        from bandkit.emulator import service

        record = service.running(self.run_dir)
        if record is None:
            raise RuntimeError("platform.up left no running platform")
        self.url, self.key = record.rest_url, service.read_user_key(record)

    def _where(self, name: str) -> dict[str, str]:
        from bandkit.kit.agent_check import recorded_ids

        path = self.run_dir / "provision" / name / "manifest.json"
        room, agent = recorded_ids(path, name)
        return {"api_key": self.key, "rest_url": self.url, "room_id": room, "agent_id": agent}

    def mention(self, name: str, text: str) -> None:
        from bandkit.kit import agent_check

        agent_check.mention(**self._where(name), agent_name=name, text=text)

    def answered(self, name: str, text: str) -> bool:
        from bandkit.kit import agent_check

        return bool(agent_check.reply_to(**self._where(name), token=text))

    def wait_answered(
        self, name: str, text: str, timeout_s: float = ANSWER_TIMEOUT_S, poll: float = POLL_S
    ) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.answered(name, text):
                return True
            time.sleep(poll)
        return False

    def status(self) -> list[dict[str, str]]:
        done = subprocess.run(
            self.argv("fleet.status", "--json"),
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        rows: list[dict[str, str]] = json.loads(done.stdout)
        return rows


def _fleet_file(root: Path, count: int) -> Path:
    shutil.copytree(STARTER_DIR, root / "ws", ignore=shutil.ignore_patterns(".venv"))
    agents = "".join(
        f"  - name: echo-{i}\n    description: echo agent {i} of the swarm bench\n"
        "    workspace: ws\n"
        for i in range(1, count + 1)
    )
    path = root / "fleet.yaml"
    path.write_text(
        "version: 1\ndefaults:\n  image: band-python-kit:local\n"
        f"  resources: {{cpu: 250m, memory: 256Mi}}\nagents:\n{agents}",
        encoding="utf-8",
    )
    return path


def _round_trips(run: _Run, names: list[str]) -> list[float]:
    spent = []
    for name in names:
        marker = f"rtt:{secrets.token_hex(4)}"
        began = time.monotonic()
        run.mention(name, marker)
        if not run.wait_answered(name, marker):
            raise RuntimeError(f"{name} did not answer {marker}")
        spent.append(time.monotonic() - began)
    return spent


def _stalls(made: Cluster, since: float, until: float) -> int:
    """How many of Docker's overlay bulk syncs the nodes' daemons logged as timed out
    between `since` and `until` (epoch seconds): each is a network join on that node held
    for the engine's fixed 30 s (Engine 20.10; moby/moby#41524), and the agent it carries."""
    count = 0
    for node in made.nodes:
        try:
            text = made.layout.log(node).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if STALL not in line or not line.startswith('time="'):
                continue
            try:  # time="2026-12-06T19:24:39.095098522Z" (Go trims trailing zeros)
                stamp = datetime.fromisoformat(line[6:].split('"', 1)[0]).timestamp()
            except ValueError:
                continue
            count += since <= stamp <= until
    return count


def _drain(run: _Run, *, kit: bool) -> tuple[str, list[float], int, int]:
    """Drain the node with the most agents, with `cluster.drain` when `kit`, else with the
    engine's own `docker node update --availability drain`: a marker to each of its agents
    as the drain starts; as soon as one runs on another node, a second one to it. (node,
    each agent's time from the drain to its second marker answered, markers sent at the
    start never answered, the engine's bulk-sync stalls meanwhile.) The node is made
    active again after."""
    from bandkit.cluster.swarm import docker

    by_node: dict[str, list[str]] = {}
    for row in run.status():
        by_node.setdefault(row["node"], []).append(row["name"])
    node, names = max(by_node.items(), key=lambda item: len(item[1]))
    made = _cluster(run)
    manager = made.manager

    def running_on() -> dict[str, str]:
        out = docker(
            manager,
            "service",
            "ps",
            *names,
            "--filter",
            "desired-state=running",
            "--format",
            "{{.Name}} {{.Node}} {{.CurrentState}}",
        )
        rows = [line.split() for line in out.splitlines()]
        return {r[0].rsplit(".", 1)[0]: r[1] for r in rows if len(r) > 2 and r[2] == "Running"}

    began, wall = time.monotonic(), time.time()
    if kit:
        proc = subprocess.Popen(
            run.argv("cluster.drain", "--node", node),
            cwd=REPO,
            env=run.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    else:
        docker(manager, "node", "update", "--availability", "drain", node)
    during = {name: f"moving:{secrets.token_hex(4)}" for name in names}
    for name, marker in during.items():
        run.mention(name, marker)
    deadline = began + ANSWER_TIMEOUT_S
    back: dict[str, float] = {}
    waiting: list[threading.Thread] = []

    def answer(name: str) -> None:
        marker = f"moved:{secrets.token_hex(4)}"
        run.mention(name, marker)
        left = max(deadline - time.monotonic(), 1.0)
        if run.wait_answered(name, marker, left, poll=MOVE_POLL_S):
            back[name] = time.monotonic() - began

    while len(waiting) < len(names) and time.monotonic() < deadline:
        moved = {n for n, m in running_on().items() if m != node}
        for name in sorted(moved - {t.name for t in waiting}):
            thread = threading.Thread(target=answer, args=(name,), name=name)
            thread.start()
            waiting.append(thread)
        time.sleep(0.2)
    for thread in waiting:
        thread.join()
    lost = [n for n, m in during.items() if not run.wait_answered(n, m)]
    stalls = _stalls(made, wall, wall + time.monotonic() - began)
    if kit:
        said, _ = proc.communicate(timeout=COMMAND_TIMEOUT_S)
        if proc.returncode != 0:
            raise RuntimeError(f"cluster.drain exited {proc.returncode}: {said.decode()[-800:]}")
        run.invoke("cluster.drain", "--node", node, "--undo")
    else:
        docker(manager, "node", "update", "--availability", "active", node)
    silent = sorted(set(names) - set(back))
    if silent:
        raise RuntimeError(f"after the drain of {node}, no answer from {', '.join(silent)}")
    return node, sorted(back.values()), len(lost), stalls


def _rollout(run: _Run, names: list[str]) -> tuple[float, int, int]:
    """The rollout with a marker per agent; (seconds, markers sent, never answered)."""
    markers: dict[str, str] = {}
    argv = run.argv(
        "fleet.rollout", "--image", "band-python-kit:local", "--parallel", str(PARALLEL_ROLLOUT)
    )
    began = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        env=run.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    stream = proc.stderr
    said: list[str] = []

    def watch() -> None:
        for line in stream:
            said.append(line)
            for name in names:
                if line.startswith(f"fleet: {name}: old sandbox removed"):
                    markers[name] = f"marker:{secrets.token_hex(4)}"
                    run.mention(name, markers[name])

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    code = proc.wait(COMMAND_TIMEOUT_S)
    watcher.join(timeout=30)
    spent = time.monotonic() - began
    if code != 0:
        raise RuntimeError(f"fleet.rollout exited {code}:\n{''.join(said[-15:])}")
    lost = [n for n, m in markers.items() if not run.wait_answered(n, m)]
    return spent, len(markers), len(lost) + len(set(names) - set(markers))


def _cluster(run: _Run) -> Cluster:
    from bandkit import cluster

    made = cluster.status(cluster.Layout.of(run.run_dir)).cluster
    if made is None:
        raise RuntimeError("no local cluster")
    return made


def _faults(run: _Run, rows: list[dict[str, str]]) -> list[str]:
    """What of the fleet on the cluster is not as its file says (the quick run's test
    fails on each): more than one agent image, the limits not applied. (Where swarm puts
    each agent is reported, not checked: each agent is a service of its own beside its
    proxy's, so spread placement does not promise two agents two nodes.)"""
    from bandkit.cluster.swarm import docker

    faults = []
    if len({r["image"] for r in rows}) != 1:
        faults.append(f"FAIL: one source, yet {len({r['image'] for r in rows})} agent images")
    raw = docker(
        _cluster(run).manager, "service", "inspect", "--format", LIMITS_FORMAT, rows[0]["name"]
    )
    limits = json.loads(raw) or {}
    if (limits.get("NanoCPUs"), limits.get("MemoryBytes")) != FILE_LIMITS:
        faults.append(f"FAIL: {rows[0]['name']}'s limits are not the file's: {raw.strip()}")
    return faults


def _labelled(run: _Run) -> list[str]:
    """Our swarm objects still on the cluster."""
    from bandkit.cluster.swarm import docker

    manager = _cluster(run).manager
    found = []
    for kind in ("service", "network", "secret", "config"):
        listed = docker(manager, kind, "ls", "--filter", "label=bandkit.sandbox", "-q")
        found += [f"{kind} {ident}" for ident in listed.split()]
    return found


def run() -> list[str]:
    from bandkit.dockercli import image_exists
    from bandkit.image.facts import LOCAL_TAG

    if os.geteuid() != 0 or not docker_ok() or not image_exists(LOCAL_TAG):
        return [f"swarm: skipped (needs root, a Docker daemon and {LOCAL_TAG})"]
    count = sized(AGENTS, 2)
    names = [f"echo-{i}" for i in range(1, count + 1)]
    lines = [f"a fleet of {count} echo agents on the local 3-node cluster (swarm runtime):"]
    raw = tempfile.mkdtemp(prefix="bench-swarm-")
    root = Path(raw)
    root.chmod(0o755)  # the agent uid reads the workspace copies
    run = _Run(root)
    cleanups: list[tuple[str, Callable[[], float]]] = []
    try:
        fleet_file = str(_fleet_file(root, count))
        run.invoke("cluster.up", "--nodes", "3")
        cleanups.insert(0, ("cluster.down", lambda: run.invoke("cluster.down")))
        made = _cluster(run)
        run.invoke("platform.up")
        cleanups.insert(0, ("platform.down", lambda: run.invoke("platform.down")))
        run.connect()
        cleanups.insert(0, ("fleet.down", lambda: run.invoke("fleet.down")))
        up_args = ("--file", fleet_file, "--runtime", "swarm", "--parallel", str(PARALLEL_UP))
        cpu, wall = _cpu(), time.time()
        up = run.invoke("fleet.up", *up_args)
        up_cpu, up_stalls = _busy(cpu), _stalls(made, wall, time.time())
        noop = run.invoke("fleet.up", *up_args)
        rows = run.status()
        connected = sum(r["connected"] == "yes" for r in rows)
        spread = sorted({r["node"] for r in rows})
        faults = _faults(run, rows)
        trips = _round_trips(run, names)
        p95 = statistics.quantiles(trips, n=20)[-1] if len(trips) > 1 else trips[0]
        node, back, drain_lost, stalls = _drain(run, kit=True)
        plain, plain_back, plain_lost, plain_stalls = _drain(run, kit=False)
        cpu, wall = _cpu(), time.time()
        rolled, sent, lost = _rollout(run, names)
        rolled_cpu, rolled_stalls = _busy(cpu), _stalls(made, wall, time.time())
        lines += [
            f"  fleet.up from nothing until all {count} connected (--parallel {PARALLEL_UP}): "
            f"{_mark('up', up)}; {connected} connected, on {', '.join(spread)}; {up_cpu}; "
            f"{_stalled(up_stalls)}",
            f"  fleet.up again, nothing to do: {_mark('noop', noop)}",
            f"  echo round trip, all connected, {len(trips)} mentions: p50 "
            f"{statistics.median(trips):.2f} s, p95 {_mark('p95', p95)}",
            f"  cluster.drain of {node} ({len(back)} agent(s)) until each, on another node, "
            f"answered: {_mark('drain', back[-1])}; half of them within "
            f"{statistics.median(back):.1f} s; messages sent as the drain began, lost: "
            f"{_lost(drain_lost)}; {_stalled(stalls)} (`{STALL}` in the nodes' dockerd.log)",
            f"  the engine's own drain (docker node update) of {plain} ({len(plain_back)} "
            f"agent(s)), for comparison: the last answered in {plain_back[-1]:.1f} s, half "
            f"within {statistics.median(plain_back):.1f} s; lost: {_lost(plain_lost)}; "
            f"{_stalled(plain_stalls)}",
            f"  fleet.rollout --parallel {PARALLEL_ROLLOUT} (every sandbox replaced): "
            f"{rolled:.1f} s ({rolled_cpu}; {_stalled(rolled_stalls)}); markers sent {sent}, "
            f"lost {_lost(lost)}",
            *[f"  {fault}" for fault in faults],
        ]
    except Exception as exc:  # a bench reports; the cleanups below still run
        lines.append(f"  failed: {exc}")
    finally:
        for what, cleanup in cleanups:
            try:
                spent = cleanup()
            except RuntimeError as exc:
                lines.append(f"  FAILED: {exc}")
            else:
                if what == "fleet.down":
                    left = _labelled(run)
                    lines.append(
                        f"  fleet.down of {count}: {spent:.1f} s; left on the cluster: "
                        + (f"FAIL: {', '.join(left)}" if left else "nothing")
                    )
        if (run.run_dir / "fleet").exists() or (run.run_dir / "cluster").exists():
            lines.append(f"  FAILED: the fleet or the cluster left records in {run.run_dir}")
        shutil.rmtree(root, ignore_errors=True)
    return lines
