"""Self-registration: register an agent with a user key, keep its key on the host.

Flow (`provision`), each step recorded in the run manifest before it happens:

1. read `agent.id` from the workspace's band.yaml and ask the runtime whether the sandbox
   name already holds a Band secret for the host; decide with `decide` (the four-case
   table below);
2. register on the platform's human API (`POST /api/v1/me/agents/register`, no retries:
   the key is shown once and there is no idempotency key); on a client-side timeout look
   the agent up by exact name and report CONFIRMED_ABSENT / CONFIRMED_PRESENT / UNKNOWN;
3. write `agent.id` into band.yaml with a ruamel round trip (comments and layout kept)
   and re-validate the file with the launcher's own schema (recorded as a `agent-id`
   entry before the agent's, so `kit.unprovision` puts the placeholder back only once
   the agent and everything made after it are gone);
4. store the key as a sandbox-scoped secret with the `proxy-managed` placeholder (stdin
   wherever the runtime's CLI allows);
5. separately, create the sandbox unless `--no-create` or the runtime already lists it.

| local id | scoped secret | outcome |
|---|---|---|
| yes | yes | skip registration, return the id |
| no | yes | refuse: the name collides with someone else's sandbox |
| yes | no | refuse: half-done (manual recovery, never a second agent) |
| no | no | register, write agent.id, inject the key |

Errors are `ProvisionError` with a message that never holds a key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

from bandkit.errors import BandkitError, conceal
from bandkit.kit.band_yaml import (
    BandYamlError,
    band_yaml,
    has_real_id,
    read_agent_id,
    write_agent_id,
)
from bandkit.kit.platform_api import (
    PLATFORM_ERRORS,
    RegistrationFailed,
    RegistrationTimeout,
    TooManyPages,
    describe_failure,
    find_agent_by_name,
    register_agent,
)
from bandkit.manifest import Kind, Manifest
from bandkit.runtimes.base import (
    PROXY_MANAGED_PLACEHOLDER,
    Limits,
    Runtime,
    RuntimeName,
    SandboxError,
    SandboxSpec,
    Secret,
)
from bandkit.runtimes.boxnet import ProxyError, band_key_scopes

DEFAULT_BAND_HOST = "**.band.ai"
DEFAULT_TIMEOUT_S = 120.0
TIMEOUT_RECOVERY_CHECK_S = 30.0
BAND_KEY_ENV = "BAND_API_KEY"
DESCRIPTION_LIMITS = (10, 500)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class ProvisionError(BandkitError):
    """Provisioning stopped; the message says why and what to do (never a key)."""


class Decision(StrEnum):
    SKIP = "skip"  # already registered and injected
    REGISTER = "register"
    COLLISION = "collision"
    HALF_DONE = "half-done"


class TimeoutOutcome(StrEnum):
    CONFIRMED_ABSENT = "confirmed_absent"
    CONFIRMED_PRESENT = "confirmed_present"
    UNKNOWN = "unknown"


def decide(*, has_local_id: bool, has_secret: bool) -> Decision:
    """The four-case idempotency table (pure)."""
    if has_local_id and has_secret:
        return Decision.SKIP
    if has_secret:
        return Decision.COLLISION
    if has_local_id:
        return Decision.HALF_DONE
    return Decision.REGISTER


@dataclass(frozen=True)
class ProvisionRequest:
    name: str  # sandbox name; scopes the secret and the idempotency checks
    description: str
    workspace: Path
    rest_url: str
    ws_url: str = ""  # the platform's WebSocket URL, handed to the sandbox with rest_url
    agent_name: str = ""  # default: name
    host: str = ""  # default: **.band.ai, or the REST host for any other deployment
    create: bool = True
    kit: str | None = None
    image: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    recovery_timeout_s: float = TIMEOUT_RECOVERY_CHECK_S
    env: dict[str, str] = field(default_factory=dict)
    # What the records made on this platform say about it (`platforms.PlatformRef.details`:
    # a local emulator's id, state file and run directory), beside its URL.
    platform: dict[str, str] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)  # a fleet file's resources, placement
    mount_at: Path | None = None  # docker, swarm: the workspace's path inside the sandbox

    @property
    def display_name(self) -> str:
        return self.agent_name or self.name

    @property
    def secret_host(self) -> str:
        if self.host:
            return self.host
        hostname = urlsplit(self.rest_url).hostname or ""
        return DEFAULT_BAND_HOST if hostname.endswith("band.ai") else hostname

    def key_scopes(self) -> tuple[str, ...]:
        """Where the agent key may go through the credential proxy: the platform's agent
        REST API and its socket, by origin and path (`boxnet.band_key_scopes`)."""
        try:
            return band_key_scopes(self.rest_url, self.ws_url)
        except ProxyError as exc:
            raise ProvisionError(str(exc)) from None


@dataclass
class ProvisionResult:
    agent_id: str
    registered: bool
    created: bool
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the flow


def check_request(request: ProvisionRequest, api_key: str, runtime: Runtime) -> None:
    low, high = DESCRIPTION_LIMITS
    if not low <= len(request.description) <= high:
        raise ProvisionError(
            f"--description must be {low}-{high} characters (the platform's rule), "
            f"got {len(request.description)}"
        )
    if not api_key:
        raise ProvisionError(
            "a user API key is required: set BAND_API_KEY_USER or answer the prompt "
            "(a register_only-scoped key is recommended)"
        )
    if request.create and runtime.name is RuntimeName.SBX and not request.kit:
        raise ProvisionError("--kit is required to create an sbx sandbox (or pass --no-create)")
    request.key_scopes()  # a URL the key cannot be scoped to fails before registering
    try:
        band_yaml(request.workspace)
    except BandYamlError as exc:
        raise ProvisionError(str(exc)) from None


def sandbox_env(request: ProvisionRequest) -> tuple[dict[str, str], tuple[str, ...]]:
    """Env and egress a sandbox needs for this platform (the emulator is plain http).

    The sandbox always gets the endpoints of the platform provisioning used, whatever the
    workspace's band.yaml says (env outranks band.yaml in the launcher).
    """
    env = dict(request.env)
    env["BAND_REST_URL"] = request.rest_url
    if request.ws_url:
        env["BAND_WS_URL"] = request.ws_url
    parts = urlsplit(request.rest_url)
    egress: tuple[str, ...] = ()
    if parts.hostname in LOOPBACK:
        from launcher.constants import INSECURE_ENDPOINTS_ENV

        if parts.scheme == "http":
            env.setdefault(INSECURE_ENDPOINTS_ENV, "1")
        egress = (f"{parts.hostname}:{parts.port}",) if parts.port else (parts.hostname or "",)
    return env, egress


def provision(
    request: ProvisionRequest,
    *,
    api_key: str,
    runtime: Runtime,
    manifest: Manifest | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> ProvisionResult:
    check_request(request, api_key, runtime)
    host = request.secret_host
    try:
        existing = read_agent_id(request.workspace)
        has_secret = runtime.has_secret(request.name, host)
    except (BandYamlError, SandboxError) as exc:
        raise ProvisionError(str(exc)) from None
    decision = decide(has_local_id=has_real_id(existing), has_secret=has_secret)
    log(
        f"provision: {request.name}: local id {'set' if has_real_id(existing) else 'unset'}, "
        f"secret {'present' if has_secret else 'absent'} -> {decision.value}"
    )
    if decision is Decision.COLLISION:
        raise ProvisionError(
            f"a Band secret is already stored for sandbox name {request.name!r} (host {host}) "
            f"but {request.workspace}/band.yaml has no agent.id; registering would overwrite "
            "that sandbox's key (set-custom is create-or-update). Pick another --name, or "
            "restore this sandbox's agent.id in band.yaml"
        )
    if decision is Decision.HALF_DONE:
        raise ProvisionError(
            f"band.yaml names agent {existing!r} but no Band secret is stored for sandbox "
            f"{request.name!r} (host {host}): a previous run stopped after registering. Its "
            "key was shown once and cannot be fetched again: re-inject it yourself if you "
            "kept it, or delete that agent on the platform, clear agent.id and re-run with a "
            "new --agent-name (nothing was changed)"
        )
    registered = decision is Decision.REGISTER
    agent_id = existing
    if registered:
        agent_id = _register_and_inject(request, api_key, runtime, manifest, host, log)
    result = ProvisionResult(agent_id=agent_id, registered=registered, created=False)
    result.created = _ensure_created(request, runtime, log)
    return result


def _register_and_inject(
    request: ProvisionRequest,
    api_key: str,
    runtime: Runtime,
    manifest: Manifest | None,
    host: str,
    log: Callable[[str], None],
) -> str:
    name = request.display_name
    key = f"{request.rest_url}#{name}"
    if manifest is not None:
        unfinished = manifest.find(Kind.AGENT, key)
        if unfinished is not None:
            known = f" (id {unfinished.details['id']})" if "id" in unfinished.details else ""
            raise ProvisionError(
                f"a previous run registered or tried to register agent {name!r}{known} and "
                "stopped before storing its key, which cannot be fetched again; run "
                f"`invoke kit.unprovision --name {request.name}` to remove it, then re-run"
            )
        # The band.yaml edit is recorded before the agent, so a reverse teardown resets
        # agent.id only after the agent (and everything made after it) is gone.
        manifest.record(Kind.AGENT_ID, str(band_yaml(request.workspace).resolve()))
        manifest.record(
            Kind.AGENT,
            key,
            name=name,
            url=request.rest_url,
            description=request.description,
            **request.platform,
        )
    log(f"provision: registering agent {name!r} on {request.rest_url}")
    try:
        agent_id, agent_key = asyncio.run(
            register_agent(
                api_key=api_key,
                rest_url=request.rest_url,
                name=name,
                description=request.description,
                timeout_s=request.timeout_s,
            )
        )
    except RegistrationFailed as exc:
        _settle(manifest, key, None)  # the platform answered no: nothing was created
        raise ProvisionError(str(exc)) from None
    except RegistrationTimeout:
        outcome, found, why = asyncio.run(
            _after_timeout(api_key, request.rest_url, name, request.recovery_timeout_s)
        )
        if outcome is not TimeoutOutcome.UNKNOWN:
            _settle(manifest, key, found)
        message = describe_timeout(outcome, name, found, request.timeout_s, why=why)
        raise ProvisionError(message) from None
    conceal(agent_key)  # shown once, kept as a secret: never in a BANDKIT_DEBUG report
    _settle(manifest, key, agent_id)
    log(f"provision: registered agent {agent_id}")
    if manifest is not None:
        written = manifest.find(Kind.AGENT_ID, str(band_yaml(request.workspace).resolve()))
        if written is not None:
            manifest.update(written, id=agent_id)
    try:
        write_agent_id(request.workspace, agent_id)
        runtime.set_secret(
            request.name,
            Secret(
                BAND_KEY_ENV,
                (host,),
                agent_key,
                placeholder=PROXY_MANAGED_PLACEHOLDER,
                scopes=request.key_scopes(),
            ),
        )
    except (BandYamlError, SandboxError, OSError) as exc:
        message = str(exc).replace(agent_key, "***")
        raise ProvisionError(
            f"registered agent {agent_id} but could not keep its key: {message}. The key "
            "cannot be fetched again: delete that agent on the platform and re-run with a "
            "new --agent-name"
        ) from None
    log(f"provision: key stored as a {runtime.name.value} secret scoped to {request.name}")
    return agent_id


def _settle(manifest: Manifest | None, key: str, agent_id: str | None) -> None:
    """Record what registration produced: its id, or drop the entry when none exists
    (with the band.yaml entry recorded for it: nothing was written there either)."""
    entry = manifest.find(Kind.AGENT, key) if manifest is not None else None
    if manifest is None or entry is None:
        return
    if agent_id:
        manifest.update(entry, id=agent_id)
        return
    index = manifest.resources.index(entry)
    manifest.forget(entry)
    before = manifest.resources[index - 1] if index > 0 else None
    if before is not None and before.kind is Kind.AGENT_ID and "id" not in before.details:
        manifest.forget(before)


async def _after_timeout(
    api_key: str, rest_url: str, name: str, bound_s: float
) -> tuple[TimeoutOutcome, str | None, str]:
    """The lookup by name: (outcome, the agent's id when CONFIRMED_PRESENT, why the outcome
    is UNKNOWN when the network or the platform failed the lookup). Anything else is a
    bug: it surfaces."""
    try:
        found = await asyncio.wait_for(
            find_agent_by_name(api_key=api_key, rest_url=rest_url, name=name), timeout=bound_s
        )
    except TimeoutError:
        return TimeoutOutcome.UNKNOWN, None, f"the lookup got no answer within {bound_s:g}s"
    except PLATFORM_ERRORS as exc:
        return TimeoutOutcome.UNKNOWN, None, f"the lookup failed: {describe_failure(exc)}"
    except TooManyPages as exc:
        return TimeoutOutcome.UNKNOWN, None, f"the lookup failed: {exc}"
    if found is None:
        return TimeoutOutcome.CONFIRMED_ABSENT, None, ""
    return TimeoutOutcome.CONFIRMED_PRESENT, found, ""


def describe_timeout(
    outcome: TimeoutOutcome, name: str, agent_id: str | None, timeout_s: float, *, why: str = ""
) -> str:
    """The error for a registration that timed out; `why` says why UNKNOWN."""
    base = f"registration timed out after {timeout_s:g}s"
    match outcome:
        case TimeoutOutcome.CONFIRMED_ABSENT:
            return f"{base}; CONFIRMED_ABSENT: no agent named {name!r} exists, safe to retry"
        case TimeoutOutcome.CONFIRMED_PRESENT:
            return (
                f"{base}; CONFIRMED_PRESENT: agent {name!r} (id {agent_id}) was registered "
                "anyway and its one-time key is lost: delete it on the platform and retry "
                "with a new --agent-name"
            )
        case TimeoutOutcome.UNKNOWN:
            return (
                f"{base}; UNKNOWN: could not confirm whether {name!r} was registered"
                f"{f' ({why})' if why else ''}; check the platform for an agent with that "
                "name before retrying"
            )


def _ensure_created(
    request: ProvisionRequest, runtime: Runtime, log: Callable[[str], None]
) -> bool:
    if not request.create:
        return False
    try:
        if request.name in runtime.list():
            log(f"provision: sandbox {request.name} already exists; not creating it")
            return False
        env, egress = sandbox_env(request)
        log(f"provision: creating {runtime.name.value} sandbox {request.name}")
        runtime.create(
            SandboxSpec(
                name=request.name,
                workspaces=(request.workspace.resolve(),),
                kit=request.kit,
                image=request.image,
                env=env,
                egress=egress,
                limits=request.limits,
                mount_at=request.mount_at,
            )
        )
    except SandboxError as exc:
        raise ProvisionError(str(exc)) from None
    return True
