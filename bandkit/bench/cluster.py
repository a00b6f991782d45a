"""Local cluster benchmark (`nox -s bench -- cluster`, root and a Docker daemon).

In a scratch run directory: `cluster.up --nodes 3` from nothing without any image, then
(after a `cluster.down`) with the kit image loaded (three loads at once; quick mode: this
one only); on that cluster
a service of 3 replicas
(`--endpoint-mode dnsrr`, `--no-resolve-image`, spread) until all run; a rolling update
of the 3 (parallelism 3, monitor 1 s) until the new tasks run; a drain of node 2 until
its task runs elsewhere; then `cluster.down` with the service running, and what it left
(must be nothing).
Targets, from what such a cluster was measured to do on this kind of machine: set up
from nothing with the image loads <= 30 s, teardown <= 10 s, 3 replicas <= 5 s, the
rolling update <= 15 s, the drain <= 10 s.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from bandkit.bench import docker_ok, quick

TARGETS: Final = {"up": 30.0, "down": 10.0, "replicas": 5.0, "update": 15.0, "drain": 10.0}


def _mark(name: str, seconds: float) -> str:
    target = TARGETS[name]
    return f"{seconds:.1f} s ({'within' if seconds <= target else 'OVER'} the {target:g} s target)"


def _timed(action: Callable[[], object]) -> float:
    began = time.monotonic()
    action()
    return time.monotonic() - began


def _until(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {timeout_s:.0f} s")
        time.sleep(0.1)


def run() -> list[str]:
    from bandkit import cluster
    from bandkit.cluster.swarm import SERVICE_OPTIONS, docker
    from bandkit.dockercli import image_exists
    from bandkit.image.facts import LOCAL_TAG

    if os.geteuid() != 0 or not docker_ok() or not image_exists(LOCAL_TAG):
        return [f"cluster: skipped (needs root, a Docker daemon and {LOCAL_TAG})"]
    lines = ["local cluster, 3 nodes (1 manager):"]
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as raw:
        layout = cluster.Layout.of(Path(raw))
        try:
            bare = None
            if not quick():  # quick: the cluster with the image only
                bare = _timed(lambda: cluster.up(layout, count=3, image_refs=[], progress=_quiet))
                cluster.down(layout, progress=_quiet)
            began = time.monotonic()
            made = cluster.up(layout, count=3, image_refs=[LOCAL_TAG], progress=_quiet)
            up = time.monotonic() - began
            manager = made.manager

            def tasks(state: str) -> dict[str, str]:
                out = docker(
                    manager,
                    "service",
                    "ps",
                    "probe",
                    "--filter",
                    f"desired-state={state}",
                    "--format",
                    "{{.ID}} {{.Node}} {{.CurrentState}}",
                )
                return {
                    row.split()[0]: row.split()[1]
                    for row in out.splitlines()
                    if " Running " in f" {row} "
                }

            create = [
                "service",
                "create",
                "--quiet",
                "--detach",
                "--name",
                "probe",
                "--replicas",
                "3",
                *SERVICE_OPTIONS,
                "--init",  # sleep as PID 1 would ignore the stop signal: 10 s per task
                "--entrypoint",
                "sleep",
                LOCAL_TAG,
                "infinity",
            ]

            def start() -> None:
                docker(manager, *create)
                _until(lambda: len(tasks("running")) == 3, 120, "3 replicas running")

            replicas = _timed(start)
            before = set(tasks("running"))
            update = [
                "service",
                "update",
                "--quiet",
                "--detach",
                "--update-parallelism",
                "3",
                "--update-monitor",
                "1s",
                "--env-add",
                "ROUND=2",
                "probe",
            ]

            def roll() -> None:
                docker(manager, *update)
                _until(lambda: _replaced(tasks("running"), before), 120, "the rolling update")

            rolled = _timed(roll)

            def drain() -> None:
                docker(manager, "node", "update", "--availability", "drain", "node2")
                _until(lambda: _moved(tasks("running"), "node2"), 120, "the drain")

            drained = _timed(drain)
            began = time.monotonic()
            report = cluster.down(layout, progress=_quiet)  # with its service running
            down = time.monotonic() - began
        except Exception as exc:  # a bench reports, the leftovers check below still runs
            lines.append(f"  failed: {exc}")
        else:
            lines += [
                f"  cluster.up from nothing, kit image loaded into each: {_mark('up', up)}; "
                "without an image "
                + (f"{bare:.1f} s" if bare is not None else "not measured in quick mode"),
                f"  cluster.down (its service running): {_mark('down', down)}; left: "
                f"{'nothing' if report.clean else report.lines()}",
                f"  service of 3 replicas running: {_mark('replicas', replicas)}",
                f"  rolling update of 3 (parallelism 3, monitor 1 s): {_mark('update', rolled)}",
                f"  drain of node2 until its task runs elsewhere: {_mark('drain', drained)}",
            ]
        finally:
            last = cluster.down(layout, progress=_quiet)  # what a failed run left, if any
            if not last.clean:
                lines.append(f"  FAILED to remove the cluster: {last.lines()}")
    return lines


def _replaced(now: dict[str, str], before: set[str]) -> bool:
    return len(now) == 3 and not set(now) & before


def _moved(now: dict[str, str], node: str) -> bool:
    return len(now) == 3 and node not in now.values()


def _quiet(_line: str) -> None:
    pass
