"""`image.*`: the kit image (bandkit/image/)."""

from __future__ import annotations

from invoke.context import Context
from invoke.tasks import task

from bandkit.errors import BandkitError
from bandkit.image.facts import LOCAL_TAG, host_arch
from tasks._common import RUN_DIR_HELP, need, reports, resolve_run_dir


@task(
    help={"arch": "architecture to make bases for (repeatable): amd64 (default), arm64 (qemu)"},
    iterable=["arch"],
)
@reports("image.bases")
def bases(c: Context, arch: list[str]) -> None:
    """Make local Python and uv base images when the official ones cannot be pulled."""
    from bandkit.image import bases as image_bases

    for line in image_bases.ensure_bases(tuple(arch or [host_arch()])):
        print(f"image.bases: {line}")


@task(
    name="build",
    help={
        "platform": "linux/amd64 or linux/arm64 (repeatable; several = one multi-platform "
        "image via buildx when the Docker selected has such a builder, else <tag>-<arch> tags)",
        "sdk_extra": "one optional band-sdk extra locked in docker/band_python_kit/sdk",
        "tag": f"image tag (default {LOCAL_TAG})",
        "base": "official (the Dockerfile's digest pins) or local (`invoke image.bases`)",
        "build_ca": "extra CA certificate file trusted by the builder stage only (repeatable)",
        "no_cache": "rebuild every layer",
        "multi": "several platforms: auto (default), buildx (fail without it), per-arch",
    },
    iterable=["platform", "build_ca"],
)
@reports("image.build")
def image_build(
    c: Context,
    platform: list[str],
    sdk_extra: str = "",
    tag: str = LOCAL_TAG,
    base: str = "official",
    build_ca: list[str] | None = None,
    no_cache: bool = False,
    multi: str = "auto",
) -> None:
    """Build the kit image, printing each build step; ends with tag, id and time."""
    from bandkit.image import build as image_build_mod

    request = image_build_mod.request_from_options(
        platforms=platform,
        tag=tag,
        base=base,
        sdk_extra=sdk_extra,
        build_ca=build_ca or (),
        no_cache=no_cache,
        multi=multi,
    )
    for item in image_build_mod.build(request):
        print(
            f"image.build: built {item.tag} ({item.platform}) {item.image_id} "
            f"in {item.seconds:.1f}s"
        )


@task(
    name="push",
    help={
        "registry": "HOST[:PORT]/NAME to push to, e.g. 127.0.0.1:5000/band-python-kit",
        "tag": "tag to publish (repeatable): X.Y.Z or X.Y.Z-rN first, then latest/<major>",
        "source": f"local image to push (default {LOCAL_TAG})",
        "arch": "push per-arch builds `<source>-<arch>` merged into one manifest (repeatable; "
        "not for a buildx multi-platform image, which is pushed as it is)",
    },
    iterable=["tag", "arch"],
)
@reports("image.push")
def image_push(
    c: Context,
    registry: str = "",
    tag: list[str] | None = None,
    source: str = LOCAL_TAG,
    arch: list[str] | None = None,
) -> None:
    """Push immutable tags (never overwriting), read the digest back, then move floating tags."""
    from bandkit.image import push as image_push_mod

    need(registry, "--registry", "127.0.0.1:5000/band-python-kit")
    if not tag:
        raise BandkitError("--tag is required, e.g. --tag 1.0.0 (repeatable)")
    pushed = image_push_mod.push(source, registry, tag, arches=tuple(arch or ()))
    print(pushed.by_digest())


@task(
    name="builder",
    help={
        "stop": "stop the side daemon (its build cache stays)",
        "status": "say whether it runs and print the environment that selects it",
    },
)
@reports("image.builder")
def image_builder(c: Context, stop: bool = False, status: bool = False) -> None:
    """Start a side dockerd (Debian trixie, buildx, containerd store) for multi-platform builds.

    Idempotent. Prints DOCKER_HOST=... and DOCKER_CONFIG=...: export them to point
    `image.build` / `image.push` at it; the main daemon is left alone.
    """
    from bandkit.image import builder

    where = builder.layout()
    if stop:
        print(f"image.builder: {builder.down(where)}")
        return
    lines = builder.status(where) if status else builder.up(where)
    print("\n".join(f"image.builder: {line}" for line in lines))
    print("\n".join(f"{name}={value}" for name, value in builder.env(where).items()))


@task(
    name="registry",
    help={"stop": "stop it (its storage stays in the run directory)", "run_dir": RUN_DIR_HELP},
)
@reports("image.registry")
def image_registry(c: Context, stop: bool = False, run_dir: str = "") -> None:
    """Say whether the local registry `invoke push` keeps runs, and where; --stop stops it."""
    from bandkit.kit import build_push as shortcuts

    where = resolve_run_dir(c, run_dir)
    line = shortcuts.stop_local(where) if stop else shortcuts.local_status(where)
    print(f"image.registry: {line}")
