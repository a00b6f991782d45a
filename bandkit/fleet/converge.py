"""Converge a fleet: what the fleet file says against what this run directory made.

State: `<run_dir>/fleet/manifest.json`, a run manifest with one `fleet-member` entry per
agent (key: its name), recorded before anything is made for it. Its details are the
contract between runs:

- `file`: the fleet file (absolute); one fleet per run directory, another file is refused;
- what the plan compares: `runtime` (a concrete name, never `auto`), `image` (the kit
  image the agent image is built on), `source` (a digest of the source workspace),
  `limits` (resources and placement, JSON);
- `workspace` (the source), `copy` (the agent's own copy, `fleet/workspaces/NAME`, the
  one its sandbox mounts), `description`;
- `carried` (an image-only agent: where its image holds the workspace; `image` is then
  the agent image itself);
- `done` (`yes` once the agent was proved connected), `agent_id`, `runs` (the image its
  sandbox runs), `seen` (when it was last proved connected).

Each agent is provisioned as `kit.provision` does it (`commands.run`), with its own
provision manifest, so `kit.ping` and `kit.unprovision` work on fleet agents too. Every
change of an agent's sandbox goes the same way (`apply`): its agent image is built from
the source workspace and staged on the runtime (docker, swarm) while the old sandbox still
runs (one image per source: every agent's copy is mounted at the source's path inside
its sandbox, the path the image was synced for); then the old sandbox is removed (agent,
key and rooms kept), its copy is made again from the source (the sandbox wrote in the
old one: nothing host-side reads it), and the sandbox is created and proved connected.
A crash at any point leaves `done` empty and the next `fleet.up` applies that agent
again.

An image-only agent (the file gives an agent image that carries its workspace, and no
workspace) runs that image as is, on docker or swarm: `carried` records where the image
holds the workspace and `source` is the image's id; the workspace is copied out of the
image once per image (`fleet/images/ID`), and each agent's copy is mounted there.

On sbx an agent's sandbox is the kit (`docker/band_python_kit`) with the member's image as
its template, which `stage_templates` loads into sbx once for the fleet and records in the
fleet's state (not in one agent's records: removing that agent would take it from the
others); `down` removes it after the last member. The copy syncs at start, as
`kit.provision --runtime sbx` does.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from bandkit.dockercli import image_exists, image_id
from bandkit.errors import BandkitError
from bandkit.fleet.spec import Agent, Fleet, FleetError
from bandkit.fsio import remove_path
from bandkit.image.agent import LEFT_OUT, carried_path, source_digest
from bandkit.image.facts import KIT_DIR
from bandkit.kit import agent_check, commands
from bandkit.kit.band_yaml import has_real_id, read_agent_id, write_agent_id
from bandkit.kit.provision import ProvisionRequest
from bandkit.kit.rooms import room_key
from bandkit.manifest import Kind, Manifest, Resource, teardown
from bandkit.runtimes.base import Limits, RuntimeName, SandboxError, SandboxStatus
from bandkit.runtimes.select import get_runtime, removers, resolve_name

IMAGE_RUNTIMES = (RuntimeName.DOCKER.value, RuntimeName.SWARM.value)  # run agent images
COMPARED = ("image", "source", "limits")  # what an update changes (runtime: a replace)

Log = Callable[[str], None]


def state_path(run_dir: Path) -> Path:
    return run_dir / "fleet" / "manifest.json"


def copy_dir(run_dir: Path, name: str) -> Path:
    return run_dir / "fleet" / "workspaces" / name


def limits_text(limits: Limits) -> str:
    return json.dumps(dataclasses.asdict(limits), sort_keys=True)


def limits_of(text: str) -> Limits:
    data = json.loads(text or "{}")
    return Limits(
        cpus=str(data.get("cpus", "")),
        memory_bytes=int(data.get("memory_bytes", 0)),
        constraints=tuple(data.get("constraints", ())),
    )


@dataclass(frozen=True)
class Wanted:
    """One agent as the fleet file (or, for a rollout, its member record) describes it."""

    name: str
    description: str
    runtime: str  # concrete: local, sbx, docker or swarm
    image: str
    workspace: Path
    limits: Limits
    source: str = ""
    carried: str = ""  # an image-only agent: where its image holds the workspace

    def details(self, file: Path) -> dict[str, str]:
        return {
            "file": str(file),
            "runtime": self.runtime,
            "image": self.image,
            "source": self.source,
            "limits": limits_text(self.limits),
            "workspace": str(self.workspace),
            "description": self.description,
            "carried": self.carried,
        }

    @classmethod
    def of(cls, member: Resource) -> Wanted:
        d = member.details
        return cls(
            name=member.key,
            description=d["description"],
            runtime=d["runtime"],
            image=d["image"],
            workspace=Path(d["workspace"]),
            limits=limits_of(d.get("limits", "")),
            source=d.get("source", ""),
            carried=d.get("carried", ""),
        )


def carried_dir(run_dir: Path, ident: str) -> Path:
    """Where the workspace an image-only agent's image carries is copied out to."""
    return run_dir / "fleet" / "images" / ident.removeprefix("sha256:")[:16]


