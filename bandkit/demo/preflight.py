"""What `demo.up` was asked for (`UpOptions`) and everything it checks before it changes
anything.

* options: `--brains scripted`, `stub` or `real` (its keys: `brains.check`), a known
  `--scenario`, a known `--platform` (real needs its three variables);
* the caps: `BreakerConfig()` defaults, then the scenario's `breaker:` overrides, then
  `DEMO_*` from the environment; `--headless` closes after the grace period, otherwise
  the floor opens after the verdict (unless `DEMO_HEADLESS`/`DEMO_INTERACTIVE` decide);
* stub and real brains: not on sbx yet; real needs ANTHROPIC_API_KEY and OPENAI_API_KEY
  (and usable base URLs, when the host overrides them); on docker the CLI image
  (`cli_image`; the local runtime fetches the pinned codex CLI itself);
* the runtime's tools: uv for local, a daemon and the kit image for docker, an
  initialised policy for sbx. `--runtime auto` picks as everywhere (sbx, else docker
  when a daemon answers, else local), except that a docker without the kit image falls
  back to local and says so: the offline default must run right after `uv sync`;
* no clobbering: no unfinished manifest, no `band-demo-*` sandbox in the runtime.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from bandkit.demo import DemoError, brains, cast_ops, cli_image
from bandkit.demo.layout import DemoLayout
from bandkit.demo.target import PlatformKind, check_real_env, platform_kind
from bandkit.emulator import service
from bandkit.image.facts import KIT_DIR, LOCAL_TAG
from bandkit.manifest import Manifest
from bandkit.runtimes.base import Runtime, RuntimeName, SandboxError
from bandkit.runtimes.select import AUTO, get_runtime, resolve_name
from examples.docker_demo.breaker import BreakerConfig
from examples.docker_demo.cast import DEFAULT_TOPIC, DEMO_SANDBOXES
from examples.docker_demo.scenario import DEFAULT_SCENARIO, Scenario, ScenarioError, load
from examples.docker_demo.settings import ENV_PREFIX, HEADLESS_VAR, breaker_config_from_env

BRAINS: Final = ("scripted", "stub", "real")
INTERACTIVE_VAR: Final = ENV_PREFIX + "INTERACTIVE"


@dataclass(frozen=True)
class UpOptions:
    """What `demo.up` was asked for, in one frozen record."""

    run_dir: Path
    platform: str = "local"
    runtime: str = "auto"
    brains: str = "scripted"
    scenario: str = DEFAULT_SCENARIO
    topic: str = DEFAULT_TOPIC
    headless: bool = False
    keep: bool = False
    connect_timeout_s: float = cast_ops.CONNECT_TIMEOUT_S


@dataclass(frozen=True)
class Plan:
    scenario: Scenario
    config: BreakerConfig
    platform: PlatformKind
    runtime: RuntimeName
    known_secrets: tuple[str, ...]  # keys known before the platform is chosen (to hide)
    notes: tuple[str, ...] = ()  # what preflight decided that the user should hear


def check_brains(choice: str) -> None:
    if choice not in BRAINS:
        raise DemoError(f"--brains must be one of {', '.join(BRAINS)}, got {choice!r}")


def breaker_config(scenario: Scenario, *, headless: bool, env: Mapping[str, str]) -> BreakerConfig:
    """Defaults, then the scenario's overrides, then DEMO_* (the one precedence rule)."""
    merged = {**scenario.breaker_env()}
    merged.update({k: v for k, v in env.items() if k.startswith(ENV_PREFIX) and v.strip()})
    if headless:
        merged[HEADLESS_VAR] = "1"
    elif HEADLESS_VAR not in merged and INTERACTIVE_VAR not in merged:
        merged[INTERACTIVE_VAR] = "1"
    try:
        return breaker_config_from_env(merged)
    except ValueError as exc:
        raise DemoError(str(exc)) from None


