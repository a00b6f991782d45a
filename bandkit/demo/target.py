"""The platform the meeting runs on: the local emulator, or a real Band deployment.

`local` (the default): the emulator `platform.up` started in this run directory is reused
and left running; when none runs, the demo starts one (`bandkit.emulator.service.up`),
records it in the manifest first, and the teardown stops it again. Its user key is read
from the emulator's 0600 key file and never printed.

`real`: `BAND_REST_URL`, `BAND_WS_URL` and `BAND_API_KEY_USER` are all required (keys never
come from argv). The room page is `DEMO_UI_URL_TEMPLATE` (`{chat_id}` and `{rest_url}`
filled in), by default `{rest_url}/chat/{chat_id}`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Final

from bandkit.demo.errors import DemoError
from bandkit.emulator import service
from bandkit.manifest import Kind, Manifest, Resource
from examples.docker_demo.conductor import DEFAULT_UI_TEMPLATE

REAL_VARS: Final = ("BAND_REST_URL", "BAND_WS_URL", "BAND_API_KEY_USER")
UI_TEMPLATE_VAR: Final = "DEMO_UI_URL_TEMPLATE"
REAL_UI_TEMPLATE: Final = "{rest_url}/chat/{chat_id}"
EMULATOR_SERVICE: Final = "emulator"


class PlatformKind(StrEnum):
    LOCAL = "local"
    REAL = "real"


@dataclass(frozen=True)
class Target:
    kind: PlatformKind
    rest_url: str
    ws_url: str
    user_key: str = field(repr=False)
    ui_template: str

    @property
    def local(self) -> bool:
        return self.kind is PlatformKind.LOCAL


def platform_kind(choice: str) -> PlatformKind:
    try:
        return PlatformKind(choice)
    except ValueError:
        raise DemoError(f"--platform must be local or real, got {choice!r}") from None


def check_real_env(env: Mapping[str, str]) -> None:
    missing = [name for name in REAL_VARS if not env.get(name)]
    if missing:
        raise DemoError(
            f"--platform real needs {', '.join(missing)} in the environment (keys are never "
            "taken from the command line); or use --platform local"
        )


def emulator_key(run_dir: Path) -> str:
    return f"{EMULATOR_SERVICE}:{run_dir}"


def resolve(
    kind: PlatformKind, *, run_dir: Path, manifest: Manifest, env: Mapping[str, str]
) -> Target:
    """The platform to use; a local emulator started here is recorded before it starts."""
    if kind is PlatformKind.REAL:
        check_real_env(env)
        template = env.get(UI_TEMPLATE_VAR) or REAL_UI_TEMPLATE
        return Target(
            kind, env["BAND_REST_URL"], env["BAND_WS_URL"], env["BAND_API_KEY_USER"], template
        )
    try:
        record = service.running(run_dir)
        if record is None:
            entry = manifest.record(
                Kind.PROCESS, emulator_key(run_dir), service=EMULATOR_SERVICE, run_dir=str(run_dir)
            )
            record, started = service.up(run_dir)
            if not started:  # another task started it meanwhile: not ours to stop
                manifest.forget(entry)
        key = service.read_user_key(record)
    except service.PlatformError as exc:
        raise DemoError(f"the local platform: {exc}") from None
    template = env.get(UI_TEMPLATE_VAR) or DEFAULT_UI_TEMPLATE
    return Target(kind, record.rest_url, record.ws_url, key, template)


def stop_emulator(resource: Resource) -> None:
    """The remover of a recorded emulator: stop it (already stopped is success)."""
    service.down(Path(resource.details["run_dir"]))


def user_key_for_teardown(info_platform: str, run_dir: Path, env: Mapping[str, str]) -> str:
    """The user key `demo.down` removes platform resources with."""
    if info_platform == PlatformKind.REAL.value:
        check_real_env(env)
        return env["BAND_API_KEY_USER"]
    try:
        record = service.running(run_dir)
    except service.PlatformError as exc:
        raise DemoError(
            f"{exc}; the demo's agents and room live on that platform: start it again and "
            "re-run `uv run invoke demo.down`"
        ) from None
    if record is None:
        return ""  # nothing runs: the local platform's agents and rooms went with it
    return service.read_user_key(record)