def _carried_id(image: str, carry: str, where: str) -> str:
    """The id of `image`, an agent image that must hold its workspace at `carry`
    (`kit.build-agent --carry`); FleetError naming `where` and what to do."""
    try:
        ident, held = image_id(image), carried_path(image)
    except BandkitError:
        raise FleetError(
            f"{where}: image {image} is not on this machine; build it: `uv run invoke "
            f"kit.build-agent --workspace W --carry {carry}`"
        ) from None
    if held != carry:
        raise FleetError(
            f"{where}: image {image} holds its workspace at {held or 'no path'}, not at "
            f"workspace_dir {carry}; build it with `--carry {carry}` or set workspace_dir"
        )
    return ident


def _carried(fleet: Fleet, agent: Agent, runtime: str, run_dir: Path) -> Wanted:
    """An image-only agent: its image is its agent image, holding the workspace at
    `workspace_dir`; compared by the image's id."""
    image = fleet.image(agent)
    where = f"{fleet.path}: agent {agent.name}"
    if runtime not in IMAGE_RUNTIMES:
        raise FleetError(
            f"{where} gives only an image, which the {runtime} runtime cannot run; "
            "give --runtime docker or swarm, or a workspace"
        )
    ident = _carried_id(image, agent.workspace_dir, where)
    return Wanted(
        name=agent.name,
        description=agent.description,
        runtime=runtime,
        image=image,
        workspace=carried_dir(run_dir, ident),
        limits=fleet.limits(agent),
        source=ident,
        carried=agent.workspace_dir,
    )


def wanted(fleet: Fleet, runtime: str, run_dir: Path) -> list[Wanted]:
    """Every agent of the file, on `runtime` (auto resolved once, for all of them)."""
    try:
        concrete = resolve_name(runtime).value
    except SandboxError as exc:
        raise FleetError(str(exc)) from None
    out = []
    for agent in fleet.spec.agents:
        workspace = fleet.workspace(agent)
        if workspace is None:
            out.append(_carried(fleet, agent, concrete, run_dir))
            continue
        out.append(
            Wanted(
                name=agent.name,
                description=agent.description,
                runtime=concrete,
                image=fleet.image(agent),
                workspace=workspace,
                limits=fleet.limits(agent),
                source=source_digest(workspace),
            )
        )
    return out


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"  # another runtime: removed, then made again (a new agent)
    RESTART = "restart"
    UNCHANGED = "unchanged"
    REMOVE = "remove"
    KEPT = "kept"  # not in the file, no --prune


ACTING = (Action.CREATE, Action.UPDATE, Action.REPLACE, Action.RESTART, Action.REMOVE)