def check(options: UpOptions, env: Mapping[str, str]) -> Plan:
    check_brains(options.brains)
    try:
        scenario = load(options.scenario)
    except ScenarioError as exc:
        raise DemoError(f"--scenario: {exc}") from None
    kind = platform_kind(options.platform)
    secrets: list[str] = []
    if kind is PlatformKind.REAL:
        check_real_env(env)
        secrets.append(env["BAND_API_KEY_USER"])
    key_file = Path(options.run_dir) / service.KEY_FILE
    if kind is PlatformKind.LOCAL and key_file.is_file():
        secrets.append(key_file.read_text(encoding="utf-8").strip())
    if not options.topic.strip():
        raise DemoError("--topic must not be empty")
    if options.brains == "real":  # hidden from every line, even preflight's own errors
        secrets += [env.get(name, "") for name in brains.REAL_KEY_ENV.values()]
    runtime, notes = choose_runtime(
        options.runtime,
        image=cli_image.image_for(options.brains),
        skip_sbx=options.brains in brains.FRAMEWORKS,
    )
    brains.check(options.brains, runtime, env)
    config = breaker_config(scenario, headless=options.headless, env=env)
    return Plan(scenario, config, kind, runtime, tuple(s for s in secrets if s), notes)


def choose_runtime(
    choice: str,
    *,
    has_image: Callable[[str], bool] | None = None,
    image: str = LOCAL_TAG,
    skip_sbx: bool = False,
) -> tuple[RuntimeName, tuple[str, ...]]:
    """The runtime for `--runtime choice`, and notes on what auto decided. `skip_sbx`:
    the brains do not run on sbx yet, so auto passes over it (docker, else local)."""
    notes: tuple[str, ...] = ()
    try:
        name = resolve_name(choice)
        if choice == AUTO and skip_sbx and name is RuntimeName.SBX:
            name = resolve_name(AUTO, has_sbx=lambda: False)
            notes = (
                f"runtime auto: the stub and real brains do not run on sbx yet; using {name.value}",
            )
    except SandboxError as exc:
        raise DemoError(str(exc)) from None
    if choice != AUTO or name is not RuntimeName.DOCKER:
        return name, notes
    if has_image is None:
        from bandkit.dockercli import image_exists

        has_image = image_exists
    if has_image(image):
        return name, notes
    build = "uv run invoke image.build" if image == LOCAL_TAG else "uv run invoke demo.build"
    return RuntimeName.LOCAL, (
        f"runtime auto: docker answers but the image {image} is not built "
        f"(`{build}`); using the local runtime (no isolation)",
    )


CONTAINERS = (RuntimeName.DOCKER, RuntimeName.SWARM)  # the agent images are built on the host


def ready_runtime(name: RuntimeName, layout: DemoLayout, brains: str = "scripted") -> Runtime:
    """The runtime, once its tools answer (no manifest: nothing is recorded yet)."""
    try:
        runtime = get_runtime(name.value, run_dir=layout.runtimes)
        if name is RuntimeName.LOCAL:
            from bandkit.runtimes.hostbox import BoxError, find_uv

            try:
                find_uv()
            except BoxError as exc:
                raise DemoError(f"the local runtime: {exc}") from None
        elif name in CONTAINERS and cli_image.image_for(brains) != LOCAL_TAG:
            cli_image.require_image(brains)  # stub/real: the CLI image (kit + codex)
        elif name in CONTAINERS:
            from bandkit.dockercli import image_exists

            if not image_exists(LOCAL_TAG):
                raise DemoError(
                    f"the {name.value} runtime needs the kit image {LOCAL_TAG}: build it with "
                    "`uv run invoke image.build`, or pass --runtime local"
                )
        elif name is RuntimeName.SBX:
            from bandkit.runtimes.sbx import SbxRuntime, policy

            if isinstance(runtime, SbxRuntime):
                policy.require_ready(runtime.cli)
    except SandboxError as exc:
        raise DemoError(str(exc)) from None
    return runtime


def refuse_to_clobber(manifest: Manifest, runtime: Runtime) -> None:
    if manifest.resources:
        raise DemoError(
            f"an unfinished demo run is recorded in {manifest.path}: run "
            "`uv run invoke demo.down` first"
        )
    try:
        taken = sorted(DEMO_SANDBOXES & set(runtime.list()))
    except SandboxError as exc:  # fail closed: an unknown list is not an empty one
        raise DemoError(f"cannot list the {runtime.name.value} sandboxes: {exc}") from None
    if taken:
        raise DemoError(
            f"demo sandbox(es) {', '.join(taken)} already exist in the {runtime.name.value} "
            "runtime: run `uv run invoke demo.down` (or remove them) first"
        )


def kit_for(runtime: Runtime) -> str | None:
    """The kit an sbx sandbox is created from (the repo's kit directory)."""
    return str(KIT_DIR) if runtime.name is RuntimeName.SBX else None
