"""Which platform a record lives on, and whether that platform is still there.

Records (the provisioning and demo manifests) name the platform an agent or a room lives
on by identity, not only by its URL: `PlatformRef.details()` adds `platform` (a local
emulator's id, made with its state and kept in its state file), `platform_state` (that
state file; absent when it kept its state in memory only) and `platform_run_dir` (the run
directory of a `platform.up` platform, which `kit.resume` starts again). A real
deployment has no id: its URL is its identity. `identify` asks a platform at record time
(`GET /_emulator/health`, user key; a real deployment does not answer it).

`Probe.standing(ref)` says where a recorded platform stands, once per platform per
command:

| what the probe finds | standing |
|---|---|
| it answers with the recorded id (a real deployment: at all) | UP, where it answers now |
| an emulator answers there with another id | GONE: the records' state was replaced |
| no answer, and it kept its state in memory only | GONE |
| no answer, and its state file is deleted or now holds another id | GONE |
| no answer, and its state file still holds its id | DOWN: `platform.up` brings it back |
| a real deployment does not answer | DOWN: it may come back |

A GONE platform's records are moot: `Probe.guard` clears them (`manifest.Cleared`) and
says why. A DOWN one's are kept, with a message that says exactly that, unless the
operator passes `--forget-unreachable` (`forget=True`), which clears each one and names
it in the report. No message holds a key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from bandkit.emulator import service
from bandkit.errors import BandkitError
from bandkit.manifest import Cleared, Remover, Resource

PROBE_TIMEOUT_S = 5.0
LOOPBACK = ("127.0.0.1", "localhost", "::1")
FORGET_FLAG = "--forget-unreachable"


class PlatformDown(BandkitError):
    """The platform a record lives on does not answer but may come back; kept."""


class Reach(StrEnum):
    UP = "up"
    DOWN = "down"  # does not answer, may come back: records kept
    GONE = "gone"  # its state is gone: records moot


@dataclass(frozen=True)
class PlatformRef:
    """A recorded platform: its URL then, and for a local emulator its identity."""

    rest_url: str
    platform_id: str = ""  # an emulator's id; "" for a real deployment (or an old record)
    state_file: str = ""  # where that emulator keeps its state; "" in memory only
    run_dir: str = ""  # the run directory of a `platform.up` platform
    ca_file: str = ""  # its CA when it serves https (not recorded: the run file says it)

    @property
    def emulator(self) -> bool:
        return bool(self.platform_id)

    def details(self) -> dict[str, str]:
        """What a manifest entry on this platform records about it."""
        out = {"platform": self.platform_id, "platform_state": self.state_file}
        out["platform_run_dir"] = self.run_dir
        return {key: value for key, value in out.items() if value}

    @classmethod
    def of(cls, resource: Resource) -> PlatformRef:
        details = resource.details
        return cls(
            rest_url=details.get("url", ""),
            platform_id=details.get("platform", ""),
            state_file=details.get("platform_state", ""),
            run_dir=details.get("platform_run_dir", ""),
        )

    def describe(self) -> str:
        if self.emulator:
            return f"the local platform {self.platform_id} ({self.rest_url})"
        return f"the platform at {self.rest_url}"


def _health(rest_url: str, api_key: str, ca_file: str = "") -> tuple[bool, dict[str, object]]:
    """(it answered at all, the health data when it answered as an emulator)."""
    try:
        response = httpx.get(
            f"{rest_url.rstrip('/')}/_emulator/health",
            headers={"x-api-key": api_key},
            timeout=PROBE_TIMEOUT_S,
            verify=ca_file or True,
        )
    except (httpx.HTTPError, OSError, ValueError):
        return False, {}
    if response.status_code != 200:
        return True, {}
    try:
        data = response.json().get("data")
    except ValueError:
        return True, {}
    return True, data if isinstance(data, dict) else {}


def _is_loopback(url: str) -> bool:
    return (urlsplit(url).hostname or "") in LOOPBACK


def identify(rest_url: str, api_key: str, *, run_dir: Path | None = None) -> PlatformRef:
    """The platform at `rest_url` as records should name it. A local emulator names its id;
    its state file is trusted only from this host (a loopback URL), and the run directory
    only when that directory's own platform is the one answering."""
    local, alive = service.last_record(run_dir) if run_dir is not None else (None, False)
    ca_file = (local.ca_file or "") if local is not None and alive else ""
    _, data = _health(rest_url, api_key, ca_file)
    platform_id = str(data.get("platform_id") or "")
    if not platform_id:
        return PlatformRef(rest_url)
    state = data.get("state_file")
    state_file = str(state) if isinstance(state, str) and _is_loopback(rest_url) else ""
    own = local is not None and alive and local.platform_id == platform_id
    return PlatformRef(
        rest_url,
        platform_id,
        state_file,
        str(run_dir) if own and run_dir is not None else "",
        ca_file,
    )


@dataclass(frozen=True)
class Standing:
    reach: Reach
    rest_url: str  # where it answers now (UP), else where it was recorded
    reason: str = ""  # why DOWN or GONE, for the user
    ca_file: str = ""