@dataclass(frozen=True)
class Step:
    name: str
    action: Action
    why: str = ""
    want: Wanted | None = None

    def line(self) -> str:
        signs = {Action.CREATE: "+", Action.REMOVE: "-", Action.UNCHANGED: "=", Action.KEPT: "!"}
        sign = signs.get(self.action)
        why = f" ({self.why})" if self.why else ""
        return f"  {sign or '~'} {self.name}: {self.action.value}{why}"


@dataclass(frozen=True)
class Have:
    """A member as recorded, and its sandbox's state now."""

    details: Mapping[str, str]
    status: SandboxStatus


def plan(want: Sequence[Wanted], have: Mapping[str, Have], *, prune: bool) -> list[Step]:
    """The steps from what is to what the file says (pure): in the file's order, then the
    members the file no longer names."""
    steps = []
    for w in want:
        h = have.get(w.name)
        if h is None:
            steps.append(Step(w.name, Action.CREATE, "new", w))
            continue
        recorded = h.details
        if recorded.get("done") != "yes":
            steps.append(Step(w.name, Action.CREATE, "an earlier run stopped before it ended", w))
        elif recorded.get("runtime") != w.runtime:
            why = f"runtime {recorded.get('runtime')} -> {w.runtime}: a new agent"
            steps.append(Step(w.name, Action.REPLACE, why, w))
        elif changed := [f for f in COMPARED if recorded.get(f) != w.details(Path())[f]]:
            steps.append(Step(w.name, Action.UPDATE, ", ".join(changed) + " changed", w))
        elif h.status is not SandboxStatus.RUNNING:
            steps.append(Step(w.name, Action.RESTART, f"its sandbox is {h.status.value}", w))
        else:
            steps.append(Step(w.name, Action.UNCHANGED))
    named = {w.name for w in want}
    for name in have:
        if name not in named:
            if prune:
                steps.append(Step(name, Action.REMOVE, "not in the file"))
            else:
                steps.append(Step(name, Action.KEPT, "not in the file; --prune removes it"))
    return steps


@dataclass(frozen=True)
class Target:
    """The platform the fleet's agents are on, and the user key that acts there."""

    rest_url: str
    ws_url: str
    api_key: str
    platform: Mapping[str, str]
    run_dir: Path


def target_for(run_dir: Path, rest_url: str = "", *, stopped_ok: bool = False) -> Target | None:
    """The platform as `kit.provision` chooses it (`--rest-url`, BAND_REST_URL, the run
    directory's local platform, production) and the user key. None: `stopped_ok` and the
    local platform is stopped (a status shows `?`, a teardown clears what it recorded)."""
    from bandkit.kit.platforms import identify

    choice = commands.choose_platform(rest_url, run_dir, stopped_ok=stopped_ok)
    key = commands.user_key(choice)
    if not choice.running:
        return None
    platform = identify(choice.rest_url, key, run_dir=run_dir)
    return Target(choice.rest_url, choice.websocket, key, platform.details(), run_dir)


@dataclass(frozen=True)
class Applied:
    agent_id: str
    runs: str  # the image its sandbox runs (sbx: its template; "" on local)
    source: str
    seconds: float


def recorded_agent_id(run_dir: Path, name: str, rest_url: str) -> str:
    """The id the provision manifest of `name` recorded for its agent on `rest_url`."""
    path = commands.manifest_path(run_dir, name)
    if not path.exists():
        return ""
    for resource in Manifest.read(path):
        if resource.kind is Kind.AGENT and resource.details.get("url") == rest_url:
            return resource.details.get("id", "")
    return ""


def _key_lost(run_dir: Path, name: str) -> bool:
    """Whether the provision manifest of `name` records an agent but no stored key."""
    path = commands.manifest_path(run_dir, name)
    if not path.exists():
        return False
    kinds = {r.kind for r in Manifest.read(path)}
    return Kind.AGENT in kinds and Kind.SECRET not in kinds


