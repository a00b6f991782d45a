"""The platform the meeting runs on: the local emulator, or a real Band deployment.

`local` (the default): the emulator `platform.up` started in this run directory is reused
and left running; when none runs (or the one there died), the demo starts one
(`bandkit.emulator.service.up_again`: a platform that was there comes back on its
address, from its state),
records it in the manifest first, and the teardown stops it again. Its user key is read
from the emulator's 0600 key file and never printed. Should that emulator die before the
teardown (`kill -9`, OOM), the teardown starts it again from its state, on the same
address (`revive_own_emulator`), removes the demo's agents and room there, then stops it.
What the run records on a platform names it (`Target.platform`: a local emulator's id,
state file and run directory; `bandkit.kit.platforms`).

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

from bandkit.demo import DemoError
from bandkit.emulator import service
from bandkit.kit.platforms import identify
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
    record: service.RunRecord | None = field(default=None, repr=False)  # the local emulator
    platform: dict[str, str] = field(default_factory=dict)  # `PlatformRef.details()`

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
        record, alive = service.last_record(run_dir)
        if record is None or not alive:  # none, or one that died: the demo starts its own
            entry = manifest.record(
                Kind.PROCESS, emulator_key(run_dir), service=EMULATOR_SERVICE, run_dir=str(run_dir)
            )
            record, started = service.up_again(run_dir)  # a dead one's address and state
            if not started:  # another task started it meanwhile: not ours to stop
                manifest.forget(entry)
        key = service.read_user_key(record)
    except service.PlatformError as exc:
        raise DemoError(f"the local platform: {exc}") from None
    template = env.get(UI_TEMPLATE_VAR) or DEFAULT_UI_TEMPLATE
    ref = identify(record.rest_url, key, run_dir=run_dir)
    return Target(
        kind, record.rest_url, record.ws_url, key, template, record=record, platform=ref.details()
    )


def stop_emulator(resource: Resource) -> None:
    """The remover of a recorded emulator: stop it (already stopped is success)."""
    service.down(Path(resource.details["run_dir"]))


def revive_own_emulator(manifest: Manifest, run_dir: Path) -> str:
    """Start the emulator this run started again when it died before the teardown, from
    its state and on the same address, so the teardown can remove the demo's agents and
    room there (the teardown stops it at the end, as always). Returns what was done, for
    the log ("" when nothing was)."""
    if manifest.find(Kind.PROCESS, emulator_key(run_dir)) is None:
        return ""
    try:
        record, alive = service.last_record(run_dir)
        if alive or service.state_identity(run_dir / service.STATE_FILE) is None:
            return ""  # running; or no state to come back from (its records are moot)
        record, _ = service.up_again(run_dir)
    except service.PlatformError as exc:
        return f"the demo's platform stopped and could not start again ({exc})"
    return (
        f"the demo's platform had stopped; started it again from its state on "
        f"{record.rest_url} to remove what the run made there (stopped again at the end)"
    )


def user_key_for_teardown(info_platform: str, run_dir: Path, env: Mapping[str, str]) -> str:
    """The user key `demo.down` removes platform resources with: a stopped local
    platform's too (its key file stays), so the teardown can tell what its records mean."""
    if info_platform == PlatformKind.REAL.value:
        check_real_env(env)
        return env["BAND_API_KEY_USER"]
    try:
        record, _ = service.last_record(run_dir)
        if record is not None:
            return service.read_user_key(record)
    except service.PlatformError as exc:
        raise DemoError(f"the local platform: {exc}") from None
    try:  # stopped by `platform.down`: its key file stays beside its state
        return (run_dir / service.KEY_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return ""  # it never ran here: nothing of the run can be on it
