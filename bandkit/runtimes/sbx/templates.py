"""`sbx template` calls and the docker side of a load: a kit image built on this host,
loaded into sbx once.

sbx VMs do not see the host's Docker images: a local build (`band-python-kit:local`, the
demo's CLI image) must be in sbx's own image store before `sbx create` can use it. Before
a create, `SbxRuntime.ensure_template(image)`:

- leaves a digest-pinned reference alone (a published image: sbx pulls it);
- reads the image's id from this host's Docker (`docker image inspect`); when Docker has
  no such image it changes nothing (sbx may pull it; a failed create then says to build
  it);
- skips the load when `sbx template ls --json` already lists that reference with that
  digest (ids are compared by prefix: sbx lists the short 12-hex form);
- else records the template in the manifest (so teardown removes it), says so on a
  progress line, and `load` pipes `docker save IMAGE` into `sbx template load /dev/stdin` (no
  shell), reading the archive's manifest on the way, and checks that sbx now lists the
  reference with the inspected digest or one the archive declares (its config or its
  index manifest: which one sbx reports depends on its image store).

Teardown (`remove`) removes the template by its tag while the tag still names
the digest loaded, and treats "already gone" (or the tag naming another image since: not
ours) as success; sbx refuses while a sandbox made from it exists, so the manifest's
reverse order removes the sandboxes first.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.sbx.cli import T_CREATE, T_QUICK, SbxCli, parse_json

Progress = Callable[[str], None]
T_INSPECT = 15.0
CHUNK = 1 << 20
SHORT_ID = 12  # sbx lists image ids in their short form
# An image reference as docker and sbx take it (never an option: no leading `-`).
_IMAGE_REF = re.compile(r"^[a-z0-9][a-z0-9._/:@-]*$", re.IGNORECASE)
_HEX = re.compile(r"^[0-9a-f]+$")
_ARCHIVE_FILES = ("manifest.json", "index.json")


def stderr_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def normalize_repository(name: str) -> str:
    """Docker's normalization: `x` -> docker.io/library/x, `u/x` -> docker.io/u/x."""
    first = name.split("/", 1)[0]
    if "/" in name and ("." in first or ":" in first or first == "localhost"):
        return name
    return f"docker.io/{name}" if "/" in name else f"docker.io/library/{name}"


def split_ref(image: str) -> tuple[str, str]:
    """(normalized repository, tag) of a tag reference (`latest` when it has none)."""
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:
        return normalize_repository(image), "latest"
    return normalize_repository(name), tag


def short(digest: str) -> str:
    return digest.removeprefix("sha256:").lower()


def same_digest(listed: str, digest: str) -> bool:
    """Whether sbx's listed id names `digest` (either may be the short form)."""
    a, b = short(listed), short(digest)
    if len(a) < SHORT_ID or len(b) < SHORT_ID or not _HEX.match(a) or not _HEX.match(b):
        return False
    return a.startswith(b) or b.startswith(a)


def is_local_candidate(image: str) -> bool:
    """A tag reference (not pinned by digest) that may be a build of this host."""
    return "@" not in image


def check_ref(image: str) -> str:
    if not _IMAGE_REF.match(image) or ".." in image:
        raise SandboxError(f"sbx: kit image {image[:80]!r} is not an image reference")
    return image


class _Tee(io.RawIOBase):
    """Reads `source`, writes every byte read to `sink`: the archive goes to sbx as it is
    parsed."""

    def __init__(self, source: Any, sink: Any) -> None:
        self.source, self.sink = source, sink

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.source.read(len(buffer))
        if data:
            self.sink.write(data)
            buffer[: len(data)] = data
        return len(data)


def declared_digests(files: dict[str, bytes]) -> set[str]:
    """The digests a `docker save` archive declares: each image's config (manifest.json)
    and each manifest its index lists (index.json, Docker 25+)."""
    found: set[str] = set()
    try:
        for entry in json.loads(files.get("manifest.json", b"[]")) or []:
            config = str(entry.get("Config", "")).rsplit("/", 1)[-1].removesuffix(".json")
            if _HEX.match(config):
                found.add(f"sha256:{config}")
        for manifest in (json.loads(files.get("index.json", b"{}")) or {}).get("manifests", []):
            digest = str(manifest.get("digest", ""))
            if digest.startswith("sha256:"):
                found.add(digest)
    except (ValueError, AttributeError, TypeError):
        raise SandboxError(
            "sbx: `docker save` wrote an archive whose manifest is not JSON"
        ) from None
    return found


def listed(cli: SbxCli) -> list[dict[str, Any]]:
    """The templates in sbx's image store (`sbx template ls --json`)."""
    images = parse_json(cli.run(["template", "ls", "--json"], what="template ls").stdout)
    return [i for i in images.get("images") or [] if isinstance(i, dict)]


def ours(cli: SbxCli, image: str, ids: set[str]) -> list[dict[str, Any]]:
    """The listed templates that are the one we loaded: its tag, naming its digest."""
    wanted = split_ref(image)
    return [
        e
        for e in listed(cli)
        if (str(e.get("repository", "")), str(e.get("tag", ""))) == wanted
        and any(same_digest(str(e.get("id", "")), d) for d in ids)
    ]