def fresh_copy(source: Path, copy: Path, agent_id: str) -> None:
    """Make `copy` again from `source`, its agent.id `agent_id` (the placeholder when the
    agent is not registered yet). The old copy is removed without following any link."""
    remove_path(copy)
    copy.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    shutil.copytree(source, copy, symlinks=True, ignore=shutil.ignore_patterns(*LEFT_OUT))
    if agent_id:
        write_agent_id(copy, agent_id)
    elif has_real_id(read_agent_id(copy)):
        from launcher.constants import PLACEHOLDER_AGENT_ID

        write_agent_id(copy, PLACEHOLDER_AGENT_ID)


class Staged:
    """The agent images one converge run has built and staged, by (source, base,
    runtime): a source's image is checked, built when missing and staged once per run,
    however many of its agents change at once (the others wait for it, then reuse it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[tuple[str, str, str], threading.Lock] = {}
        self._tags: dict[tuple[str, str, str], str] = {}

    def tag(self, key: tuple[str, str, str], make: Callable[[], str]) -> str:
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._tags:
                self._tags[key] = make()
            return self._tags[key]


def stage_templates(state: Manifest, run_dir: Path, images: Iterable[str]) -> None:
    """sbx: load each image the fleet's sandboxes are made on into sbx once, recorded in
    the fleet's own state (`down` removes it after the last member). Recorded in one
    agent's provision records instead, removing that agent would take the template from
    every other one; staged here, each agent's provision finds it held and records
    nothing."""
    wanted_images = sorted(set(images))
    if not wanted_images:
        return
    sbx = get_runtime(RuntimeName.SBX.value, run_dir=run_dir / "runtimes", manifest=state)
    for image in wanted_images:
        try:
            sbx.stage_images([image])
        except SandboxError as exc:
            raise FleetError(f"the fleet's sbx template {image}: {exc}") from None


def _remove_templates(state: Manifest, run_dir: Path) -> list[str]:
    """The templates `stage_templates` recorded, removed; what could not be."""
    if not any(r.kind is Kind.TEMPLATE for r in state.resources):
        return []
    sbx = get_runtime(RuntimeName.SBX.value, run_dir=run_dir / "runtimes", manifest=state)
    report = teardown(state, removers([sbx]), only=(Kind.TEMPLATE,))
    return [line for line in report.lines() if line.startswith("FAILED")]


def apply(
    want: Wanted, target: Target, *, base: str, log: Log, images: Staged | None = None
) -> Applied:
    """Make the agent's sandbox as `want` says, on `base`; proved connected. `images`:
    what this run has staged already (a run changing many agents passes one)."""
    began = time.monotonic()
    run_dir = target.run_dir
    if _key_lost(run_dir, want.name):
        log(
            "an earlier run registered the agent and stopped before storing its key, which "
            "cannot be fetched again: removing that agent, then registering it anew"
        )
        failed = remove(want.name, target)
        if failed:
            raise FleetError("; ".join(failed))
    copy = copy_dir(run_dir, want.name)
    runs, kit, workspace, inside = "", None, want.workspace, want.workspace.resolve()
    if want.carried:  # `base` is the agent image itself, its workspace copied out
        runs, workspace, source = _carried_image(want, run_dir, base, images or Staged())
        inside = Path(want.carried)
    else:
        source = source_digest(want.workspace)
        if want.runtime in IMAGE_RUNTIMES:  # made before the old sandbox goes: it stays up
            runs = _agent_image(want, run_dir, base, log, images or Staged())
        elif want.runtime == RuntimeName.SBX.value:  # the kit, on `base` as its template
            runs, kit = base, str(KIT_DIR)
    removed = commands.remove_sandbox(want.name, run_dir=run_dir, api_key=target.api_key)
    if removed:
        log(f"old sandbox removed ({removed} part(s))")
    fresh_copy(workspace, copy, recorded_agent_id(run_dir, want.name, target.rest_url))
    request = ProvisionRequest(
        name=want.name,
        description=want.description,
        workspace=copy,
        rest_url=target.rest_url,
        ws_url=target.ws_url,
        kit=kit,
        image=runs or None,
        platform=dict(target.platform),
        limits=want.limits,
        mount_at=inside if want.runtime in IMAGE_RUNTIMES else None,
    )
    result = commands.run(
        request, runtime=want.runtime, run_dir=run_dir, api_key=target.api_key, log=log
    )
    return Applied(result.agent_id, runs, source, time.monotonic() - began)


def _carried_image(
    want: Wanted, run_dir: Path, image: str, images: Staged
) -> tuple[str, Path, str]:
    """An image-only agent's `image` (its own, or a rollout's) staged on its runtime, the
    workspace it carries copied out (once per image: agents share it), and its id."""
    from bandkit.image.agent import extract

    ident = _carried_id(image, want.carried, f"agent {want.name}")
    dest = carried_dir(run_dir, ident)

    def make() -> str:
        extract(image, want.carried, dest)
        get_runtime(want.runtime, run_dir=run_dir / "runtimes").stage_images([image])
        return image

    return images.tag((ident, "carried", want.runtime), make), dest, ident


def _agent_image(want: Wanted, run_dir: Path, base: str, log: Log, images: Staged) -> str:
    """The agent image of `want`'s source on `base`, built when missing and staged on its
    runtime (swarm: loaded into the nodes). One image per source and base: each agent's
    copy is mounted at the source's path, which the image was synced for."""
    from bandkit.image import agent

    def make() -> str:
        made = agent.build(want.workspace, base=base, progress=log)
        log(f"agent image {made.line()}")
        get_runtime(want.runtime, run_dir=run_dir / "runtimes").stage_images([made.tag])
        return made.tag

    key = (str(want.workspace.resolve()), base, want.runtime)
    return images.tag(key, make)


