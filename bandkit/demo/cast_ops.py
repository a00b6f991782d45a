"""The three agents on the platform and in their sandboxes: sweep, provision, create, wait.

* `sweep_stale`: delete agents an earlier, unrecorded run left behind: only agents named
  like a demo member whose description carries the `[band-demo]` marker. A listing the
  network or the platform fails is reported and skipped (the registration that follows
  says if a name is still taken); a failed delete stops the sweep with what it was.
* `provision_cast`: `bandkit.kit.provision` for each role without creating the sandbox:
  register, write agent.id into the staged band.yaml, store the key as a proxy-managed
  secret scoped to the sandbox name (all recorded in the manifest first).
* `agent_images`: on docker and swarm, each role's agent image (`bandkit.image.agent`: the sandbox
  image with the staged workspace's locked dependencies synced in), built at once, so the
  sandboxes start with no download; a later run with the same inputs builds nothing.
* `stage_images`: those images made ready where the runtime starts sandboxes, together
  (swarm: one archive loaded into each node).
* `create_sandboxes`: one sandbox per role with the platform's env and egress, plus what
  the brains add (`brains.Brains`: the model's env, its key as a secret, its egress).
* `wait_connected`: until every agent's startup log says it is connected, with a deadline
  and a progress line; a sandbox that stops first fails at once with its log's tail.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

from bandkit.demo import DemoError
from bandkit.dockercli import ImageError
from bandkit.image import agent as agent_image
from bandkit.image.built import BuiltImage
from bandkit.kit.platform_api import (
    NO_RETRY,
    PLATFORM_ERRORS,
    client,
    delete_agent,
    describe_failure,
)
from bandkit.kit.provision import ProvisionError, ProvisionRequest, provision, sandbox_env
from bandkit.manifest import Manifest
from bandkit.runtimes.base import Runtime, SandboxError, SandboxSpec, SandboxStatus, Secret
from bandkit.terminal import printable
from examples.docker_demo.cast import CAST, DEMO_NAMES, READY_LINE, Role, is_demo_agent

Log = Callable[[str], None]
CONNECT_TIMEOUT_S: Final = 300.0  # a cold first run syncs three venvs
PROGRESS_EVERY_S: Final = 5.0
PROBE_EVERY_S: Final = 0.2
LOG_TAIL_LINES: Final = 15


async def _sweep(api_key: str, rest_url: str, log: Log) -> list[str]:
    stale: list[tuple[str, str]] = []
    async with client(api_key, rest_url) as rest:
        for name in sorted(DEMO_NAMES):
            try:
                response = await rest.human_api_agents.list_my_agents(
                    name=name, request_options=NO_RETRY
                )
            except PLATFORM_ERRORS as exc:  # tolerated: registration reports a taken name
                why = printable(describe_failure(exc))
                log(f"sweep: cannot list agents named {name!r} ({why}); skipped")
                continue
            stale += [
                (str(a.id), a.name)
                for a in response.data or []
                if is_demo_agent(a.name, getattr(a, "description", None))
            ]
    for agent_id, name in stale:
        await delete_agent(api_key=api_key, rest_url=rest_url, agent_id=agent_id)
        log(f"sweep: deleted stale demo agent {name} ({agent_id})")
    return [agent_id for agent_id, _ in stale]


def sweep_stale(*, api_key: str, rest_url: str, log: Log) -> list[str]:
    """Delete stale demo agents; returns their ids."""
    try:
        return asyncio.run(_sweep(api_key, rest_url, log))
    except PLATFORM_ERRORS as exc:
        raise DemoError(f"sweeping stale demo agents failed: {describe_failure(exc)}") from None


def requests_for(
    workspaces: Mapping[Role, Path],
    rest_url: str,
    *,
    env: Mapping[Role, Mapping[str, str]] | None = None,
    platform: Mapping[str, str] | None = None,
) -> dict[Role, ProvisionRequest]:
    """One provisioning request per role; `env` is what the brains add to its sandbox,
    `platform` what the agents' records say about the platform (`PlatformRef.details`)."""
    env = env or {}
    return {
        role: ProvisionRequest(
            name=CAST[role].sandbox,
            description=CAST[role].description,
            workspace=workspaces[role],
            rest_url=rest_url,
            agent_name=CAST[role].name,
            create=False,
            env=dict(env.get(role, {})),
            platform=dict(platform or {}),
        )
        for role in Role
    }


