"""`kit.*`: the kit spec and provisioning (bandkit/kit/)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from invoke.context import Context
from invoke.exceptions import Exit
from invoke.tasks import task

from bandkit.errors import BandkitError
from bandkit.terminal import printable
from tasks._common import RUN_DIR_HELP, need, reports, resolve_run_dir

SPEC_SHAPE_HELP = (
    "which default spec when --spec is not given: current (spec.yaml, sbx 0.42.1+), legacy "
    "(sbx-below-0.42.1/spec.yaml, sbx below 0.42.1) or auto (from `sbx version`; current "
    "without sbx)"
)


def _default_spec(spec: str, spec_shape: str) -> Path:
    from bandkit.kit import spec as kit_spec

    if spec:
        return Path(spec)
    return kit_spec.default_spec(kit_spec.resolve_shape(spec_shape))


@task(
    help={
        "image_ref": "registry reference without digest, e.g. 127.0.0.1:5000/band-python-kit:1.0.0",
        "digest": "sha256:<64 hex> as printed by `invoke image.push`",
        "spec": "spec to read (default: by --spec-shape; never modified)",
        "spec_shape": SPEC_SHAPE_HELP,
        "output": "write the stamped copy here (default: stdout)",
    }
)
@reports("kit.stamp")
def stamp(
    c: Context,
    image_ref: str = "",
    digest: str = "",
    spec: str = "",
    output: str = "",
    spec_shape: str = "auto",
) -> None:
    """Write a copy of the kit spec whose only change is `image: REF@sha256:...`."""
    from bandkit.kit import spec as kit_spec

    need(image_ref, "--image-ref", "127.0.0.1:5000/band-python-kit:1.0.0")
    need(digest, "--digest", "sha256:<64 hex>")
    target = Path(output) if output else None
    stamped = kit_spec.stamp_file(_default_spec(spec, spec_shape), image_ref, digest, target)
    if target is None:
        print(stamped, end="")
    else:
        print(f"kit.stamp: wrote {output}")


@task(
    help={
        "spec": "spec to validate (default: by --spec-shape)",
        "spec_shape": SPEC_SHAPE_HELP,
    }
)
@reports("kit.validate")
def validate(c: Context, spec: str = "", spec_shape: str = "auto") -> None:
    """`sbx kit validate` when sbx is installed, else our schema checks: PASS or INVALID."""
    from bandkit.kit import spec as kit_spec

    path = _default_spec(spec, spec_shape)
    verdict = kit_spec.validate_file(path)
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
        "runtime": "auto (sbx, else docker, else local), sbx, docker, swarm or local",
        "image": "docker, swarm: the image to run (default band-python-kit:local; an agent image "
        "from kit.build-agent starts with no download)",
        "agent_image": "docker, swarm: build (or find) the workspace's agent image and run it",
        "swarm_host": "swarm: the DOCKER_HOST of the swarm manager to run on (default "
        "BANDKIT_SWARM_HOST, else this machine's local cluster)",
        "timeout": "seconds to wait for the registration answer (default 120)",
        "wait": "seconds to wait for the agent to connect after create (default 60; 0: don't)",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("kit.provision")
def kit_provision(
    c: Context,
    name: str = "",
    description: str = "",
    workspace: str = "",
    agent_name: str = "",
    host: str = "",
    rest_url: str = "",
    create: bool = True,
    kit: str = "",
    runtime: str = "auto",
    image: str = "",
    agent_image: bool = False,
    swarm_host: str = "",
    timeout: int = 120,
    wait: int = 60,
    run_dir: str = "",
) -> None:
    """Register an agent, write its id into band.yaml, store its key, create the sandbox.

    The user key comes from BAND_API_KEY_USER or a prompt (never argv); the agent key is
    stored as a sandbox-scoped proxy-managed secret. Then it waits until the agent is
    connected to the platform (its home room `kit: NAME` lists it online); otherwise exit 1
    with the tail of the sandbox's logs. stdout is the agent id only; progress goes to
    stderr. Safe to re-run.
    """
    from bandkit.kit import commands

    where = Path(need(workspace, "--workspace", "./my-agent")).absolute()
    if swarm_host:
        _target_swarm(swarm_host, runtime)
    if agent_image:
        image = _agent_image(where, image, runtime)
    agent_id = commands.main(
        name=need(name, "--name", "my-agent"),
        description=need(description, "--description", '"what my agent does"'),
        workspace=where,
        agent_name=agent_name,
        host=host,
        rest_url=rest_url,
        create=create,
        kit=kit or None,
        runtime=runtime,
        timeout=timeout,
        run_dir=resolve_run_dir(c, run_dir),
        wait=wait,
        image=image or None,
    )
    print(agent_id)


def _target_swarm(host: str, runtime: str) -> None:
    """Point the swarm runtime at `host` (teardown finds it again in the manifest)."""
    from bandkit.runtimes.select import SWARM_HOST_ENV

    if runtime != "swarm":
        raise BandkitError("--swarm-host is for the swarm runtime: add --runtime swarm")
    if not host.startswith(("unix://", "tcp://", "ssh://")):
        raise BandkitError(
            f"--swarm-host {host[:80]!r}: give a DOCKER_HOST value (unix://, tcp:// or ssh://)"
        )
    os.environ[SWARM_HOST_ENV] = host


def _agent_image(workspace: Path, image: str, runtime: str) -> str:
    """The tag of the workspace's agent image on the kit image, built when missing."""
    if image:
        raise BandkitError("give --image or --agent-image, not both")
    if runtime not in ("docker", "swarm"):
        raise BandkitError(
            "--agent-image runs on the docker or swarm runtime: add --runtime docker (or swarm)"
        )
    from bandkit.image import agent

    made = agent.build(workspace, progress=lambda line: print(line, file=sys.stderr))
    print(f"provision: agent image {made.line()}", file=sys.stderr)
    return made.tag