def remove(name: str, target: Target) -> list[str]:
    """Unprovision `name` and delete its copy; the failures (none: it is gone)."""
    failed: list[str] = []
    if commands.manifest_path(target.run_dir, name).exists():
        report = commands.unprovision(name, run_dir=target.run_dir, api_key=target.api_key)
        failed = [line for line in report.lines() if line.startswith("FAILED")]
    if not failed:
        remove_path(copy_dir(target.run_dir, name))
    return failed


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _members(state: Manifest) -> dict[str, Resource]:
    return {r.key: r for r in state.resources if r.kind is Kind.MEMBER}


def _status(details: Mapping[str, str], name: str, run_dir: Path) -> SandboxStatus:
    if not commands.manifest_path(run_dir, name).exists():
        return SandboxStatus.ABSENT
    try:
        rt = get_runtime(details.get("runtime", ""), run_dir=run_dir / "runtimes")
        return rt.status(name)
    except BandkitError:
        return SandboxStatus.ABSENT


def _as_status(value: object) -> SandboxStatus:
    return value if isinstance(value, SandboxStatus) else SandboxStatus.ABSENT


def _in_parallel(
    items: Iterable[str], work: Callable[[str], object], parallel: int
) -> Iterable[tuple[str, object]]:
    """(item, result or the BandkitError it raised), as each one ends."""
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = {pool.submit(work, item): item for item in items}
        for future in as_completed(futures):
            try:
                yield futures[future], future.result()
            except (BandkitError, OSError) as exc:
                yield futures[future], exc


_PRINTING = threading.Lock()


def _agent_log(name: str) -> Log:
    """Progress of one agent's work, on stderr, each line whole and named."""

    def log(line: str) -> None:
        lines = line.removeprefix("provision: ").removeprefix(f"{name}: ").splitlines()
        with _PRINTING:
            sys.stderr.write("".join(f"fleet: {name}: {part}\n" for part in lines))
            sys.stderr.flush()

    return log


@dataclass
class Outcome:
    done: list[str] = dataclasses.field(default_factory=list)
    failed: list[str] = dataclasses.field(default_factory=list)

    def raise_failed(self, rerun: str) -> None:
        if self.failed:
            raise FleetError(
                f"{len(self.failed)} agent(s) failed:\n  "
                + "\n  ".join(self.failed)
                + f"\nfix what each says and re-run `{rerun}`"
            )


