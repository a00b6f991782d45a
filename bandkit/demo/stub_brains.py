"""What the brains need on the host side: nothing for scripted, the LLM stub for stub.

`prepare(brains, ...)` returns a `Brains`: per role, the sandbox env, the sandbox-scoped
secrets and the extra egress. Scripted brains get `UV_NO_DEFAULT_GROUPS=true` (the
workspace's `brains` dependency group stays uninstalled). Stub brains, in order:

1. the scenario compiled into one stub script per role (`examples/docker_demo/brains_stub`)
   under `<run dir>/demo/llm/scripts/`;
2. a fresh 0600 key file there: one canary key per role, bound to the role's script
   (`anthropic:pm=`, `openai:dev=`, `openai:architect=`), held by the host only;
3. the stub (`bandkit.llm.service.up`), recorded in the manifest first as a tagged
   process so the teardown stops it; its request journal stays in `<run dir>/demo/llm/`;
4. on the local runtime, the pinned codex CLI, installed once (`npm ci --ignore-scripts`
   from `docker/band_python_kit/codex/package-lock.json`) into `<box root>/cli/`.

Each sandbox then gets its role's base URL (the box's credential proxy rewrites it to
itself), its client settings, and its canary as a secret under `*_PROXY_KEY`: the
sandbox sees the placeholder only; the proxy swaps it for the canary on the wire, so the
stub accepting the request proves custody. See examples/docker_demo/README.md.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from filelock import FileLock

from bandkit.demo.errors import DemoError
from bandkit.demo.layout import DemoLayout
from bandkit.errors import BandkitError
from bandkit.fsio import PRIVATE_DIR_MODE, write_private
from bandkit.image.facts import REPO_ROOT
from bandkit.llm import service
from bandkit.manifest import Kind, Manifest
from bandkit.runtimes.base import RuntimeName, Secret
from examples.docker_demo.brains_stub import stub_script
from examples.docker_demo.cast import Role
from examples.docker_demo.scenario import Scenario

Log = Callable[[str], None]
CODEX_LOCK_DIR: Final = REPO_ROOT / "docker" / "band_python_kit" / "codex"
NPM_TIMEOUT_S: Final = 600.0
CODEX_ARGS: Final = "app-server --listen stdio://"  # CODEX_COMMAND is the whole command
STUB_SERVICE: Final = "llm-stub"
PROVIDER: Final = {Role.PM: "anthropic", Role.DEV: "openai", Role.ARCHITECT: "openai"}
KEY_ENV: Final = {"anthropic": "ANTHROPIC_PROXY_KEY", "openai": "OPENAI_PROXY_KEY"}
PLACEHOLDER_PREFIX: Final = {"anthropic": "sk-ant-placeholder-", "openai": "sk-placeholder-"}
KEY_PREFIX: Final = {"anthropic": "sk-ant-stub-", "openai": "sk-stub-"}
ROLE_ENV: Final = {
    Role.PM: {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "ENABLE_TOOL_SEARCH": "false"},
    Role.DEV: {"DEV_MODEL": "stub-model"},
    Role.ARCHITECT: {
        "CREWAI_DISABLE_TELEMETRY": "true",
        "OTEL_SDK_DISABLED": "true",
        "CREWAI_TRACING_ENABLED": "false",
    },
}


@dataclass(frozen=True)
class Brains:
    kind: str
    env: dict[Role, dict[str, str]] = field(default_factory=dict)
    secrets: dict[Role, tuple[Secret, ...]] = field(default_factory=dict, repr=False)
    egress: dict[Role, tuple[str, ...]] = field(default_factory=dict)
    journal: Path | None = None  # the stub's JSONL request log
    canaries: tuple[str, ...] = field(default=(), repr=False)


def stub_dir(layout: DemoLayout) -> Path:
    return layout.home / "llm"


def stub_tag(layout: DemoLayout) -> str:
    return f"bandkit-demo-llm:{layout.run_dir}"


def check(brains: str, runtime: RuntimeName) -> None:
    """What stub brains need before anything is made (preflight)."""
    if brains != "stub":
        return
    if runtime is RuntimeName.SBX:
        raise DemoError("--brains stub does not run on sbx yet: pass --runtime local or docker")
    if runtime is not RuntimeName.LOCAL:
        return  # docker: the CLI image carries codex (`cli_image`)
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        raise DemoError(
            f"--brains stub needs {' and '.join(missing)} to install the pinned codex CLI "
            "(apt-get install nodejs npm)"
        )


def prepare(
    brains: str,
    *,
    layout: DemoLayout,
    manifest: Manifest,
    scenario: Scenario,
    topic: str,
    log: Log,
    runtime: RuntimeName = RuntimeName.LOCAL,
) -> Brains:
    """What `brains` add to each sandbox; stub brains start the stub (recorded first)."""
    if brains == "scripted":
        return Brains(brains, env={role: {"UV_NO_DEFAULT_GROUPS": "true"} for role in Role})
    if brains != "stub":
        raise DemoError(f"--brains {brains} is not supported here")
    codex = ensure_codex(layout.box_root / "cli", log=log) if runtime is RuntimeName.LOCAL else None
    keys = {role: KEY_PREFIX[PROVIDER[role]] + secrets.token_urlsafe(24) for role in Role}
    record = start_stub(layout, manifest, scenario, topic, keys)
    log(f"brains: LLM stub at {record.url} (request log {record.requests_file})")
    parts = urlsplit(record.url)
    host = parts.hostname or "127.0.0.1"
    env: dict[Role, dict[str, str]] = {}
    held: dict[Role, tuple[Secret, ...]] = {}
    for role in Role:
        provider = PROVIDER[role]
        base = {"anthropic": {"ANTHROPIC_BASE_URL": record.url}}.get(
            provider, {"OPENAI_BASE_URL": f"{record.url}/v1"}
        )
        env[role] = {**base, **ROLE_ENV[role]}
        placeholder = PLACEHOLDER_PREFIX[provider] + secrets.token_hex(8)
        held[role] = (Secret(KEY_ENV[provider], (host,), keys[role], placeholder),)
    if codex is not None:  # else the image's `codex` on PATH (the adapter's default)
        env[Role.DEV]["CODEX_COMMAND"] = f"{codex} {CODEX_ARGS}"
    egress: dict[Role, tuple[str, ...]] = {role: (f"{host}:{parts.port}",) for role in Role}
    return Brains(
        brains,
        env=env,
        secrets=held,
        egress=egress,
        journal=Path(record.requests_file),
        canaries=tuple(keys.values()),
    )


def start_stub(
    layout: DemoLayout,
    manifest: Manifest,
    scenario: Scenario,
    topic: str,
    keys: dict[Role, str],
) -> service.RunRecord:
    """Scripts, key file, then the stub (recorded before it starts)."""
    home = stub_dir(layout)
    scripts = home / "scripts"
    try:
        if service.running(home) is not None:
            service.down(home)  # left by a run that died: its keys are stale
        scripts.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        for old in scripts.glob("*.yaml"):
            old.unlink()
        for role in Role:
            data = stub_script(scenario, role, topic=topic)
            (scripts / f"{role.value}.yaml").write_text(json.dumps(data, indent=1) + "\n")
        lines = [f"{PROVIDER[role]}:{role.value}={keys[role]}" for role in Role]
        write_private(home / service.KEY_FILE, "\n".join(lines) + "\n")
        tag = stub_tag(layout)
        manifest.record(Kind.PROCESS, tag, service=STUB_SERVICE, run_dir=str(home))
        record, _ = service.up(home, scripts=[scripts], tag=tag)
    except (BandkitError, OSError) as exc:
        raise DemoError(f"the LLM stub: {exc}") from None
    return record


def ensure_codex(cache: Path, *, log: Log, lock_dir: Path = CODEX_LOCK_DIR) -> Path:
    """The pinned codex binary, `npm ci`-installed once per lock into `cache`."""
    lock = lock_dir / "package-lock.json"
    try:
        digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise DemoError(f"the codex pin {lock} is unreadable: {exc.strerror}") from None
    target = cache / f"codex-{digest}"
    cache.mkdir(mode=0o755, parents=True, exist_ok=True)
    with FileLock(str(cache / ".lock"), timeout=NPM_TIMEOUT_S):
        if not (target / ".complete").exists():
            log(f"brains: installing the pinned codex CLI into {target} (once)")
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(mode=0o755)
            for name in ("package.json", "package-lock.json"):
                shutil.copyfile(lock_dir / name, target / name)
            argv = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
            try:
                done = subprocess.run(
                    argv,
                    cwd=target,
                    capture_output=True,
                    text=True,
                    timeout=NPM_TIMEOUT_S,
                    check=False,
                    stdin=subprocess.DEVNULL,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise DemoError(f"npm ci for the codex CLI failed: {exc}") from None
            if done.returncode != 0:
                tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
                raise DemoError(
                    f"npm ci for the codex CLI failed (exit {done.returncode}):\n{tail}"
                )
            (target / ".complete").write_text("ok\n", encoding="utf-8")
    found = sorted(target.glob("node_modules/@openai/codex-*/vendor/*/bin/codex"))
    if len(found) != 1:
        raise DemoError(f"expected one codex binary under {target}, found {len(found)}")
    return found[0]
