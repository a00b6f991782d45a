"""Local stand-ins for the official base images, for machines that cannot pull them.

`ensure_bases(arches)` makes, per architecture and only when missing:

1. `local/debian-python:<suite>[-<arch>]`: a debootstrapped Debian rootfs of the official
   base's release (`<suite>` read from the Dockerfile's `PYTHON_BASE_IMAGE` tag, so the
   two never drift) with Debian's Python (its minor version is Debian's, not the official
   image's), git, ssh and the CA bundle (the image's runtime toolset), apt lists and .deb
   archives left out and the official images' `docker-clean` apt config added, so no
   later `apt-get` leaves caches in a layer.
2. `local/uv:<version>[-<arch>]`: `FROM scratch` holding the static uv/uvx binaries from
   PyPI's musllinux uv wheel, usable as `FROM ${UV_IMAGE} AS uv`.

These are exactly what the Dockerfile's `PYTHON_BASE_IMAGE` / `UV_IMAGE` ARGs take on an
offline build (`invoke image.build --base local`). amd64 is imported with `docker import`;
a foreign arch (arm64 under qemu-user-static) is built `FROM scratch` + `ADD rootfs.tar`
because `docker import --platform` is ignored. Idempotent: present images are reported
and left alone. Runs at once (the docker lane's workers each ask for the bases they build
on) make each base once: its maker holds a lock in `lock_dir()`, and the others wait.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from bandkit.dockercli import ImageError, docker, image_exists
from bandkit.image.facts import (
    LOCAL_PYTHON_REPO,
    LOCAL_UV_REPO,
    host_arch,
    official_suite,
    state_home,
    uv_version,
)

DEBIAN_MIRROR = "http://deb.debian.org/debian"
# Debian's Python plus the runtime toolset the Dockerfile would otherwise apt-get.
BASE_PACKAGES = (
    "python3",
    "python3-venv",
    "ca-certificates",
    "git",
    "openssh-client",
    "openssl",
    "util-linux",  # setpriv for the entrypoint: Essential today, named so it stays
)
# Never ship these in the base (the official images do the same via docker-clean).
EXCLUDES = ("./var/cache/apt/archives/*.deb", "./var/lib/apt/lists/*", "./var/cache/apt/*.bin")
DOCKER_CLEAN = (
    'DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb '
    '/var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };\n'
    'APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb '
    '/var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };\n'
    'Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";\n'
)
# arm64 takes about 6 min alone; `.ci/run` makes it at the lowest priority beside the lanes.
DEBOOTSTRAP_TIMEOUT_S = 1800.0
BINFMT = Path("/proc/sys/fs/binfmt_misc")
DEBOOTSTRAP_SCRIPTS = Path("/usr/share/debootstrap/scripts")
UV_WHEEL_TAGS = {"amd64": "musllinux_1_1_x86_64", "arm64": "musllinux_1_1_aarch64"}

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Base:
    """One local base image: what it stands in for and its local tag."""

    kind: str  # "python" | "uv"
    arch: str
    tag: str


def python_tag(arch: str, suite: str | None = None) -> str:
    suffix = "" if arch == host_arch() else f"-{arch}"
    return f"{LOCAL_PYTHON_REPO}:{suite or official_suite()}{suffix}"


def uv_tag(arch: str, version: str | None = None) -> str:
    version = version or uv_version()
    suffix = "" if arch == host_arch() else f"-{arch}"
    return f"{LOCAL_UV_REPO}:{version}{suffix}"


def planned(arches: tuple[str, ...]) -> Iterator[Base]:
    for arch in arches:
        yield Base("python", arch, python_tag(arch))
        yield Base("uv", arch, uv_tag(arch))


def ensure_bases(arches: tuple[str, ...], progress: Progress = print) -> list[str]:
    """Make each missing local base; return one summary line per image."""
    for arch in arches:
        if arch not in UV_WHEEL_TAGS:
            raise ImageError(f"unsupported arch {arch!r}; use amd64 or arm64")
        if arch != host_arch():
            enable_emulation(arch)
    wanted = list(planned(arches))
    missing = [base for base in wanted if not image_exists(base.tag)]
    # Each base is made on its own: the debootstraps run side by side (a foreign one is
    # mostly one emulated process, the native one mostly downloads and disk), so both
    # arches take about as long as the foreign one alone.
    with ThreadPoolExecutor(max_workers=max(1, len(missing))) as pool:
        made = dict(zip(missing, pool.map(lambda b: _make(b, progress), missing), strict=True))
    return [f"{base.tag}: {made.get(base, 'present')}" for base in wanted]


def lock_dir() -> Path:
    """Where the bases' locks live."""
    return state_home() / "bases"