def up(
    fleet: Fleet,
    target: Target,
    *,
    runtime: str,
    prune: bool = False,
    dry_run: bool = False,
    parallel: int = 4,
    out: Log = print,
) -> Outcome:
    """Plan, print the plan, act (unless `dry_run`); every agent's failure is reported."""
    file = fleet.path.resolve()
    run_dir = target.run_dir
    want = wanted(fleet, runtime, run_dir)
    with Manifest.open(state_path(run_dir), secrets=[target.api_key]) as state:
        members = _members(state)
        other = {m.details.get("file") for m in members.values()} - {str(file)}
        if other:
            raise FleetError(
                f"{run_dir} holds the fleet of {sorted(str(o) for o in other)[0]}; run "
                "`uv run invoke fleet.down` first, or give another --run-dir"
            )
        outsiders = [
            w.name
            for w in want
            if w.name not in members and commands.manifest_path(run_dir, w.name).exists()
        ]
        if outsiders:
            raise FleetError(
                f"{', '.join(outsiders)}: provisioned in {run_dir} outside the fleet "
                "(kit.provision); `uv run invoke kit.unprovision --name NAME` it first, or "
                "rename the agent in the file"
            )
        statuses = dict(
            _in_parallel(members, lambda n: _status(members[n].details, n, run_dir), parallel)
        )
        have = {
            name: Have(m.details, _as_status(statuses.get(name))) for name, m in members.items()
        }
        steps = plan(want, have, prune=prune)
        acting = [s for s in steps if s.action in ACTING]
        out(f"fleet.up: plan for {file.name} on {want[0].runtime if want else runtime}:")
        for step in steps:
            out(step.line())
        outcome = Outcome()
        if dry_run:
            out("fleet.up: --dry-run: nothing changed")
            return outcome
        if not acting:
            out(f"fleet.up: nothing to do: {len(want)} agent(s) as the file says")
            return outcome
        by_name = {s.name: s for s in acting}
        for step in acting:
            if step.want is not None:
                state.record(Kind.MEMBER, step.name, **step.want.details(file), done="")
        on_sbx = [s.want.image for s in acting if s.want is not None and _on_sbx(s.want)]
        stage_templates(state, run_dir, on_sbx)

        images = Staged()

        def work(name: str) -> object:
            step = by_name[name]
            if step.action is Action.REMOVE or step.action is Action.REPLACE:
                failed = remove(name, target)
                if failed or step.action is Action.REMOVE:
                    return failed
            assert step.want is not None
            return apply(
                step.want, target, base=step.want.image, log=_agent_log(name), images=images
            )

        began = time.monotonic()
        for name, result in _in_parallel(by_name, work, parallel):
            member = state.find(Kind.MEMBER, name)
            if isinstance(result, Exception):
                outcome.failed.append(f"{name}: {result}")
            elif isinstance(result, list):
                if result:
                    outcome.failed.append(f"{name}: " + "; ".join(result))
                elif member is not None:
                    state.forget(member)
                    outcome.done.append(name)
                    out(f"fleet.up: {name}: removed")
            elif isinstance(result, Applied) and member is not None:
                state.update(
                    member,
                    done="yes",
                    agent_id=result.agent_id,
                    runs=result.runs,
                    source=result.source,
                    seen=_now(),
                )
                outcome.done.append(name)
                out(
                    f"fleet.up: {name}: {by_name[name].action.value}d, connected "
                    f"({result.seconds:.1f}s)"
                )
        out(
            f"fleet.up: {len(outcome.done)} of {len(acting)} change(s) made in "
            f"{time.monotonic() - began:.1f}s"
        )
    _tidy(run_dir)
    outcome.raise_failed("uv run invoke fleet.up")
    return outcome


def _members_left(run_dir: Path) -> bool:
    path = state_path(run_dir)
    return path.exists() and any(r.kind is Kind.MEMBER for r in Manifest.read(path))