@task(
    name="build-agent",
    help={
        "workspace": "the agent's workspace (band.yaml, pyproject.toml, uv.lock)",
        "base": "the image to build on: the kit image or one made from it "
        "(default band-python-kit:local)",
        "carry": "also hold the workspace in the image at this path (e.g. /workspace), "
        "for a cluster that mounts nothing (the Kubernetes render's workspace_dir)",
    },
)
@reports("kit.build-agent")
def kit_build_agent(c: Context, workspace: str = "", base: str = "", carry: str = "") -> None:
    """Build an agent image: the kit image with the workspace's locked dependencies synced
    into the sandbox-owned venv, so it starts with no `uv sync` and no download.

    Tagged by the digest of the base, uv.lock, pyproject.toml and the workspace path (with
    --carry: the carry path and the workspace's files); a re-run with none of them changed
    builds nothing. Proved before it is reported: a launch's sync phase in it, without
    network, skips uv. Prints the tag last; run it with `kit.provision --runtime docker
    --image TAG`, or name it as an agent's image in a fleet file to render.
    """
    from bandkit.image import agent
    from bandkit.image.facts import LOCAL_TAG

    made = agent.build(
        Path(need(workspace, "--workspace", "./my-agent")), base=base or LOCAL_TAG, carry=carry
    )
    print(f"kit.build-agent: {made.line()}")
    print(made.tag)


@task(
    name="unprovision",
    auto_shortflags=False,
    help={
        "name": "the --name given to kit.provision",
        "rest_url": "platform REST URL (same default rule as kit.provision)",
        "run_dir": RUN_DIR_HELP,
        "forget_unreachable": (
            "also clear the records of the agent and its room on a platform that does not "
            "answer (each one listed), for a platform you know is gone for good"
        ),
    },
)
@reports("kit.unprovision")
def kit_unprovision(
    c: Context,
    name: str = "",
    rest_url: str = "",
    run_dir: str = "",
    forget_unreachable: bool = False,
) -> None:
    """Remove what kit.provision recorded for NAME (sandbox, key, agent, rooms); reset agent.id.

    On a local platform whose state is gone the agent and its room are moot: cleared, and
    said so. On one that does not answer but may come back they are kept (it says how to
    bring it back) unless --forget-unreachable.
    """
    from bandkit.kit import commands

    lines, clean = commands.main_unprovision(
        name=need(name, "--name", "my-agent"),
        rest_url=rest_url,
        run_dir=resolve_run_dir(c, run_dir),
        forget=forget_unreachable,
    )
    print("\n".join(lines))
    if not clean:
        raise BandkitError("some resources remain (listed above); fix what each says and re-run")