def _make(base: Base, progress: Progress) -> str:
    """Make `base` under its lock, so a second run waits for the first instead of
    debootstrapping beside it; "made" or "made by another run"."""
    folder = lock_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = FileLock(str(folder / (base.tag.replace("/", "_").replace(":", "_") + ".lock")))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        progress(f"image.bases: another run is making {base.tag}; waiting for it ...")
        try:
            lock.acquire(timeout=DEBOOTSTRAP_TIMEOUT_S)
        except Timeout:
            raise ImageError(
                f"another run held {lock.lock_file} for {DEBOOTSTRAP_TIMEOUT_S:.0f}s; "
                "is an `invoke image.bases` stuck? stop it and re-run"
            ) from None
    try:
        if image_exists(base.tag):
            return "made by another run"
        foreign = base.kind == "python" and base.arch != host_arch()
        slow = " (debootstrap under qemu: several minutes)" if foreign else ""
        progress(f"image.bases: making {base.tag} ...{slow}")
        if base.kind == "python":
            _make_python(base, progress)
        else:
            _make_uv(base, progress)
        return "made"
    finally:
        lock.release()


def enable_emulation(arch: str) -> None:
    """Register qemu for a foreign arch (binfmt_misc mounted, entry enabled) or explain."""
    qemu = {"arm64": "aarch64", "amd64": "x86_64"}[arch]
    entry = BINFMT / f"qemu-{qemu}"
    hint = f"image.bases: {arch} needs qemu: apt-get install qemu-user-static binfmt-support"
    if shutil.which("update-binfmts") is None:
        raise ImageError(hint)
    if not (BINFMT / "register").exists():
        _checked(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT)], "mount binfmt_misc")
    if not entry.exists():
        _checked(["update-binfmts", "--enable", f"qemu-{qemu}"], f"enable qemu-{qemu}")
    if not entry.exists():
        raise ImageError(hint)


def _make_python(base: Base, progress: Progress) -> None:
    if shutil.which("debootstrap") is None:
        raise ImageError("debootstrap is missing: apt-get install debootstrap")
    suite = official_suite()
    if not (DEBOOTSTRAP_SCRIPTS / suite).exists():
        raise ImageError(
            f"this debootstrap has no {suite} script ({DEBOOTSTRAP_SCRIPTS / suite}); "
            "install a newer debootstrap (Debian backports)"
        )
    with _scratch() as tmp:
        rootfs = Path(tmp) / "rootfs"
        argv = [
            "debootstrap",
            "--variant=minbase",
            f"--arch={base.arch}",
            "--include=" + ",".join(BASE_PACKAGES),
            suite,
            str(rootfs),
            DEBIAN_MIRROR,
        ]
        _debootstrap(argv, base.arch)
        progress(f"image.bases: debootstrapped {suite} {base.arch}")
        (rootfs / "etc/apt/apt.conf.d/docker-clean").write_text(DOCKER_CLEAN, encoding="utf-8")
        tarball = Path(tmp) / "rootfs.tar"
        tar = ["tar", "-C", str(rootfs), *(f"--exclude={e}" for e in EXCLUDES)]
        _checked([*tar, "-cf", str(tarball), "."], "tar rootfs")
        if base.arch == host_arch():
            docker(["import", "--change", 'CMD ["/bin/bash"]', str(tarball), base.tag], 300)
        else:
            (Path(tmp) / "Dockerfile").write_text(
                'FROM scratch\nADD rootfs.tar /\nCMD ["/bin/bash"]\n', encoding="utf-8"
            )
            _build_scratch(Path(tmp), base, ["rootfs"])