def _on_sbx(want: Wanted) -> bool:
    return want.runtime == RuntimeName.SBX.value


def _tidy(run_dir: Path) -> None:
    """Remove the fleet's directories once nothing is left in them (the workspaces
    copied out of images once no member is left)."""
    if not _members_left(run_dir):
        remove_path(run_dir / "fleet" / "images")
    for path in (run_dir / "fleet" / "workspaces", run_dir / "fleet"):
        try:
            path.rmdir()
        except OSError:
            return


def down(target: Target, *, parallel: int = 4, out: Log = print) -> Outcome:
    """Remove every member (its agent, sandbox, key, rooms, copy) and forget it."""
    outcome = Outcome()
    path = state_path(target.run_dir)
    if not path.exists():
        out(f"fleet.down: no fleet in {target.run_dir}; nothing to remove")
        return outcome
    with Manifest.open(path, secrets=[target.api_key]) as state:
        members = _members(state)
        for name, result in _in_parallel(members, lambda n: remove(n, target), parallel):
            if isinstance(result, list) and not result:
                state.forget(members[name])
                outcome.done.append(name)
                out(f"fleet.down: {name}: removed")
            else:
                why = "; ".join(result) if isinstance(result, list) else str(result)
                outcome.failed.append(f"{name}: {why}")
        if not _members(state):  # the last sandbox made on them is gone
            outcome.failed += [
                f"sbx template: {line}" for line in _remove_templates(state, target.run_dir)
            ]
    _tidy(target.run_dir)
    outcome.raise_failed("uv run invoke fleet.down")
    out(f"fleet.down: {len(outcome.done)} agent(s) removed; agent images stay as build cache")
    return outcome


def rollout(
    target: Target,
    image: str,
    *,
    parallel: int = 2,
    out: Log = print,
    apply_one: Callable[[Wanted, str, Log], Applied] | None = None,
) -> Outcome:
    """Move every member onto `image`, `parallel` at a time; a batch is connected again
    before the next starts. A failed batch is put back on the image it ran, then this
    stops (FleetError): the batches before it stay on `image`."""
    images = Staged()
    make = apply_one or (lambda w, base, log: apply(w, target, base=base, log=log, images=images))
    outcome = Outcome()
    path = state_path(target.run_dir)
    if not path.exists():
        raise FleetError(f"no fleet in {target.run_dir}; run `uv run invoke fleet.up` first")
    with Manifest.open(path, secrets=[target.api_key]) as state:
        members = [m for m in _members(state).values() if m.details.get("done") == "yes"]
        local = [m.key for m in members if m.details.get("runtime") == RuntimeName.LOCAL.value]
        if local:
            raise FleetError(
                f"{', '.join(local)} run on the local runtime, which runs no image; "
                "fleet.rollout is for docker, swarm and sbx fleets"
            )
        if apply_one is None and not image_exists(image):
            raise FleetError(f"image {image} is not on this machine; build or load it first")
        if apply_one is None and any(_on_sbx(Wanted.of(m)) for m in members):
            stage_templates(state, target.run_dir, [image])
        size = max(1, parallel)
        batches = [members[i : i + size] for i in range(0, len(members), size)]
        for number, batch in enumerate(batches, 1):
            names = [m.key for m in batch]
            out(f"fleet.rollout: batch {number}/{len(batches)}: {', '.join(names)} -> {image}")
            began = time.monotonic()
            by_name = {m.key: m for m in batch}
            results = dict(
                _in_parallel(names, functools.partial(_move, make, by_name, image), size)
            )
            failed = {n: r for n, r in results.items() if not isinstance(r, Applied)}
            if failed:
                _roll_back(state, batch, make, size, out)
                outcome.failed += [f"{n}: {r}" for n, r in sorted(failed.items())]
                raise FleetError(
                    f"batch {number} failed, put back on the image it ran:\n  "
                    + "\n  ".join(outcome.failed)
                    + f"\nthe {len(outcome.done)} agent(s) of the batches before it run {image}"
                )
            for name, result in results.items():
                assert isinstance(result, Applied)
                state.update(
                    by_name[name],
                    image=image,
                    runs=result.runs,
                    agent_id=result.agent_id,
                    seen=_now(),
                )
                outcome.done.append(name)
            out(
                f"fleet.rollout: batch {number}/{len(batches)} connected again in "
                f"{time.monotonic() - began:.1f}s"
            )
    out(f"fleet.rollout: {len(outcome.done)} agent(s) on {image}")
    return outcome