@dataclass
class Probe:
    """Standings of recorded platforms (each probed once), and removers guarded by them."""

    api_key: str = field(repr=False)
    forget: bool = False  # --forget-unreachable: clear a DOWN platform's records too
    rerun: str = "re-run"  # what the user re-runs once it answers ("": kit.resume starts it)
    _known: dict[tuple[str, str], Standing] = field(default_factory=dict)

    def standing(self, ref: PlatformRef, *, fresh: bool = False) -> Standing:
        key = (ref.platform_id, ref.rest_url)
        if fresh or key not in self._known:
            self._known[key] = self._probe(ref)
        return self._known[key]

    def _probe(self, ref: PlatformRef) -> Standing:
        if not ref.emulator:
            return self._probe_real(ref)
        ca_file = ref.ca_file
        if ref.run_dir:  # a `platform.up` platform: where it runs now, if it runs
            record, alive = service.last_record(Path(ref.run_dir))
            ca_file = ca_file or (record.ca_file or "" if record is not None else "")
            if record is not None and alive and record.platform_id == ref.platform_id:
                return Standing(Reach.UP, record.rest_url, ca_file=ca_file)
        answered, data = _health(ref.rest_url, self.api_key, ca_file)
        found = str(data.get("platform_id") or "")
        if found == ref.platform_id:
            return Standing(Reach.UP, ref.rest_url, ca_file=ca_file)
        if found:
            return Standing(
                Reach.GONE,
                ref.rest_url,
                f"{ref.describe()} is gone: another platform ({found}) answers there now, "
                "and what was recorded on the old one went with its state",
            )
        if answered:
            return Standing(
                Reach.DOWN,
                ref.rest_url,
                f"something answers at {ref.rest_url} but not as {ref.describe()} (a wrong "
                "user key?)"
                + (f"; kept the record: {self.rerun} once it does" if self.rerun else ""),
            )
        return self._probe_state(ref)

    def _probe_state(self, ref: PlatformRef) -> Standing:
        what = ref.describe()
        if not ref.state_file:
            return Standing(
                Reach.GONE,
                ref.rest_url,
                f"{what} does not answer and kept its state in memory only: what was "
                "recorded on it went with it",
            )
        identity = service.state_identity(Path(ref.state_file))
        if identity is None:
            return Standing(
                Reach.GONE,
                ref.rest_url,
                f"{what} does not answer and its state file {ref.state_file} is gone: what "
                "was recorded on it went with it",
            )
        if identity and identity != ref.platform_id:
            return Standing(
                Reach.GONE,
                ref.rest_url,
                f"{what} does not answer and its state file {ref.state_file} now holds "
                f"another platform ({identity}): what was recorded on it is gone",
            )
        start = "`uv run invoke platform.up"
        start += f" --run-dir {ref.run_dir}`" if ref.run_dir else "`"
        then = f", then {self.rerun}" if self.rerun else ""
        if not self.rerun and ref.run_dir:
            start = "`uv run invoke kit.resume`"
        return Standing(
            Reach.DOWN,
            ref.rest_url,
            f"{what} is not running; its state is kept in {ref.state_file}: {start} brings "
            f"it back on the same address{then}",
        )

    def _probe_real(self, ref: PlatformRef) -> Standing:
        try:
            httpx.get(ref.rest_url, timeout=PROBE_TIMEOUT_S)
        except (httpx.HTTPError, OSError, ValueError) as exc:
            return Standing(
                Reach.DOWN,
                ref.rest_url,
                f"{ref.describe()} does not answer ({type(exc).__name__}); it may come back"
                + (f": {self.rerun} once it answers" if self.rerun else ""),
            )
        return Standing(Reach.UP, ref.rest_url)

    def guard(self, remover: Remover) -> Remover:
        """`remover` for entries on a platform: run at the URL the platform answers on now;
        cleared (`Cleared`) when the platform is gone; kept (`PlatformDown`) when it does
        not answer, unless `forget`. A removal that fails is checked again: the platform
        may have stopped meanwhile."""

        def remove(resource: Resource) -> None:
            ref = PlatformRef.of(resource)
            standing = self.standing(ref)
            self._settle(standing)
            try:
                remover(_at(resource, standing.rest_url))
            except Exception:
                again = self.standing(ref, fresh=True)
                if again.reach is Reach.UP:
                    raise
                self._settle(again)

        return remove

    def _settle(self, standing: Standing) -> None:
        """Raise what a standing means for an entry (nothing when UP)."""
        if standing.reach is Reach.GONE:
            raise Cleared(standing.reason)
        if standing.reach is Reach.DOWN:
            if self.forget:
                raise Cleared(f"forgotten ({FORGET_FLAG}): {standing.reason}")
            raise PlatformDown(
                f"{standing.reason}; or, if it is gone for good, {FORGET_FLAG} drops this "
                "record (each one listed)"
            )


def _at(resource: Resource, rest_url: str) -> Resource:
    """The entry with the URL its platform answers on now (moved on purpose)."""
    if not rest_url or resource.details.get("url") in (None, rest_url):
        return resource
    return resource.model_copy(update={"details": {**resource.details, "url": rest_url}})


def details_for(ref: PlatformRef | None) -> Mapping[str, str]:
    return ref.details() if ref is not None else {}