@task(
    name="ping",
    auto_shortflags=False,
    help={
        "name": "the --name given to kit.provision",
        "rest_url": "platform REST URL (same default rule as kit.provision)",
        "timeout": "seconds to wait for the reply (default 30)",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("kit.ping")
def kit_ping(
    c: Context, name: str = "", rest_url: str = "", timeout: int = 30, run_dir: str = ""
) -> None:
    """Mention the agent in its home room with a marker; print its reply and the round trip."""
    from bandkit.kit import commands

    pong = commands.main_ping(
        name=need(name, "--name", "my-agent"),
        rest_url=rest_url,
        run_dir=resolve_run_dir(c, run_dir),
        timeout=timeout,
    )
    print(printable(pong.reply))  # the agent's text: its escape sequences stay inert
    print(f"kit.ping: answered in {pong.seconds * 1000:.0f} ms")


@task(
    name="status",
    auto_shortflags=False,
    help={
        "rest_url": "platform REST URL for agents whose platform keeps no key file here",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("kit.status")
def kit_status(c: Context, rest_url: str = "", run_dir: str = "") -> None:
    """List every agent provisioned here and, for each part (its platform, sandbox,
    proxies, firewall, supervisor, connection), whether it is up; exit 1 if one is down."""
    from bandkit.kit import resume

    lines, up = resume.main_status(run_dir=resolve_run_dir(c, run_dir), rest_url=rest_url)
    print(printable("\n".join(lines)))  # a platform's or sandbox's words may be in there
    if not up:
        raise Exit(code=1)


@task(
    name="resume",
    auto_shortflags=False,
    help={
        "name": "the --name given to kit.provision (one agent)",
        "all": "every agent provisioned in the run directory",
        "rest_url": "platform REST URL for agents whose platform keeps no key file here",
        "wait": "seconds to wait for each agent to connect (default 60)",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("kit.resume")
def kit_resume(
    c: Context,
    name: str = "",
    all: bool = False,
    rest_url: str = "",
    wait: int = 60,
    run_dir: str = "",
) -> None:
    """Bring back what a reboot or a crash took from an agent (or --all): its local
    platform (same address, same state), proxies, firewall chain, container or sandbox,
    supervisor; then wait until each is connected. Safe to re-run: what is up is kept."""
    from bandkit.kit import resume

    resume.main_resume(
        run_dir=resolve_run_dir(c, run_dir),
        name=name,
        every=all,
        rest_url=rest_url,
        wait=wait,
        log=lambda line: print(printable(line), flush=True),
    )


@task(
    name="boot-unit",
    auto_shortflags=False,
    help={
        "out": "where to write the unit file (it is not installed: the output says how)",
        "environment_file": (
            "an environment file for systemd to read (e.g. BAND_API_KEY_USER for a real "
            "deployment; keep it 0600): the unit names it, never its contents"
        ),
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("kit.boot-unit")
def kit_boot_unit(c: Context, out: str = "", environment_file: str = "", run_dir: str = "") -> None:
    """Write a systemd unit that runs `kit.resume --all` at boot (not installed)."""
    import sys

    from bandkit.fsio import write_atomic
    from bandkit.kit import boot_unit

    target = Path(need(out, "--out", boot_unit.UNIT_NAME)).absolute()
    text = boot_unit.unit_text(
        repo=Path.cwd(),
        run_dir=resolve_run_dir(c, run_dir),
        python=Path(sys.executable),
        environment_file=Path(environment_file).absolute() if environment_file else None,
    )
    write_atomic(target, text, mode=0o644)
    print(f"kit.boot-unit: wrote {target}")
    print(f"kit.boot-unit: {boot_unit.install_hint(target)}")


@task(
    name="allow",
    auto_shortflags=False,
    help={
        "name": "the --name given to kit.provision (a docker sandbox)",
        "host": "host to allow: host, host:port, *.domain, **.domain or an IP (no port: 80/443)",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("kit.allow")
def kit_allow(c: Context, name: str = "", host: str = "", run_dir: str = "") -> None:
    """Let sandbox NAME reach HOST through its egress proxy (recorded; unprovision removes it)."""
    from bandkit.kit import policy

    rule = policy.allow(
        name=need(name, "--name", "my-agent"),
        host=need(host, "--host", "api.example.com"),
        run_dir=resolve_run_dir(c, run_dir),
    )
    print(f"kit.allow: {name} may reach {rule}")


@task(
    name="policy-log",
    auto_shortflags=False,
    help={
        "name": "the --name given to kit.provision (a docker sandbox)",
        "json": "print sbx policy log --json's shape (blocked_hosts / allowed_hosts)",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("kit.policy-log")
def kit_policy_log(c: Context, name: str = "", json: bool = False, run_dir: str = "") -> None:
    """Print every request sandbox NAME made out: allowed or blocked, with the rule."""
    from bandkit.kit import policy

    shown = policy.policy_log(
        name=need(name, "--name", "my-agent"), run_dir=resolve_run_dir(c, run_dir), as_json=json
    )
    print(printable(shown))  # hosts the sandbox asked for


@task(
    name="bump-bases",
    help={
        "dockerfile": "Dockerfile to re-pin (repeatable; default: the kit image's)",
        "check": "only say which pins are stale; exit 1 if any is (nothing is written)",
    },
    iterable=["dockerfile"],
)
@reports("kit.bump-bases")
def kit_bump_bases(c: Context, dockerfile: list[str] | None = None, check: bool = False) -> None:
    """Re-pin the base images (ARG ...@sha256 lines) to their tags' current digests (online)."""
    from bandkit.image.facts import DOCKERFILE
    from bandkit.kit import bump_bases

    paths = [Path(p) for p in dockerfile or ()] or [DOCKERFILE]
    changes = bump_bases.bump(paths, write=not check)
    for change in changes:
        verb = ("stale" if check else "re-pinned") if change.changed else "current"
        print(f"kit.bump-bases: {change.path.name} {change.name}: {verb}: {change.new}")
    if check and any(change.changed for change in changes):
        raise Exit(code=1)
