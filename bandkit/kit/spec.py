"""The kit `spec.yaml`: its schema checks, its drift facts, and digest stamping.

- `validate_text(text)` checks the mirror-era kit-spec v2 shape that sbx 0.34/0.35
  accepts (strict: unknown keys are errors) plus our own invariants: one headless
  startup command chained through the entrypoint into `python -m launcher`, exactly the
  baseline allowlist, no credentials block, no proxy variables, no `sandbox.entrypoint`.
- `validate_file(path)` prefers `sbx kit validate` when sbx is installed and falls back
  to those checks; both answer with the same `PASS` / `INVALID` vocabulary.
- `stamp(text, image_ref, digest)` rewrites only the single `image:` line to
  `REF@sha256:...`, keeping every other byte.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bandkit.errors import BandkitError
from bandkit.fsio import write_atomic
from bandkit.image.refs import RefError, parse_digest
from launcher.constants import DEFAULT_REST_URL, DEFAULT_SDK_PYTHON

ENTRYPOINT = "/usr/local/bin/band-entrypoint.sh"
LAUNCH_COMMAND = (ENTRYPOINT, DEFAULT_SDK_PYTHON, "-m", "launcher")
# Band's production host, then the two hosts uv needs to sync a locked workspace.
ALLOWLIST = (httpx.URL(DEFAULT_REST_URL).host, "pypi.org", "files.pythonhosted.org")
KIT_NAME = "band-python-kit"
SBX_TIMEOUT_S = 60.0

_IMAGE_LINE = re.compile(r"^(?P<lead>[ \t]+image:[ \t]*)(?P<value>\S+)(?P<trail>[ \t]*)$")
_ANY_IMAGE_LINE = re.compile(r"^[ \t]*image:", re.MULTILINE)
_IMAGE_REF = re.compile(r"^[a-z0-9]+([._:/-][a-zA-Z0-9]+)*$")
_PROXY_VAR = re.compile(r"^[A-Za-z_]*_PROXY$", re.IGNORECASE)


class SpecError(BandkitError):
    """The spec cannot be stamped or read; the message says why and what to do."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Sandbox(_Strict):
    image: str
    aiFilename: str | None = None


class StartupCommand(_Strict):
    command: list[str]
    user: str | None = None
    background: bool = False
    description: str | None = None


class Commands(_Strict):
    startup: list[StartupCommand] = Field(default_factory=list)


class Network(_Strict):
    allow: list[str] = Field(default_factory=list)


class Caps(_Strict):
    network: Network = Field(default_factory=Network)


class KitSpec(_Strict):
    schemaVersion: Literal["2"]
    kind: Literal["sandbox"]
    name: str
    displayName: str | None = None
    description: str | None = None
    sandbox: Sandbox
    commands: Commands = Field(default_factory=Commands)
    caps: Caps = Field(default_factory=Caps)
    agentContext: str | None = None
    environment: dict[str, str] | None = None


@dataclass(frozen=True)
class Verdict:
    ok: bool
    source: str  # "sbx" or "schema"
    problems: tuple[str, ...]

    def render(self, path: Path) -> str:
        if self.ok:
            return f"PASS {path} ({self.source})"
        return "\n".join([f"INVALID {path} ({self.source})", *(f"  - {p}" for p in self.problems)])


def _invariants(spec: KitSpec) -> list[str]:
    problems = []
    if spec.name != KIT_NAME:
        problems.append(f"name must be {KIT_NAME!r}, got {spec.name!r}")
    startup = spec.commands.startup
    if len(startup) != 1:
        problems.append(f"commands.startup must hold exactly one entry, got {len(startup)}")
    else:
        entry = startup[0]
        if tuple(entry.command) != LAUNCH_COMMAND:
            problems.append(
                f"commands.startup[0].command must be {list(LAUNCH_COMMAND)}, got {entry.command}"
            )
        if entry.user != "0" or not entry.background:
            problems.append('commands.startup[0] must run as user "0" with background: true')
    if tuple(spec.caps.network.allow) != ALLOWLIST:
        problems.append(
            f"caps.network.allow must be exactly {list(ALLOWLIST)}, got {spec.caps.network.allow}"
        )
    proxies = [k for k in (spec.environment or {}) if _PROXY_VAR.match(k)]
    if proxies:
        problems.append(f"environment must not set proxy variables: {', '.join(proxies)}")
    return problems


def validate_text(text: str) -> Verdict:
    """Our schema checks (the fallback when sbx is not installed)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return Verdict(False, "schema", (f"not YAML: {str(exc).splitlines()[0]}",))
    if not isinstance(data, dict):
        return Verdict(False, "schema", ("the spec must be a mapping",))
    if isinstance(data.get("sandbox"), dict) and "entrypoint" in data["sandbox"]:
        return Verdict(
            False, "schema", ("sandbox.entrypoint runs only on an attached PTY; use startup",)
        )
    try:
        spec = KitSpec.model_validate(data)
    except ValidationError as exc:
        problems = tuple(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}"
            for err in exc.errors()
        )
        return Verdict(False, "schema", problems)
    found = _invariants(spec)
    return Verdict(not found, "schema", tuple(found))


def validate_file(path: Path, *, sbx: str | None = None) -> Verdict:
    """`sbx kit validate` when sbx is present, else `validate_text`."""
    if not path.is_file():
        raise SpecError(f"no spec at {path}")
    sbx = sbx or shutil.which("sbx")
    if sbx is None:
        return validate_text(path.read_text(encoding="utf-8"))
    proc = subprocess.run(
        [sbx, "kit", "validate", str(path.parent)],
        capture_output=True,
        text=True,
        check=False,
        timeout=SBX_TIMEOUT_S,
    )
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return Verdict(proc.returncode == 0, "sbx", () if proc.returncode == 0 else tuple(lines))


def stamp_file(source: Path, image_ref: str, digest: str, output: Path | None) -> str:
    """Stamp the spec at `source` (never modified); write it to `output` or return it.

    Returns the stamped text. `output` is written atomically (0644, a published file).
    """
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read the spec {source}: {exc.strerror}") from None
    stamped = stamp(text, image_ref, digest)
    if output is not None:
        try:
            write_atomic(output, stamped, mode=0o644)
        except OSError as exc:
            raise SpecError(f"cannot write {output}: {exc.strerror}") from None
    return stamped


def stamp(text: str, image_ref: str, digest: str) -> str:
    """Return `text` with the one `image:` line set to `image_ref@digest`; nothing else moves."""
    try:
        parse_digest(digest)
    except RefError as exc:
        raise SpecError(f"{exc}") from None
    if "@" in image_ref or not _IMAGE_REF.match(image_ref):
        raise SpecError(
            f"image ref must be REGISTRY/NAME[:TAG] without a digest, got {image_ref!r}"
        )
    count = len(_ANY_IMAGE_LINE.findall(text))
    if count != 1:
        raise SpecError(f"the spec must have exactly one `image:` line, found {count}")
    data = yaml.safe_load(text)
    sandbox = data.get("sandbox") if isinstance(data, dict) else None
    if not isinstance(sandbox, dict) or not isinstance(sandbox.get("image"), str):
        raise SpecError("the `image:` line is not `sandbox.image`")
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        body = line.rstrip("\r\n")
        match = _IMAGE_LINE.match(body)
        if match:
            ending = line[len(body) :]
            lines[index] = f"{match['lead']}{image_ref}@{digest}{match['trail']}{ending}"
            return "".join(lines)
    raise SpecError("the `image:` line must be `  image: <ref>` inside `sandbox:`")
