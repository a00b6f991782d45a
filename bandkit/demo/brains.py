"""What the brains add to each sandbox, host side: `check` before anything is made,
`prepare` once the run is recorded.

* scripted: `UV_NO_DEFAULT_GROUPS=true` only (the workspace's `brains` dependency group
  stays uninstalled; the deterministic adapter needs band-sdk alone).
* stub: the LLM stub on this host (`stub_brains`), one canary key per role.
* real: the providers, with the host's keys. `ANTHROPIC_API_KEY` for Maya (PM, Claude SDK)
  and `OPENAI_API_KEY` for Sam (Dev, Codex) and Jordan (Architect, CrewAI). The model APIs
  are `https://api.anthropic.com` and `https://api.openai.com/v1`, unless the host sets
  `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` (a gateway: https, or plain http to loopback
  only). `PM_MODEL`, `DEV_MODEL` (default `gpt-5.5`) and `ARCHITECT_MODEL` pass through.

Stub and real then share every step (`wire`). On the local runtime the Dev's pinned codex
CLI is installed once (`codex_local`); docker's is in the CLI image. Each sandbox gets its
role's base URL (its credential proxy rewrites it to itself) and its client settings. The
key goes in as a secret under `*_PROXY_KEY` with a random placeholder, scoped to the API's
host. The sandbox sees the placeholder only; the proxy puts the key on the wire. Egress
admits the API's host and port. No key is ever in a sandbox's env, argv or files, and each
is hidden from every line the demo prints.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from bandkit.demo import DemoError, codex_local, stub_brains
from bandkit.demo.layout import DemoLayout
from bandkit.errors import BandkitError
from bandkit.manifest import Manifest
from bandkit.runtimes import boxnet
from bandkit.runtimes.base import RuntimeName, Secret
from examples.docker_demo.cast import Role
from examples.docker_demo.scenario import Scenario

Log = Callable[[str], None]
FRAMEWORKS: Final = frozenset({"stub", "real"})
PROVIDER: Final = {Role.PM: "anthropic", Role.DEV: "openai", Role.ARCHITECT: "openai"}
KEY_ENV: Final = {"anthropic": "ANTHROPIC_PROXY_KEY", "openai": "OPENAI_PROXY_KEY"}
BASE_ENV: Final = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
PLACEHOLDER_PREFIX: Final = {"anthropic": "sk-ant-placeholder-", "openai": "sk-placeholder-"}
# Real brains: the host's keys and (unless overridden) the providers' public APIs.
REAL_KEY_ENV: Final = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
REAL_BASE_URL: Final = {
    "anthropic": "https://api.anthropic.com",
    "openai": "https://api.openai.com/v1",
}
MODEL_ENV: Final = {Role.PM: "PM_MODEL", Role.DEV: "DEV_MODEL", Role.ARCHITECT: "ARCHITECT_MODEL"}
REAL_DEV_MODEL: Final = "gpt-5.5"  # CodexAdapterConfig needs one; band-sdk's own example
STUB_DEV_MODEL: Final = "stub-model"  # unknown to codex: the Band tools stay top-level
ROLE_ENV: Final = {
    Role.PM: {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ENABLE_TOOL_SEARCH": "false"},
    Role.DEV: {},
    Role.ARCHITECT: {
        "CREWAI_DISABLE_TELEMETRY": "true",
        "OTEL_SDK_DISABLED": "true",
        "CREWAI_TRACING_ENABLED": "false",
    },
}


@dataclass(frozen=True)
class Endpoint:
    """One role's model API as the host reaches it, and the key that API takes."""

    provider: str
    base_url: str
    key: str = field(repr=False)


@dataclass(frozen=True)
class Brains:
    kind: str
    env: dict[Role, dict[str, str]] = field(default_factory=dict)
    secrets: dict[Role, tuple[Secret, ...]] = field(default_factory=dict, repr=False)
    egress: dict[Role, tuple[str, ...]] = field(default_factory=dict)
    journal: Path | None = None  # the stub's JSONL request log
    hidden: tuple[str, ...] = field(default=(), repr=False)  # keys no output may show


