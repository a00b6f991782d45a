"""Removing exactly what a demo run recorded: the end of `demo.up`, and `demo.down`.

`tear_down` first removes every recorded sandbox at once (agents shut down and their
boxes are deleted in parallel; a sandbox's removal is idempotent, so the pass that
follows finds it gone or reports why not), then walks the open manifest in reverse
(`bandkit.manifest.teardown`): the room,
the sandboxes, their secrets and egress rules, the agents, the agent.id edits, the staged
workspaces and, last, a local emulator the run started itself. Each removal is
idempotent; each failure is reported with what to do about it and stays recorded, so a
re-run of `demo.down` picks up where this one stopped. Only a clean pass deletes the
manifest (and its lock file and the run record).

A platform that stopped never strands a run: the emulator the run started itself is
started again from its state for the teardown (`target.revive_own_emulator`); agents and
rooms on a platform whose state is gone are cleared, saying so; on one that does not
answer but may come back they are kept and the message says exactly that, unless
`demo.down --forget-unreachable` clears them too (each one listed) (`kit.platforms`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

from bandkit.demo import DemoError
from bandkit.demo.layout import DemoLayout
from bandkit.demo.target import (
    EMULATOR_SERVICE,
    revive_own_emulator,
    stop_emulator,
    user_key_for_teardown,
)
from bandkit.kit.commands import platform_removers
from bandkit.kit.platforms import FORGET_FLAG, Probe
from bandkit.manifest import Kind, Manifest, ManifestError, Remover, Resource, TeardownReport
from bandkit.manifest import teardown as manifest_teardown
from bandkit.runtimes.base import Runtime, SandboxError
from bandkit.runtimes.generic import generic_removers
from bandkit.runtimes.select import get_runtime, removers

Log = Callable[[str], None]
RERUN: Final = "then re-run `uv run invoke demo.down`"
DOWN_RERUN: Final = "re-run `uv run invoke demo.down`"
REMEDIES: Final[Mapping[Kind, str]] = {
    Kind.ROOM: "delete the room on the platform (its page is in `demo.status`)",
    Kind.SANDBOX: "remove the sandbox with its runtime (`sbx rm NAME`, `docker rm -f NAME`)",
    Kind.SECRET: "remove the stored key with its runtime (`sbx secret rm ...`)",
    Kind.POLICY: "remove the egress rule (`sbx policy rm network ...`)",
    Kind.AGENT: "make sure the platform answers (local: `uv run invoke platform.up`), or "
    "delete the agent on the platform",
    Kind.AGENT_ID: "remove the entries listed after it first",
    Kind.WORKSPACE: "delete the directory by hand",
    Kind.PROCESS: "stop it (`uv run invoke platform.down`)",
    Kind.TEMPLATE: "remove the image from sbx once no sandbox uses it (`sbx template rm REF`)",
}


def runtimes_in(manifest: Manifest, layout: DemoLayout) -> list[Runtime]:
    """The runtimes the manifest's entries name, with this layout's state directory."""
    used = {r.details["runtime"] for r in manifest.resources if "runtime" in r.details}
    try:
        return [
            get_runtime(name, run_dir=layout.runtimes, manifest=manifest) for name in sorted(used)
        ]
    except SandboxError as exc:
        raise DemoError(str(exc)) from None


def removers_for(
    manifest: Manifest, runtimes: list[Runtime], *, user_key: str, forget: bool = False
) -> dict[Kind, Remover]:
    probe = Probe(user_key, forget=forget, rerun=DOWN_RERUN)
    table = {**removers(runtimes), **platform_removers(user_key, manifest, probe)}
    remove_process = generic_removers()[Kind.PROCESS]

    def process(resource: Resource) -> None:
        if resource.details.get("service") == EMULATOR_SERVICE:
            stop_emulator(resource)
        else:
            remove_process(resource)

    table[Kind.PROCESS] = process
    return table


def remove_sandboxes_at_once(manifest: Manifest, runtimes: list[Runtime]) -> None:
    """Remove every recorded sandbox in parallel; the manifest pass settles each entry."""
    by_name = {rt.name.value: rt for rt in runtimes}
    jobs = [
        (by_name[r.details["runtime"]], r.details["name"])
        for r in manifest.resources
        if r.kind is Kind.SANDBOX and r.details.get("runtime") in by_name and "name" in r.details
    ]

    def remove(job: tuple[Runtime, str]) -> None:
        runtime, name = job
        # Any failure: the manifest pass that follows retries this removal and reports why.
        with contextlib.suppress(Exception):
            runtime.remove(name)

    if jobs:
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            list(pool.map(remove, jobs))


def tear_down(
    manifest: Manifest,
    layout: DemoLayout,
    *,
    user_key: str,
    log: Log,
    runtimes: list[Runtime] | None = None,
    forget: bool = False,
) -> TeardownReport:
    """Remove everything the open manifest lists; log one line per entry. Records on a
    platform that is gone are cleared (and said so); on one that does not answer they
    are kept, unless `forget` (--forget-unreachable) clears them too."""
    found = runtimes if runtimes is not None else runtimes_in(manifest, layout)
    revived = revive_own_emulator(manifest, layout.run_dir)
    if revived:
        log(f"teardown: {revived}")
    table = removers_for(manifest, found, user_key=user_key, forget=forget)
    remove_sandboxes_at_once(manifest, found)
    report = manifest_teardown(manifest, table, redact=[user_key])
    for resource in report.removed:
        log(f"teardown: removed {resource.ref}")
    for resource, message in report.cleared:
        log(f"teardown: cleared {resource.ref}: {message}")
    for resource, message in report.failed:
        if message.endswith(f"{FORGET_FLAG} drops this record (each one listed)"):
            log(f"teardown: FAILED {resource.ref}: {message}")  # says what to do already
            continue
        remedy = REMEDIES.get(resource.kind, "remove it by hand")
        log(f"teardown: FAILED {resource.ref}: {message}; {remedy}, {RERUN}")
    return report


def finish(layout: DemoLayout, report: TeardownReport) -> None:
    """After a clean teardown: nothing of the run is left but its transcript."""
    if report.clean:
        for path in (Path(str(layout.manifest) + ".lock"), layout.run_file):
            path.unlink(missing_ok=True)


def down(
    run_dir: Path, *, env: Mapping[str, str] | None = None, log: Log, forget: bool = False
) -> bool:
    """`demo.down`: remove what the run in `run_dir` recorded; True when nothing is left.
    `forget` (--forget-unreachable): records on a platform that does not answer are
    cleared, each one listed."""
    env = os.environ if env is None else env
    layout = DemoLayout.for_run_dir(run_dir)
    info = layout.read_info()
    if info is not None:
        layout = DemoLayout(layout.run_dir, Path(info.box_root))
    if not layout.manifest.exists():
        log(f"demo.down: nothing recorded in {layout.manifest}; nothing to remove")
        finish(layout, TeardownReport())
        return True
    key = user_key_for_teardown(info.platform if info else "local", layout.run_dir, env)
    try:
        with Manifest.open(layout.manifest, secrets=[key]) as manifest:
            report = tear_down(manifest, layout, user_key=key, log=log, forget=forget)
    except ManifestError as exc:
        raise DemoError(str(exc)) from None
    finish(layout, report)
    return report.clean