def _move(
    make: Callable[[Wanted, str, Log], Applied],
    members: Mapping[str, Resource],
    image: str,
    name: str,
) -> Applied:
    """Apply member `name` on `image` ("" = the image its member record names)."""
    member = members[name]
    return make(Wanted.of(member), image or member.details["image"], _agent_log(name))


def _roll_back(
    state: Manifest,
    batch: Sequence[Resource],
    make: Callable[[Wanted, str, Log], Applied],
    size: int,
    out: Log,
) -> None:
    """Put each agent of `batch` back on the image it ran before (its member's `image`)."""
    by_name = {m.key: m for m in batch}
    for name, result in _in_parallel(by_name, functools.partial(_move, make, by_name, ""), size):
        if isinstance(result, Applied):
            state.update(by_name[name], runs=result.runs, seen=_now())
            out(f"fleet.rollout: {name}: back on {by_name[name].details['image']}")
        else:
            state.update(by_name[name], done="")  # the next fleet.up makes it again
            out(f"fleet.rollout: {name}: could not be put back ({result}); run fleet.up")


@dataclass(frozen=True)
class Row:
    name: str
    runtime: str
    node: str
    state: str
    connected: str  # yes, no, or ? (the platform did not answer)
    seen: str
    image: str

    HEADER = ("NAME", "RUNTIME", "NODE", "STATE", "CONNECTED", "LAST SEEN", "IMAGE")

    def cells(self) -> tuple[str, ...]:
        return (
            self.name,
            self.runtime,
            self.node,
            self.state,
            self.connected,
            self.seen,
            self.image,
        )


def status(run_dir: Path, target: Target | None, *, parallel: int = 8) -> list[Row]:
    """One row per member, read without taking the fleet's lock (changes nothing)."""
    path = state_path(run_dir)
    members = {r.key: r for r in Manifest.read(path) if r.kind is Kind.MEMBER}

    def row(name: str) -> Row:
        d = members[name].details
        state = _status(d, name, run_dir)
        node = "-"
        if state is not SandboxStatus.ABSENT:
            try:
                node = get_runtime(d["runtime"], run_dir=run_dir / "runtimes").where(name)
            except BandkitError:
                node = "?"
        connected = _connected(name, d.get("agent_id", ""), target) if target else "?"
        seen = "now" if connected == "yes" else d.get("seen", "") or "never"
        image = "-"
        if d.get("runs"):
            try:
                image = image_id(d["runs"]).removeprefix("sha256:")[:12]
            except BandkitError:
                image = "missing"
        return Row(name, d.get("runtime", "?"), node, state.value, connected, seen, image)

    rows = {n: r for n, r in _in_parallel(members, row, parallel) if isinstance(r, Row)}
    return [rows[n] for n in members if n in rows]


def _connected(name: str, agent_id: str, target: Target) -> str:
    path = commands.manifest_path(target.run_dir, name)
    if not agent_id or not path.exists():
        return "no"
    room = next(
        (
            r.details.get("id", "")
            for r in Manifest.read(path)
            if r.kind is Kind.ROOM
            and r.key == room_key(target.rest_url, agent_check.home_title(name))
        ),
        "",
    )
    if not room:
        return "no"
    try:
        online = agent_check.is_online(
            api_key=target.api_key, rest_url=target.rest_url, room_id=room, agent_id=agent_id
        )
    except Exception:  # the platform did not answer: unknown, not "no"
        return "?"
    return "yes" if online else "no"