def _debootstrap(argv: list[str], arch: str) -> None:
    """Run debootstrap in a process group of its own: at the deadline the whole group is
    killed (the emulated dpkg and scripts in its chroot too, not debootstrap alone). Not a
    session of its own: it stays in its caller's scheduling group, so a caller started at
    a low priority (`.ci/run`) keeps it there."""
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, process_group=0
    ) as proc:
        try:
            out, _ = proc.communicate(timeout=DEBOOTSTRAP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise ImageError(
                f"debootstrap {arch} did not finish within {DEBOOTSTRAP_TIMEOUT_S:.0f}s (a slow "
                "mirror, or qemu on a busy machine); run `invoke image.bases` again"
            ) from None
    if proc.returncode != 0:
        tail = "\n".join(out.strip().splitlines()[-8:])
        raise ImageError(f"debootstrap {arch} failed:\n{tail}")


@contextmanager
def _scratch() -> Iterator[Path]:
    """A scratch directory for a rootfs. A debootstrap that failed or was killed can leave
    the host's proc, sys or dev mounted in its chroot: those are unmounted before the
    directory goes, and one that stays mounted keeps the directory (an ImageError says
    which), so nothing is ever deleted through a mount."""
    tmp = Path(tempfile.mkdtemp(prefix="bandkit-rootfs-"))
    try:
        yield tmp
    finally:
        for point in _mounts_under(tmp):
            if subprocess.run(["umount", point], capture_output=True, check=False).returncode:
                subprocess.run(["umount", "--lazy", point], capture_output=True, check=False)
        stuck = _mounts_under(tmp)
        if stuck:
            raise ImageError(
                f"{', '.join(stuck)} is still mounted, so {tmp} was kept: unmount it "
                f"(`umount -R {tmp}/rootfs`), then remove {tmp}"
            )
        shutil.rmtree(tmp)


def _mounts_under(root: Path) -> list[str]:
    """Mount points below `root` (this mount namespace), deepest first."""
    prefix = os.fsencode(root.resolve()) + b"/"
    points = []
    for line in Path("/proc/self/mountinfo").read_bytes().splitlines():
        field = line.split()[4]  # octal escapes for space, tab, newline and backslash
        point = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field)
        if point.startswith(prefix):
            points.append(os.fsdecode(point))
    return sorted(points, key=len, reverse=True)


def _make_uv(base: Base, progress: Progress) -> None:
    with tempfile.TemporaryDirectory(prefix="bandkit-uv-") as tmp:
        wheel_dir = Path(tmp) / "wheel"
        _checked(
            [
                "uv",
                "tool",
                "run",
                "--from",
                "pip",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                f"--platform={UV_WHEEL_TAGS[base.arch]}",
                f"--dest={wheel_dir}",
                f"uv=={uv_version()}",
            ],
            "download the uv wheel from PyPI",
        )
        wheels = sorted(wheel_dir.glob("uv-*.whl"))
        if len(wheels) != 1:
            raise ImageError(f"expected one uv wheel, found {len(wheels)}")
        progress(f"image.bases: fetched {wheels[0].name}")
        with zipfile.ZipFile(wheels[0]) as whl:
            for name in ("uv", "uvx"):
                member = next(m for m in whl.namelist() if m.endswith(f".data/scripts/{name}"))
                target = Path(tmp) / name
                target.write_bytes(whl.read(member))
                target.chmod(0o755)
        (Path(tmp) / "Dockerfile").write_text("FROM scratch\nCOPY uv uvx /\n", encoding="utf-8")
        _build_scratch(Path(tmp), base, ["wheel"])


def _build_scratch(context: Path, base: Base, skip: list[str]) -> None:
    (context / ".dockerignore").write_text("\n".join(skip) + "\n", encoding="utf-8")
    docker(
        ["build", "--quiet", f"--platform=linux/{base.arch}", "--tag", base.tag, str(context)],
        900,
        env={"DOCKER_BUILDKIT": "0"},
    )


def _checked(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.strip().splitlines()[-6:])
        raise ImageError(f"{what} failed (exit {proc.returncode}):\n{tail}")