def held(cli: SbxCli, image: str, digests: set[str]) -> dict[str, Any] | None:
    """sbx's entry for `image` under one of `digests`, None when it holds no such one."""
    found = ours(cli, image, digests)
    return found[0] if found else None


def docker_image(docker: str, image: str) -> tuple[str, int] | None:
    """(id, size) of `image` in this host's Docker; None when it has none (or no Docker
    answers)."""
    try:
        proc = subprocess.run(
            [docker, "image", "inspect", "--format", "{{.Id}} {{.Size}}", "--", image],
            capture_output=True, text=True, check=False, timeout=T_INSPECT,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    fields = proc.stdout.split()
    if proc.returncode != 0 or len(fields) != 2 or not fields[0].startswith("sha256:"):
        return None
    return fields[0], int(fields[1]) if fields[1].isdigit() else 0


def load(cli: SbxCli, docker: str, image: str, image_id: str) -> dict[str, Any]:
    """Load `image` (Docker's `image_id`) into sbx; sbx's entry for it once it lists it."""
    declared = _load(cli, docker, image)
    if image_id not in declared:
        raise SandboxError(
            f"sbx: `docker save {image}` wrote an image other than {image_id} (was it "
            "rebuilt meanwhile?); run the command again"
        )
    entry = held(cli, image, declared)
    if entry is None:
        raise SandboxError(
            f"sbx template load returned 0 but `sbx template ls` does not list {image} "
            f"with {image_id[:19]}"
        )
    return entry


def _load(cli: SbxCli, docker: str, image: str) -> set[str]:
    """`docker save IMAGE | sbx template load /dev/stdin`; the digests it declared."""
    with tempfile.TemporaryFile() as save_err, tempfile.TemporaryFile() as load_out:
        # Their output goes to files, never a pipe nobody reads while the archive flows.
        save = subprocess.Popen(
            [docker, "save", "--", image],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=save_err,
        )  # fmt: skip
        load = subprocess.Popen(
            [cli.binary, "template", "load", "/dev/stdin"],
            stdin=subprocess.PIPE, stdout=load_out, stderr=subprocess.STDOUT,
        )  # fmt: skip
        expired: list[bool] = []

        def expire() -> None:  # a hung save or load must not hang the runtime
            expired.append(True)
            save.kill()
            load.kill()

        watchdog = threading.Timer(T_CREATE, expire)
        watchdog.start()
        try:
            problem, files = _stream(image, save, load)
            save.wait()
            load.wait()
        finally:
            watchdog.cancel()
        if expired:
            raise SandboxError(f"sbx: loading {image} timed out after {T_CREATE:g}s")
        if save.returncode != 0:
            save_err.seek(0)
            tail = save_err.read().decode(errors="replace").strip()[-300:]
            raise SandboxError(
                f"sbx: `docker save {image}` failed (exit {save.returncode}): {tail}"
            )
        if load.returncode != 0:
            load_out.seek(0)
            tail = load_out.read().decode(errors="replace").strip()[-300:]
            raise SandboxError(
                f"sbx: `sbx template load` of {image} failed (exit {load.returncode}): {tail}"
            )
    if problem:
        raise SandboxError(f"sbx: {problem}")
    return declared_digests(files)


def _stream(
    image: str, save: subprocess.Popen[bytes], load: subprocess.Popen[bytes]
) -> tuple[str, dict[str, bytes]]:
    """Copy the archive from docker to sbx, reading its manifest files on the way."""
    assert save.stdout is not None
    assert load.stdin is not None
    files: dict[str, bytes] = {}
    problem = ""
    try:
        tee = io.BufferedReader(_Tee(save.stdout, load.stdin), CHUNK)
        with tarfile.open(fileobj=tee, mode="r|") as archive:
            for member in archive:
                name = member.name.removeprefix("./")
                if name in _ARCHIVE_FILES and member.isfile():
                    handle = archive.extractfile(member)
                    files[name] = handle.read() if handle is not None else b""
        while tee.read(CHUNK):  # the tar's end blocks and padding reach sbx too
            pass
    except tarfile.TarError as exc:
        problem = f"`docker save {image}` did not write an image archive ({exc})"
    except BrokenPipeError:
        problem = "sbx template load stopped reading the archive"
    finally:
        for stream in (load.stdin, save.stdout):
            with contextlib.suppress(BrokenPipeError):
                stream.close()
    return problem, files


def remove(cli: SbxCli, image: str, ids: set[str]) -> None:
    """Remove the template we loaded (`image` naming one of `ids`); a tag that now names
    another image is not ours (kept, and that is success: ours is no longer listed under
    it)."""
    check_ref(image)
    if not ours(cli, image, ids):
        return
    cli.run(["template", "rm", image], what="template rm", timeout=T_QUICK)
    if ours(cli, image, ids):
        raise SandboxError(f"sbx template rm {image} returned 0 but it is still listed")
