"""Operator verbs: `invoke --list` shows them, `invoke <task> --help` explains each.

Tasks stay thin: parse options, call one function in `bandkit/`, and turn its expected
failures into `Exit("<what failed>: <what to do>", code=1)`. Namespaces appear here only
when they hold a real task.
"""

from __future__ import annotations

from pathlib import Path

from invoke.collection import Collection
from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from bandkit import ciprep, image_bases, image_build, image_push, kitspec, platformctl, sidedocker
from bandkit import doctor as doctor_mod
from bandkit.image_facts import LOCAL_TAG, SPEC, host_arch
from bandkit.image_run import ImageError


@task
def doctor(c: Context) -> None:
    """Check the tools the kit uses and say what each missing one disables.

    Exits 0 when only optional tools (docker, sbx) are missing; 1 when uv, git or a
    recent enough Python is missing.
    """
    results = doctor_mod.probe_all()
    print(doctor_mod.render(results))
    missing = doctor_mod.missing_required(results)
    if missing:
        raise Exit(
            f"doctor: required tool(s) missing: {', '.join(missing)}; install them and re-run",
            code=1,
        )


@task(
    help={"lane": "lane id from `nox -s lanes` (repeatable), or 'all'"},
    iterable=["lane"],
)
def prepare(c: Context, lane: list[str]) -> None:
    """Install the Debian packages a CI lane needs and start dockerd for Docker lanes."""
    try:
        for line in ciprep.prepare(lane or ["all"]):
            print(f"ci.prepare: {line}")
    except ciprep.PrepareError as exc:
        raise Exit(f"ci.prepare: {exc}", code=1) from None


@task(
    help={"arch": "architecture to make bases for (repeatable): amd64 (default), arm64 (qemu)"},
    iterable=["arch"],
)
def bases(c: Context, arch: list[str]) -> None:
    """Make local Python and uv base images when the official ones cannot be pulled."""
    try:
        for line in image_bases.ensure_bases(tuple(arch or [host_arch()])):
            print(f"image.bases: {line}")
    except ImageError as exc:
        raise Exit(str(exc), code=1) from None


