"""The CLI image: the kit image plus the pinned codex CLI, for the LLM brains on docker.

`--brains scripted` runs on the kit image (`band-python-kit:local`). `--brains stub|real`
run framework adapters that spawn an agent CLI: Sam's CodexAdapter starts
`codex app-server`, so its sandbox needs codex, which no Python wheel carries. The
docker runtime then creates every demo sandbox from `CLI_TAG`
(`docker/band_python_kit/Dockerfile.cli`: `FROM` the kit image, plus codex's static
binary at `/opt/codex`, read-only, on PATH as `codex`; no node or npm in any stage).
The claude CLI needs nothing here: the claude-agent-sdk wheel bundles it, so the PM's
workspace venv holds it once the launcher syncs the workspace's `claude-sdk` extra.

`build(brains)` (`invoke demo.build`):
1. the kit image, as `invoke build` makes it (official bases, else local ones);
2. for stub/real, the CLI image on top of it (`KIT_IMAGE` build arg; its codex stage on
   the kit's own base, `PYTHON_BASE_IMAGE`, so a kit rebuild keeps that stage cached),
   through `bandkit.image.build` (step lines, the host's extra CAs for the npm registry,
   the TLS remedy, a deadline);
3. the proof: `codex --version` run in a fresh container of it, through the kit
   entrypoint (uid 1000, no network), must print the pinned version. Only then is the
   build reported as done.

The codex version is pinned once, in `docker/band_python_kit/codex/package.json` (its
`package-lock.json` beside it; `codex_fetch` installs exactly the lock's package).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Final

from bandkit.demo import DemoError
from bandkit.dockercli import ImageError, docker, image_exists, image_id, image_size
from bandkit.image import bases as image_bases
from bandkit.image import build as image_build
from bandkit.image.facts import KIT_DIR, LOCAL_TAG, host_arch, official_python_base
from bandkit.kit import build_push

CLI_DOCKERFILE: Final = KIT_DIR / "Dockerfile.cli"
CODEX_PROJECT: Final = KIT_DIR / "codex"
CLI_TAG: Final = "band-python-kit-cli:local"
CODEX_PACKAGE: Final = "@openai/codex"
CLI_BRAINS: Final = frozenset({"stub", "real"})
BRAINS: Final = ("scripted", "stub", "real")
BUILD_COMMAND: Final = "uv run invoke demo.build --brains {brains}"
PROOF_TIMEOUT_S: Final = 120.0

Progress = Callable[[str], None]


@cache
def codex_version(project: Path = CODEX_PROJECT) -> str:
    """The pinned codex version: the exact version package.json depends on."""
    data = json.loads((project / "package.json").read_text(encoding="utf-8"))
    version = str((data.get("dependencies") or {}).get(CODEX_PACKAGE, ""))
    if not version or not version[0].isdigit():
        raise DemoError(f"{project}/package.json must pin {CODEX_PACKAGE} to one exact version")
    return version


def check_brains(brains: str) -> str:
    if brains not in BRAINS:
        raise DemoError(f"--brains must be one of {', '.join(BRAINS)}, got {brains!r}")
    return brains


def image_for(brains: str) -> str:
    """The image a docker sandbox of these brains runs: the CLI image for stub/real."""
    return CLI_TAG if check_brains(brains) in CLI_BRAINS else LOCAL_TAG


def sandbox_image(brains: str, runtime: str) -> str | None:
    """What `SandboxSpec.image` is for these brains on this runtime (None: its default):
    on docker and swarm the image the demo's agent images are built on."""
    return image_for(brains) if runtime in ("docker", "swarm") else None


def require_image(brains: str) -> None:
    """Fail before anything is made when the docker sandboxes' image is not built."""
    tag = image_for(brains)
    if not image_exists(tag):
        raise DemoError(
            f"the docker runtime needs {tag} for --brains {brains}: build it with "
            f"`{BUILD_COMMAND.format(brains=brains)}`, or pass --runtime local"
        )


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    image_id: str
    seconds: float
    size_bytes: int
    proof: str = ""  # what the proof printed (`codex-cli X.Y.Z`), for the CLI image

    def line(self) -> str:
        size = f"{self.size_bytes / 1e6:.0f} MB"
        proved = f"; {self.proof}" if self.proof else ""
        return f"built {self.tag} {self.image_id[:19]} in {self.seconds:.1f}s ({size}{proved})"


def kit_base() -> str:
    """The Python base the kit image was built on, as `build_here` chose it: the
    official pin when it is here (or can be pulled), else this machine's local base."""
    if build_push.official_unavailable() is None:
        return official_python_base()
    return image_bases.python_tag(host_arch())


def cli_request(
    *, kit_tag: str = LOCAL_TAG, base: str = "", no_cache: bool = False
) -> image_build.BuildRequest:
    """Dockerfile.cli on `kit_tag`; its codex stage on `base` (default: the pin)."""
    args = [("KIT_IMAGE", kit_tag)] + ([("PYTHON_BASE_IMAGE", base)] if base else [])
    return image_build.BuildRequest(
        tag=CLI_TAG, dockerfile=CLI_DOCKERFILE, build_args=tuple(args), no_cache=no_cache
    )


def prove(tag: str = CLI_TAG) -> str:
    """Run `codex --version` in a fresh container of `tag`, as the sandbox would start it
    (the kit entrypoint, then uid 1000), with no network; returns what it printed."""
    want = f"codex-cli {codex_version()}"
    argv = ["run", "--rm", "--network", "none", tag, "codex", "--version"]
    try:
        proc = docker(argv, PROOF_TIMEOUT_S, check=False)
    except ImageError as exc:  # docker is missing, or the run did not finish in time
        raise DemoError(
            f"`codex --version` in {tag}: {exc}; check the daemon (`docker info`) and re-run"
        ) from None
    out = proc.stdout.strip()
    if proc.returncode != 0 or out.splitlines()[-1:] != [want]:
        tail = "\n".join((proc.stderr.strip() or out).splitlines()[-6:])
        raise DemoError(
            f"{tag} is built but `codex --version` in it did not print {want!r} "
            f"(exit {proc.returncode}):\n{tail}\nrebuild with "
            f"`{BUILD_COMMAND.format(brains='stub')} --no-cache`"
        )
    return want


def _built(tag: str, seconds: float, proof: str = "") -> BuiltImage:
    return BuiltImage(tag, image_id(tag), seconds, image_size(tag), proof)


def build(brains: str, *, progress: Progress = print, no_cache: bool = False) -> list[BuiltImage]:
    """Build what `demo.up --brains BRAINS --runtime docker` runs; prove the CLI image."""
    check_brains(brains)
    out: list[BuiltImage] = []
    try:
        progress("demo.build: the kit image (as `uv run invoke build`)")
        kit = build_push.build_here(
            note=lambda line: progress(f"demo.build: {line}"), progress=progress, no_cache=no_cache
        )
        out.append(_built(kit.tag, kit.seconds))
        if brains not in CLI_BRAINS:
            return out
        progress(f"demo.build: the CLI image (codex {codex_version()}) on {kit.tag}")
        request = cli_request(kit_tag=kit.tag, base=kit_base(), no_cache=no_cache)
        cli = image_build.build(request, progress)[0]
        progress("demo.build: proving it: `codex --version` as uid 1000, no network")
        started = time.monotonic()
        proof = prove(cli.tag)
        progress(f"demo.build: {proof} ({time.monotonic() - started:.1f}s)")
        out.append(_built(cli.tag, cli.seconds, proof))
    except ImageError as exc:
        raise DemoError(str(exc)) from None
    return out
