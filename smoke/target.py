"""Where the smoke points: the platform (local emulator or a staging deployment) and its key.

Two kinds of platform:

- **local**: the kit's emulator, run as a background service (`bandkit.emulator.service`)
  in the smoke's `smoke-platform/` directory; the automated drills use its control API
  (`/_emulator/faults/drop`, `faults/pause`, `health`) and restart it from its state
  file on the same port (the platform-restart drill);
- **staging**: `BAND_REST_URL`, `BAND_WS_URL` and `BAND_API_KEY_USER` from the
  environment. The production guard refuses the SDK's own production endpoints, read
  from the installed SDK's settings defaults (`band.config.settings.PlatformSettings`),
  never a second typed copy.

The user key lives in memory only: it is never printed, logged or stored in the state.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from bandkit.emulator import service
from bandkit.errors import BandkitError

REST_URL_ENV = "BAND_REST_URL"
WS_URL_ENV = "BAND_WS_URL"
USER_KEY_ENV = "BAND_API_KEY_USER"
CONTROL_TIMEOUT_S = 10.0


class TargetError(BandkitError):
    """The platform cannot be used as asked; the message says why (never a key)."""


def production_endpoints() -> tuple[str, str]:
    """(REST, WebSocket) production defaults, read from the installed SDK's settings."""
    from band.config.settings import PlatformSettings

    fields = PlatformSettings.model_fields
    return str(fields["BAND_REST_URL"].default), str(fields["BAND_WS_URL"].default)


def _normal(url: str) -> tuple[str, str, int | None, str]:
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    return (parts.scheme.lower(), host, parts.port, parts.path.rstrip("/"))


def is_production(url: str) -> bool:
    """True when `url` names the same origin and path as one of the SDK's production URLs
    (or its host, whatever the path: the production REST default has no path)."""
    wanted = _normal(url)
    for default in production_endpoints():
        known = _normal(default)
        if wanted[1] == known[1] and wanted[2] == known[2]:
            return True
    return False


def guard(rest_url: str, ws_url: str) -> None:
    """Refuse missing endpoints and the SDK's production endpoints (staging only)."""
    if not rest_url or not ws_url:
        raise TargetError(
            f"set {REST_URL_ENV} and {WS_URL_ENV} to a staging deployment (the smoke never "
            "falls back to the SDK's production defaults)"
        )
    for name, url in ((REST_URL_ENV, rest_url), (WS_URL_ENV, ws_url)):
        if is_production(url):
            raise TargetError(f"{name} is the SDK's production endpoint; the smoke runs on staging")


@dataclass
class Target:
    rest_url: str
    ws_url: str
    user_key: str = field(repr=False)
    platform_dir: Path | None = None  # the local emulator's service directory

    @property
    def local(self) -> bool:
        return self.platform_dir is not None

    @property
    def kind(self) -> str:
        return "local platform" if self.local else "staging"

    # -- the local platform's control API (user key)
    def _control(self, method: str, path: str) -> dict[str, object]:
        if not self.local:
            raise TargetError(f"{path} needs the local platform's control API")
        try:
            response = httpx.request(
                method,
                f"{self.rest_url}/_emulator/{path}",
                headers={"x-api-key": self.user_key},
                timeout=CONTROL_TIMEOUT_S,
            )
        except httpx.HTTPError as exc:
            why = type(exc).__name__
            raise TargetError(f"the local platform does not answer {path}: {why}") from None
        if not response.is_success:
            raise TargetError(f"the local platform answered {path} with {response.status_code}")
        data: dict[str, object] = response.json()["data"]
        return data

    def health(self) -> dict[str, object]:
        return self._control("GET", "health")

    def drop_sockets(self) -> int:
        return int(str(self._control("POST", "faults/drop")["dropped"]))

    def pause(self, seconds: float) -> None:
        self._control("POST", f"faults/pause?seconds={seconds:g}")

    def wait_serving(self, timeout_s: float) -> float:
        """Seconds until the platform's health says `ok` (not paused); TargetError after."""
        started = time.monotonic()
        while True:
            try:
                if self.health().get("status") == "ok":
                    return time.monotonic() - started
            except TargetError:
                pass
            if time.monotonic() - started > timeout_s:
                raise TargetError(f"the local platform was not serving within {timeout_s:.0f}s")
            time.sleep(0.05)

    # -- restart (platform drill)
    def port(self) -> int:
        port = urlsplit(self.rest_url).port
        if port is None:
            raise TargetError("the local platform's URL has no port")
        return port

    def stop_platform(self) -> None:
        if self.platform_dir is None:
            raise TargetError("only the local platform can be stopped")
        service.down(self.platform_dir)

    def start_platform(self) -> None:
        """Start the local platform on the same port, from its state file."""
        if self.platform_dir is None:
            raise TargetError("only the local platform can be started")
        record, _ = service.up(self.platform_dir, port=self.port())
        if record.rest_url != self.rest_url:
            raise TargetError("the local platform came back on another URL")


def local_target(where: Path, *, start: bool) -> Target:
    """The smoke's own local platform, run in `where` (started there when `start`)."""
    try:
        record = service.running(where) if (where / service.RUN_FILE).exists() else None
        if record is None:
            if not start:
                raise TargetError(
                    "the smoke's local platform is not running; `invoke smoke.run` starts "
                    f"one, or set {REST_URL_ENV}/{WS_URL_ENV}/{USER_KEY_ENV} for staging"
                )
            record, _ = service.up(where)
        return Target(record.rest_url, record.ws_url, service.read_user_key(record), where)
    except service.PlatformError as exc:
        if start and "is not running" in str(exc):
            service.down(where)  # the stale run file of a platform that died
            record, _ = service.up(where)
            return Target(record.rest_url, record.ws_url, service.read_user_key(record), where)
        raise TargetError(str(exc)) from None


def staging_target() -> Target:
    rest, ws = os.environ.get(REST_URL_ENV, ""), os.environ.get(WS_URL_ENV, "")
    guard(rest, ws)
    key = os.environ.get(USER_KEY_ENV, "")
    if not key:
        raise TargetError(f"set {USER_KEY_ENV} (a staging user key; never on the command line)")
    return Target(rest.rstrip("/"), ws, key)


def choose(platform_dir: Path, *, start_local: bool) -> Target:
    """Staging when BAND_REST_URL is set, else the smoke's local platform."""
    if os.environ.get(REST_URL_ENV):
        return staging_target()
    return local_target(platform_dir, start=start_local)