@task(
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
def build(
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
    if base not in ("official", "local"):
        raise Exit(f"image.build: --base must be official or local, got {base!r}", code=1)
    modes: dict[str, image_build.Multi] = {
        "auto": "auto",
        "buildx": "buildx",
        "per-arch": "per-arch",
    }
    if multi not in modes:
        raise Exit(f"image.build: --multi must be auto, buildx or per-arch, got {multi!r}", code=1)
    request = image_build.BuildRequest(
        platforms=tuple(platform),
        tag=tag,
        base="local" if base == "local" else "official",
        sdk_extra=sdk_extra,
        build_ca=tuple(Path(p) for p in build_ca or ()),
        no_cache=no_cache,
        multi=modes[multi],
    )
    try:
        for item in image_build.build(request):
            print(
                f"image.build: built {item.tag} ({item.platform}) {item.image_id} "
                f"in {item.seconds:.1f}s"
            )
    except ImageError as exc:
        raise Exit(str(exc), code=1) from None


@task(
    help={
        "registry": "HOST[:PORT]/NAME to push to, e.g. 127.0.0.1:5000/band-python-kit",
        "tag": "tag to publish (repeatable): X.Y.Z or X.Y.Z-rN first, then latest/<major>",
        "source": f"local image to push (default {LOCAL_TAG})",
        "arch": "push per-arch builds `<source>-<arch>` merged into one manifest (repeatable; "
        "not for a buildx multi-platform image, which is pushed as it is)",
    },
    iterable=["tag", "arch"],
)
def push(
    c: Context,
    registry: str,
    tag: list[str],
    source: str = LOCAL_TAG,
    arch: list[str] | None = None,
) -> None:
    """Push immutable tags (never overwriting), read the digest back, then move floating tags."""
    try:
        pushed = image_push.push(source, registry, tag, arches=tuple(arch or ()))
    except ImageError as exc:
        raise Exit(str(exc), code=1) from None
    print(pushed.by_digest())


@task(
    name="builder",
    help={
        "stop": "stop the side daemon (its build cache stays)",
        "status": "say whether it runs and print the environment that selects it",
    },
)
def image_builder(c: Context, stop: bool = False, status: bool = False) -> None:
    """Start a side dockerd (Debian trixie, buildx, containerd store) for multi-platform builds.

    Idempotent. Prints DOCKER_HOST=... and DOCKER_CONFIG=...: export them to point
    `image.build` / `image.push` at it; the main daemon is left alone.
    """
    where = sidedocker.layout()
    try:
        if stop:
            print(f"image.builder: {sidedocker.down(where)}")
            return
        lines = sidedocker.status(where) if status else sidedocker.up(where)
    except sidedocker.SideDockerError as exc:
        raise Exit(str(exc), code=1) from None
    print("\n".join(f"image.builder: {line}" for line in lines))
    print("\n".join(f"{name}={value}" for name, value in sidedocker.env(where).items()))


@task(
    help={
        "image_ref": "registry reference without digest, e.g. 127.0.0.1:5000/band-python-kit:1.0.0",
        "digest": "sha256:<64 hex> as printed by `invoke image.push`",
        "spec": "spec to read (default docker/band_python_kit/spec.yaml; never modified)",
        "output": "write the stamped copy here (default: stdout)",
    }
)
def stamp(c: Context, image_ref: str, digest: str, spec: str = "", output: str = "") -> None:
    """Write a copy of spec.yaml whose only change is `image: REF@sha256:...`."""
    source = Path(spec) if spec else SPEC
    try:
        stamped = kitspec.stamp(source.read_text(encoding="utf-8"), image_ref, digest)
    except (OSError, kitspec.SpecError) as exc:
        raise Exit(
            str(exc) if isinstance(exc, kitspec.SpecError) else f"kit.stamp: {exc}", code=1
        ) from None
    if output:
        Path(output).write_text(stamped, encoding="utf-8")
        print(f"kit.stamp: wrote {output}")
    else:
        print(stamped, end="")


@task(help={"spec": "spec to validate (default docker/band_python_kit/spec.yaml)"})
def validate(c: Context, spec: str = "") -> None:
    """`sbx kit validate` when sbx is installed, else our schema checks: PASS or INVALID."""
    path = Path(spec) if spec else SPEC
    try:
        verdict = kitspec.validate_file(path)
    except kitspec.SpecError as exc:
        raise Exit(str(exc), code=1) from None
    print(verdict.render(path))
    if not verdict.ok:
        raise Exit(code=1)


@task(
    name="provision",
    auto_shortflags=False,
    help={
        "name": "sandbox name; also scopes the stored key and the idempotency checks",
        "description": "agent description shown on the platform (10-500 characters)",
        "workspace": "workspace directory holding band.yaml (agent.id is written there)",
        "agent_name": "agent display name on the platform (default: --name)",
        "host": "host pattern the key is injected for (default **.band.ai, or the REST host)",
        "rest_url": "platform REST URL (default BAND_REST_URL, else the local platform, else prod)",
        "create": "create the sandbox after registering (default); --no-create skips it",
        "kit": "kit directory or reference for `sbx create` (required for sbx)",
        "runtime": "auto (sbx, else docker, else local), sbx, docker or local",
        "timeout": "seconds to wait for the registration answer (default 120)",
        "run_dir": "where manifests and local sandbox state live (default .run)",
    },
)
def kit_provision(
    c: Context,
    name: str,
    description: str,
    workspace: str,
    agent_name: str = "",
    host: str = "",
    rest_url: str = "",
    create: bool = True,
    kit: str = "",
    runtime: str = "auto",
    timeout: int = 120,
    run_dir: str = ".run",
) -> None:
    """Register an agent, write its id into band.yaml, store its key, create the sandbox.

    The user key comes from BAND_API_KEY_USER or a prompt (never argv); the agent key is
    stored as a sandbox-scoped proxy-managed secret. stdout is the agent id only; progress
    goes to stderr. Safe to re-run.
    """
    from bandkit import provision, provision_run

    try:
        agent_id = provision_run.main(
            name=name,
            description=description,
            workspace=Path(workspace),
            agent_name=agent_name,
            host=host,
            rest_url=rest_url,
            create=create,
            kit=kit or None,
            runtime=runtime,
            timeout=timeout,
            run_dir=Path(run_dir),
        )
    except provision.ProvisionError as exc:
        raise Exit(f"kit.provision: {exc}", code=1) from None
    print(agent_id)


@task(
    name="unprovision",
    auto_shortflags=False,
    help={
        "name": "the --name given to kit.provision",
        "rest_url": "platform REST URL (same default rule as kit.provision)",
        "run_dir": "the run directory used by kit.provision (default .run)",
    },
)
def kit_unprovision(c: Context, name: str, rest_url: str = "", run_dir: str = ".run") -> None:
    """Remove what kit.provision recorded for NAME (sandbox, key, agent, rooms); reset agent.id."""
    from bandkit import provision, provision_run

    try:
        lines, clean = provision_run.main_unprovision(
            name=name, rest_url=rest_url, run_dir=Path(run_dir)
        )
    except provision.ProvisionError as exc:
        raise Exit(f"kit.unprovision: {exc}", code=1) from None
    print("\n".join(lines))
    if not clean:
        raise Exit("kit.unprovision: some resources remain (listed above); re-run", code=1)


@task(
    name="up",
    help={
        "port": "port to listen on; 0 picks a free one (default 0)",
        "host": "address to bind; 0.0.0.0 lets containers reach it (default 127.0.0.1)",
        "tls": "serve https/wss with a generated local CA",
        "run_dir": "where the run file, key, state and log live (default .run)",
    },
)
def platform_up(
    c: Context, port: int = 0, host: str = "127.0.0.1", tls: bool = False, run_dir: str = ".run"
) -> None:
    """Start the local Band platform (emulator) in the background and wait until healthy."""
    try:
        record, started = platformctl.up(Path(run_dir), port=port, host=host, tls=tls)
    except platformctl.PlatformError as exc:
        raise Exit(f"platform.up: {exc}", code=1) from None
    print(f"platform.up: {'started' if started else 'already running'} (pid {record.pid})")
    print(f"BAND_REST_URL={record.rest_url}\nBAND_WS_URL={record.ws_url}")
    print(f"user key file: {record.user_key_file}")


@task(name="down", help={"run_dir": "the run directory used by platform.up (default .run)"})
def platform_down(c: Context, run_dir: str = ".run") -> None:
    """Stop the background platform started by platform.up; its state file is kept."""
    try:
        print(f"platform.down: {platformctl.down(Path(run_dir))}")
    except platformctl.PlatformError as exc:
        raise Exit(f"platform.down: {exc}", code=1) from None


@task(name="status", help={"run_dir": "the run directory used by platform.up (default .run)"})
def platform_status(c: Context, run_dir: str = ".run") -> None:
    """Say whether the platform runs, where, and what it holds (no keys shown)."""
    try:
        print("\n".join(platformctl.status(Path(run_dir))))
    except platformctl.PlatformError as exc:
        raise Exit(f"platform.status: {exc}", code=1) from None


@task(
    name="logs",
    help={"lines": "how many of the last lines to show (default 50)", "run_dir": "(default .run)"},
)
def platform_logs(c: Context, lines: int = 50, run_dir: str = ".run") -> None:
    """Show the end of the background platform's log."""
    try:
        print(platformctl.logs(Path(run_dir), lines=lines))
    except platformctl.PlatformError as exc:
        raise Exit(f"platform.logs: {exc}", code=1) from None


ns = Collection(
    doctor,
    Collection("ci", prepare),
    Collection("image", bases, build, push, image_builder),
    Collection("kit", stamp, validate, kit_provision, kit_unprovision),
    Collection("platform", platform_up, platform_down, platform_status, platform_logs),
)
