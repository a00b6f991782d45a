"""What `invoke kit.provision` / `kit.unprovision` call: platform, key, runtime, manifest.

Platform choice, written once: `--rest-url`, else `BAND_REST_URL`, else the local
platform started by `invoke platform.up` (its URL and user key file), else production.
User key: `BAND_API_KEY_USER`, else the local platform's key file when that platform is
used, else an interactive prompt (never argv). Each run's manifest lives at
`<run_dir>/provision/<name>/manifest.json`; `unprovision` removes exactly what it lists
(sandbox, scoped secret, policy rules, rooms, the platform agent), then puts the
starter placeholder back into band.yaml's agent.id once all of that is gone, and
deletes the manifest when clean.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from bandkit.emulator import service
from bandkit.errors import conceal
from bandkit.kit import agent_check
from bandkit.kit.band_yaml import BandYamlError, reset_agent_id
from bandkit.kit.platform_api import delete_agent, find_agents_by_name
from bandkit.kit.platforms import PlatformRef, Probe, identify
from bandkit.kit.provision import ProvisionError, ProvisionRequest, ProvisionResult, provision
from bandkit.kit.rooms import made_after, room_remover
from bandkit.manifest import (
    Kind,
    Manifest,
    ManifestError,
    Remover,
    Resource,
    TeardownReport,
    teardown,
)
from bandkit.runtimes.base import Runtime, SandboxError, SandboxStatus, validate_name
from bandkit.runtimes.select import get_runtime, removers
from bandkit.terminal import printable

USER_KEY_ENV = "BAND_API_KEY_USER"
REST_URL_ENV = "BAND_REST_URL"
WS_URL_ENV = "BAND_WS_URL"
WS_PATH = "/api/v1/socket/websocket"
LOG_TAIL_LINES = 15


@dataclass(frozen=True)
class PlatformChoice:
    rest_url: str
    user_key: str  # may be "" (then prompt)
    local: bool
    ws_url: str = ""  # "" = derived from rest_url (ws_url_for)
    running: bool = True  # False: the local platform of the run dir stopped (stopped_ok)

    @property
    def websocket(self) -> str:
        return self.ws_url or ws_url_for(self.rest_url)


def ws_url_for(rest_url: str) -> str:
    """The platform's WebSocket URL: BAND_WS_URL, else the REST origin's socket path."""
    if os.environ.get(WS_URL_ENV):
        return os.environ[WS_URL_ENV]
    parts = urlsplit(rest_url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    return urlunsplit((scheme, parts.netloc, WS_PATH, "", ""))


def choose_platform(rest_url: str, run_dir: Path, *, stopped_ok: bool = False) -> PlatformChoice:
    """The platform a command talks to (see the module docstring). A local platform that
    stopped is an error, unless `stopped_ok` (teardown, status, resume: they work out
    what a stopped platform means for each record, with its key file)."""
    from launcher.constants import DEFAULT_REST_URL

    env_key = os.environ.get(USER_KEY_ENV, "")
    url = rest_url or os.environ.get(REST_URL_ENV, "")
    if url:
        return PlatformChoice(url, env_key, local=False)
    try:
        record, alive = service.last_record(run_dir)
        if record is not None and not alive and not stopped_ok:
            service.running(run_dir)  # raises: says it stopped and how to start it again
        if record is not None:
            key = env_key or service.read_user_key(record)
            return PlatformChoice(
                record.rest_url, key, local=True, ws_url=record.ws_url, running=alive
            )
    except service.PlatformError as exc:
        raise ProvisionError(str(exc)) from None
    return PlatformChoice(DEFAULT_REST_URL, env_key, local=False)


def user_key(choice: PlatformChoice, prompt: Callable[[str], str] = getpass.getpass) -> str:
    if choice.user_key:
        return choice.user_key
    if not sys.stdin.isatty():
        raise ProvisionError(
            f"no user key: set {USER_KEY_ENV} (a register_only-scoped key is recommended); "
            "keys are never taken from the command line"
        )
    key = prompt(f"Band user API key for {choice.rest_url}: ").strip()
    conceal(key)  # never in a BANDKIT_DEBUG report
    return key


def manifest_path(run_dir: Path, name: str) -> Path:
    return run_dir / "provision" / name / "manifest.json"


def run(
    request: ProvisionRequest,
    *,
    runtime: str,
    run_dir: Path,
    api_key: str,
    log: Callable[[str], None],
    wait_s: float = agent_check.CONNECT_TIMEOUT_S,
) -> ProvisionResult:
    """Provision, then (unless `--no-create` or `wait_s` is 0) prove the agent connected.

    A failed wait raises with the tail of the sandbox's logs and keeps everything
    recorded, so `kit.unprovision` cleans up.
    """
    try:
        with Manifest.open(manifest_path(run_dir, request.name), secrets=[api_key]) as manifest:
            rt = get_runtime(runtime, run_dir=run_dir / "runtimes", manifest=manifest)
            result = provision(request, api_key=api_key, runtime=rt, manifest=manifest, log=log)
            for warning in rt.warnings:
                log(f"WARNING: {warning}")
            if request.create and wait_s > 0:
                _prove_connected(request, result, rt, manifest, api_key, wait_s, log)
            return result
    except (ManifestError, SandboxError) as exc:
        raise ProvisionError(str(exc)) from None


def remove_sandbox(name: str, *, run_dir: Path, api_key: str) -> int:
    """Remove what the runtimes made for the sandbox provisioned as `name` (every part),
    keeping the agent, its stored key, its rooms and agent.id: `run` then makes it again
    (another image, workspace or limits) for the same agent. Returns how many parts it
    removed; a part that cannot be removed is an error, and stays recorded."""
    path = manifest_path(run_dir, name)
    if not path.exists():
        return 0
    try:
        with Manifest.open(path, secrets=[api_key]) as manifest:
            used = {r.details["runtime"] for r in manifest.resources if "runtime" in r.details}
            runtimes = [
                get_runtime(n, run_dir=run_dir / "runtimes", manifest=manifest)
                for n in sorted(used)
            ]
            only = (Kind.SANDBOX,)
            report = teardown(manifest, removers(runtimes), redact=[api_key], only=only)
    except (ManifestError, SandboxError) as exc:
        raise ProvisionError(str(exc)) from None
    if not report.clean:
        failed = "; ".join(report.lines())
        raise ProvisionError(f"could not remove the sandbox of {name}: {failed}")
    return len(report.removed)


def _prove_connected(
    request: ProvisionRequest,
    result: ProvisionResult,
    rt: Runtime,
    manifest: Manifest,
    api_key: str,
    wait_s: float,
    log: Callable[[str], None],
) -> None:
    room = agent_check.home_room(
        manifest,
        api_key=api_key,
        rest_url=request.rest_url,
        name=request.name,
        agent_id=result.agent_id,
        platform=request.platform,
    )
    log(f"provision: waiting up to {wait_s:.0f}s for agent {result.agent_id} to connect")
    try:
        seconds = agent_check.wait_online(
            api_key=api_key,
            rest_url=request.rest_url,
            room_id=room,
            agent_id=result.agent_id,
            timeout_s=wait_s,
            progress=lambda line: log(f"provision: {line}"),
            alive=lambda: rt.status(request.name) is SandboxStatus.RUNNING,
        )
    except agent_check.AgentCheckError as exc:
        raise ProvisionError(
            f"{exc}; everything made so far is recorded (`uv run invoke kit.unprovision "
            f"--name {request.name}` removes it).\n{log_tail(rt, request.name, [api_key])}"
        ) from None
    log(f"provision: agent {result.agent_id} connected in {seconds:.1f}s")


def log_tail(rt: Runtime, name: str, redact: Sequence[str]) -> str:
    """The last lines of a sandbox's startup and launcher logs, secrets replaced by ***,
    control characters escaped (the agent wrote them: `terminal.printable`)."""
    try:
        logs = rt.logs(name)
    except SandboxError as exc:
        return f"(no logs: {exc})"
    parts = []
    for label, text in (("startup.log", logs.startup), ("launcher.log", logs.launcher)):
        lines = text.strip().splitlines()[-LOG_TAIL_LINES:] or ["(empty)"]
        parts.append(f"--- {label} (last {len(lines)} lines)\n" + "\n".join(lines))
    if placed := rt.scheduler_report(name):
        parts.append(f"--- {rt.name.value} tasks (latest last)\n" + "\n".join(placed))
    out = "\n".join(parts)
    for value in redact:
        if value:
            out = out.replace(value, "***")
    return printable(out)


def agent_remover(api_key: str) -> Callable[[Resource], None]:
    def remove(resource: Resource) -> None:
        url, name = resource.details["url"], resource.details["name"]
        agent_id = resource.details.get("id", "")
        if not agent_id:
            found = asyncio.run(find_agents_by_name(api_key=api_key, rest_url=url, name=name))
            ours = [
                a
                for a in found
                if "description" in resource.details
                and a.description == resource.details["description"]
                and made_after(resource.recorded_at, a.inserted_at)
            ]
            if len(ours) != 1:
                if not found:
                    return  # never created: nothing to remove
                raise ProvisionError(
                    f"an agent named {name!r} exists on {url} but nothing proves this run "
                    "registered it (description or creation time differ, or several match); "
                    "kept it. Delete it on the platform if it is yours, then re-run"
                )
            agent_id = ours[0].id
        asyncio.run(delete_agent(api_key=api_key, rest_url=url, agent_id=agent_id))

    return remove


def agent_id_remover(manifest: Manifest) -> Callable[[Resource], None]:
    """Reset the agent.id provisioning wrote, once everything recorded after it is gone.

    The entry sits before the agent's, so in a reverse teardown it comes after the
    sandbox, the stored key and the agent itself. Any of those still listed means
    that removal failed in this pass: then the id stays (the agent or its key may
    still exist) and the failure says so; a re-run resets it once they are gone.
    """

    def remove(resource: Resource) -> None:
        entries = list(manifest.resources)
        later = entries[entries.index(resource) + 1 :] if resource in entries else []
        recorded = resource.details.get("id", "")
        if later:
            refs = ", ".join(r.ref for r in later)
            raise ProvisionError(
                f"kept agent.id {recorded or '(none written)'} in {resource.key}: not "
                f"removed yet: {refs}; fix that and re-run kit.unprovision"
            )
        if recorded:
            reset_agent_id(Path(resource.key), recorded)

    return remove


def platform_removers(
    api_key: str, manifest: Manifest, probe: Probe | None = None
) -> dict[Kind, Remover]:
    """Removers for what lives on the platform or in band.yaml (agents, rooms, agent.id).

    Agents and rooms are removed on the platform they were recorded on, wherever it
    answers now; on a platform that is gone they are cleared, on one that does not answer
    they are kept unless the probe forgets them (`platforms.Probe.guard`)."""
    probe = probe or Probe(api_key)
    return {
        Kind.AGENT: probe.guard(agent_remover(api_key)),
        Kind.ROOM: probe.guard(room_remover(api_key)),
        Kind.AGENT_ID: agent_id_remover(manifest),
    }


def unprovision(name: str, *, run_dir: Path, api_key: str, forget: bool = False) -> TeardownReport:
    """Remove what the provisioning runs for `name` recorded, with the runtimes they used.
    `forget` (--forget-unreachable): records on a platform that does not answer are
    cleared (each listed) instead of kept."""
    path = manifest_path(run_dir, name)
    if not path.exists():
        raise ProvisionError(f"no provisioning manifest for {name!r} at {path}; nothing to remove")
    rerun = f"re-run `uv run invoke kit.unprovision --name {name}`"
    probe = Probe(api_key, forget=forget, rerun=rerun)
    try:
        with Manifest.open(path, secrets=[api_key]) as manifest:
            used = {r.details["runtime"] for r in manifest.resources if "runtime" in r.details}
            runtimes = [
                get_runtime(n, run_dir=run_dir / "runtimes", manifest=manifest)
                for n in sorted(used)
            ]
            table = {**removers(runtimes), **platform_removers(api_key, manifest, probe)}
            return teardown(manifest, table, redact=[api_key])
    except (ManifestError, SandboxError, BandYamlError) as exc:
        raise ProvisionError(str(exc)) from None


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(
    *,
    name: str,
    description: str,
    workspace: Path,
    agent_name: str,
    host: str,
    rest_url: str,
    create: bool,
    kit: str | None,
    runtime: str,
    timeout: float,
    run_dir: Path,
    wait: float = agent_check.CONNECT_TIMEOUT_S,
    image: str | None = None,
) -> str:
    """The `kit.provision` task: returns the agent id (the task prints only that)."""
    _valid(name)
    choice = choose_platform(rest_url, run_dir)
    if choice.local:
        _stderr(f"provision: using the local platform at {choice.rest_url}")
    key = user_key(choice)
    platform = identify(choice.rest_url, key, run_dir=run_dir)
    if platform.emulator:
        _stderr(f"provision: the platform is local emulator {platform.platform_id}")
    request = ProvisionRequest(
        name=name,
        description=description,
        workspace=workspace,
        rest_url=choice.rest_url,
        ws_url=choice.websocket,
        agent_name=agent_name,
        host=host,
        create=create,
        kit=kit,
        image=image,
        timeout_s=timeout,
        platform=platform.details(),
    )
    result = run(request, runtime=runtime, run_dir=run_dir, api_key=key, log=_stderr, wait_s=wait)
    return result.agent_id


def recorded_agent(manifest: Manifest, platform: PlatformRef) -> Resource | None:
    """The agent a manifest recorded on `platform`: by its identity when both have one
    (it may have moved ports), else by URL."""
    for resource in manifest.resources:
        if resource.kind is not Kind.AGENT:
            continue
        recorded = resource.details.get("platform", "")
        if platform.emulator and recorded:
            if recorded == platform.platform_id:
                return resource
        elif resource.details.get("url") == platform.rest_url:
            return resource
    return None


def _valid(name: str) -> None:
    """Refuse a bad sandbox name before it reaches any path (the manifest's, too)."""
    try:
        validate_name(name)
    except SandboxError as exc:
        raise ProvisionError(str(exc)) from None


def main_unprovision(
    *, name: str, rest_url: str, run_dir: Path, forget: bool = False
) -> tuple[list[str], bool]:
    _valid(name)
    choice = choose_platform(rest_url, run_dir, stopped_ok=True)
    report = unprovision(name, run_dir=run_dir, api_key=user_key(choice), forget=forget)
    return report.lines(), report.clean


def main_ping(*, name: str, rest_url: str, run_dir: Path, timeout: float) -> agent_check.Pong:
    """The `kit.ping` task: mention the agent provisioned as `name` in its home room."""
    _valid(name)
    choice = choose_platform(rest_url, run_dir)
    key = user_key(choice)
    path = manifest_path(run_dir, name)
    if not path.exists():
        raise ProvisionError(
            f"nothing provisioned as {name!r} in {run_dir}; run `uv run invoke kit.provision "
            f"--name {name} ...` first"
        )
    platform = identify(choice.rest_url, key, run_dir=run_dir)
    with Manifest.open(path, secrets=[key]) as manifest:
        agent = recorded_agent(manifest, platform)
        if agent is None or not agent.details.get("id"):
            raise ProvisionError(
                f"{name!r} has no agent registered on {choice.rest_url}; check --rest-url "
                "or re-run kit.provision"
            )
        agent_id, agent_name = agent.details["id"], agent.details.get("name", name)
        room = agent_check.home_room(
            manifest,
            api_key=key,
            rest_url=choice.rest_url,
            name=name,
            agent_id=agent_id,
            platform=platform.details(),
        )
        rt_name = next(
            (r.details["runtime"] for r in manifest.resources if "runtime" in r.details), ""
        )
        try:
            return agent_check.ping(
                api_key=key,
                rest_url=choice.rest_url,
                room_id=room,
                agent_id=agent_id,
                agent_name=agent_name,
                timeout_s=timeout,
            )
        except agent_check.AgentCheckError as exc:
            tail = ""
            if rt_name:
                rt = get_runtime(rt_name, run_dir=run_dir / "runtimes", manifest=manifest)
                tail = "\n" + log_tail(rt, name, [key])
            raise ProvisionError(f"{exc}{tail}") from None