def real_endpoints(env: Mapping[str, str]) -> dict[Role, Endpoint]:
    """Each role's provider API and key from the host's environment; DemoError naming
    what is missing or unusable (never a key's value)."""
    names = sorted(set(REAL_KEY_ENV.values()))
    missing = [name for name in names if not env.get(name, "").strip()]
    if missing:
        raise DemoError(
            f"--brains real needs {' and '.join(missing)} in the environment (the host keeps "
            "them; the sandboxes get placeholders). Without keys: --brains stub"
        )
    out: dict[Role, Endpoint] = {}
    for role, provider in PROVIDER.items():
        name = BASE_ENV[provider]
        url = (env.get(name) or REAL_BASE_URL[provider]).rstrip("/")
        try:
            boxnet.upstream_origin(name, url)
        except BandkitError as exc:
            raise DemoError(f"--brains real: {exc}") from None
        out[role] = Endpoint(provider, url, env[REAL_KEY_ENV[provider]].strip())
    return out


def check(brains: str, runtime: RuntimeName, env: Mapping[str, str] | None = None) -> None:
    """What the framework brains need before anything is made (preflight)."""
    if brains not in FRAMEWORKS:
        return
    if runtime is RuntimeName.SBX:
        raise DemoError(
            f"--brains {brains} does not run on sbx yet: pass --runtime local or docker"
        )
    if brains == "real":
        real_endpoints(env or {})
    # local: the pinned codex CLI is fetched at `prepare` (`codex_local`); docker: the CLI
    # image carries it (`cli_image`).


def prepare(
    brains: str,
    *,
    layout: DemoLayout,
    manifest: Manifest,
    scenario: Scenario,
    topic: str,
    log: Log,
    runtime: RuntimeName = RuntimeName.LOCAL,
    env: Mapping[str, str] | None = None,
) -> Brains:
    """What `brains` add to each sandbox; stub brains start the stub (recorded first)."""
    if brains == "scripted":
        return Brains(brains, env={role: {"UV_NO_DEFAULT_GROUPS": "true"} for role in Role})
    if brains not in FRAMEWORKS:
        raise DemoError(f"--brains {brains} is not supported here")
    host_env = env or {}
    journal: Path | None = None
    codex = None
    if runtime is RuntimeName.LOCAL:
        codex = codex_local.ensure_codex(layout.box_root / "cli", log=log)
    if brains == "stub":
        url, keys, journal = stub_brains.start(
            layout, manifest, scenario, topic, providers=PROVIDER, log=log
        )
        paths = {"anthropic": url, "openai": f"{url}/v1"}
        endpoints = {r: Endpoint(PROVIDER[r], paths[PROVIDER[r]], keys[r]) for r in Role}
        models = {Role.DEV: STUB_DEV_MODEL}
    else:
        endpoints = real_endpoints(host_env)
        models = {role: host_env[name] for role, name in MODEL_ENV.items() if host_env.get(name)}
        models.setdefault(Role.DEV, REAL_DEV_MODEL)
        apis = sorted({e.base_url for e in endpoints.values()})
        log(f"brains: the providers' APIs with this host's keys ({', '.join(apis)})")
    wired = wire(brains, endpoints, models=models, journal=journal)
    if codex is not None:  # else the image's `codex` on PATH (the adapter's default)
        wired.env[Role.DEV]["CODEX_COMMAND"] = f"{codex} {codex_local.CODEX_ARGS}"
    return wired


def wire(
    kind: str,
    endpoints: Mapping[Role, Endpoint],
    *,
    models: Mapping[Role, str],
    journal: Path | None = None,
) -> Brains:
    """Per role: base URL, client settings, model, the key as a placeholder-only secret
    scoped to the API's origin and model paths, and egress to that host and port."""
    env: dict[Role, dict[str, str]] = {}
    held: dict[Role, tuple[Secret, ...]] = {}
    egress: dict[Role, tuple[str, ...]] = {}
    for role in Role:
        endpoint = endpoints[role]
        parts = urlsplit(endpoint.base_url)
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        env[role] = {BASE_ENV[endpoint.provider]: endpoint.base_url, **ROLE_ENV[role]}
        if role in models:
            env[role][MODEL_ENV[role]] = models[role]
        placeholder = PLACEHOLDER_PREFIX[endpoint.provider] + secrets.token_hex(8)
        name = BASE_ENV[endpoint.provider]
        scopes = boxnet.key_scopes(name, endpoint.base_url)  # this API's origin and paths
        held[role] = (
            Secret(KEY_ENV[endpoint.provider], (host,), endpoint.key, placeholder, scopes),
        )
        netloc = f"[{host}]" if ":" in host else host
        egress[role] = (f"{netloc}:{port}",)
    hidden = tuple(dict.fromkeys(e.key for e in endpoints.values()))
    return Brains(kind, env=env, secrets=held, egress=egress, journal=journal, hidden=hidden)