def provision_cast(
    requests: Mapping[Role, ProvisionRequest],
    *,
    api_key: str,
    runtime: Runtime,
    manifest: Manifest,
    log: Log,
) -> dict[Role, str]:
    """Register the three agents and keep their keys; returns each role's agent id."""
    ids: dict[Role, str] = {}
    for role, request in requests.items():
        try:
            result = provision(request, api_key=api_key, runtime=runtime, manifest=manifest)
        except ProvisionError as exc:
            raise DemoError(f"provisioning {CAST[role].name}: {exc}") from None
        ids[role] = result.agent_id
        log(f"provision: {CAST[role].name} is agent {result.agent_id} ({request.name})")
    return ids


def agent_images(
    requests: Mapping[Role, ProvisionRequest], *, base: str, log: Log
) -> dict[Role, str]:
    """Each role's agent image on `base`, the three built at once."""

    def one(role: Role) -> tuple[Role, BuiltImage]:
        try:
            request = requests[role]
            built = agent_image.build(request.workspace, base=base, env=request.env, progress=log)
            return role, built
        except ImageError as exc:
            raise DemoError(f"the agent image of {CAST[role].name}: {exc}") from None

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        made = dict(pool.map(one, requests))
    for role, image in made.items():
        log(f"agent image: {CAST[role].name}: {image.line()}")
    return {role: image.tag for role, image in made.items()}


def stage_images(runtime: Runtime, images: Mapping[Role, str | None]) -> None:
    """The agent images made ready where the runtime starts sandboxes, all at once (on
    swarm: one archive loaded into each node, their shared layers once)."""
    try:
        runtime.stage_images([image for image in images.values() if image])
    except SandboxError as exc:
        raise DemoError(f"staging the agent images on {runtime.name.value}: {exc}") from None


def create_sandboxes(
    requests: Mapping[Role, ProvisionRequest],
    *,
    runtime: Runtime,
    kit: str | None,
    images: Mapping[Role, str | None],
    log: Log,
    secrets: Mapping[Role, tuple[Secret, ...]] | None = None,
    egress: Mapping[Role, tuple[str, ...]] | None = None,
) -> None:
    """One sandbox per role; `secrets` and `egress` are what the brains add (the LLM)."""
    for role, request in requests.items():
        env, platform = sandbox_env(request)
        spec = SandboxSpec(
            name=request.name,
            workspaces=(request.workspace,),
            kit=kit,
            image=images.get(role),
            env=env,
            secrets=(secrets or {}).get(role, ()),
            egress=(*platform, *(egress or {}).get(role, ())),
        )
        try:
            runtime.create(spec)
        except SandboxError as exc:
            raise DemoError(f"creating the sandbox of {CAST[role].name}: {exc}") from None
        log(f"sandbox: {request.name} created ({runtime.name.value})")


def _tail(runtime: Runtime, sandbox: str, text: str, secrets: tuple[str, ...]) -> str:
    """The end of an agent's log (`text`) as the operator sees it, then what the runtime's
    scheduler says of its sandbox (`Runtime.scheduler_report`): secrets hidden, controls
    escaped."""
    tail = text.strip().splitlines()[-LOG_TAIL_LINES:]
    lines = "\n".join([*tail, *runtime.scheduler_report(sandbox)])
    for secret in secrets:
        if secret:
            lines = lines.replace(secret, "***")
    return printable(lines)


def wait_connected(
    runtime: Runtime,
    *,
    timeout_s: float = CONNECT_TIMEOUT_S,
    log: Log,
    redact: tuple[str, ...] = (),
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Block until all three agents are connected; returns the seconds it took."""
    start = clock()
    pending = {CAST[role].sandbox: CAST[role].name for role in Role}
    next_report = start + PROGRESS_EVERY_S
    while pending:
        for sandbox, name in list(pending.items()):
            startup = runtime.logs(sandbox).startup
            if READY_LINE in startup:
                del pending[sandbox]
                log(f"agents: {name} connected after {clock() - start:.1f} s")
            elif runtime.status(sandbox) is not SandboxStatus.RUNNING:
                raise DemoError(
                    f"{name}'s sandbox {sandbox} stopped before its agent connected; the "
                    f"end of its log:\n{_tail(runtime, sandbox, startup, redact)}"
                )
        now = clock()
        if pending and now - start > timeout_s:
            sandbox, name = next(iter(pending.items()))
            raise DemoError(
                f"not connected within {timeout_s:g} s: {', '.join(pending.values())}; the "
                f"end of {name}'s log:\n"
                f"{_tail(runtime, sandbox, runtime.logs(sandbox).startup, redact)}\n"
                "(re-run with --keep, then `uv run invoke demo.logs --role <role>`)"
            )
        if pending and now >= next_report:
            log(f"agents: waiting for {', '.join(pending.values())} ({now - start:.0f} s)")
            next_report = now + PROGRESS_EVERY_S
        if pending:
            sleep(PROBE_EVERY_S)
    return clock() - start
