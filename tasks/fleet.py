"""`fleet.*`: many agents from one file (bandkit/fleet/)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from invoke.context import Context
from invoke.tasks import task

from bandkit.terminal import printable
from tasks._common import RUN_DIR_HELP, need, reports, resolve_run_dir

if TYPE_CHECKING:
    from bandkit.fleet.converge import Target


@task(
    name="render",
    help={
        "file": "the fleet file (default fleet.yaml)",
        "target": "what to render for: kubernetes",
        "out": "the directory to write (created; a re-render keeps its keys/)",
        "workload": "sandbox (agents.x-k8s.io Sandbox, default) or deployment",
        "runtime_class": "the pods' runtimeClassName (default gvisor; kata for Kata)",
        "namespace": "the namespace (default band-agents)",
        "platform": "the Band platform URL the proxies reach (default https://app.band.ai)",
        "proxy_image": "the credential proxy sidecar's image (`fleet.build-proxy` makes "
        "band-credential-proxy:local; push it where the cluster pulls from)",
    },
)
@reports("fleet.render")
def fleet_render(
    c: Context,
    file: str = "fleet.yaml",
    target: str = "",
    out: str = "",
    workload: str = "sandbox",
    runtime_class: str = "gvisor",
    namespace: str = "band-agents",
    platform: str = "https://app.band.ai",
    proxy_image: str = "band-credential-proxy:local",
) -> None:
    """Render the fleet for a cluster engine: a kustomize base (`kubectl apply -k OUT`).

    Per agent: its Sandbox (or Deployment), its NetworkPolicy and its key's Secret (from
    OUT/keys/NAME.key, 0600, written with a placeholder when absent: put the agent's key
    there). Checked offline by the tests; the README's fleet section says what was not.
    """
    from bandkit import fleet

    if need(target, "--target", "kubernetes") != "kubernetes":
        raise fleet.FleetError(f"--target must be kubernetes (got {target!r})")
    loaded = fleet.load(Path(file))
    written = fleet.render(
        loaded,
        Path(need(out, "--out", "dist/fleet")),
        workload_kind=workload,  # type: ignore[arg-type]
        runtime_class=runtime_class,
        namespace=namespace,
        platform=platform,
        proxy_image=proxy_image,
    )
    print(f"fleet.render: {len(loaded.spec.agents)} agent(s), {len(written)} file(s) in {out}")
    print(
        f"fleet.render: put each agent's key in {out}/keys/<name>.key, then "
        f"`kubectl apply -k {out}`"
    )


@task(
    name="build-proxy",
    help={"base": "the kit image to build on (default band-python-kit:local)"},
)
@reports("fleet.build-proxy")
def fleet_build_proxy(c: Context, base: str = "") -> None:
    """Build the credential proxy's sidecar image that `fleet.render` names:
    band-credential-proxy:local (and :<digest>), the kit image with the proxy added.

    It runs as uid 1000 with no capability and a read-only root, reads the agent's key
    and its client token from mounted files, and forwards only the platform's agent API.
    A re-run with neither the kit image nor the proxy changed builds nothing. Proved
    before it is reported: it runs with no network and answers --help.
    """
    from bandkit.image import proxy
    from bandkit.image.facts import LOCAL_TAG

    made = proxy.build(base=base or LOCAL_TAG)
    print(f"fleet.build-proxy: {made.line()}, tagged {proxy.LOCAL}")
    print(made.tag)


RUNTIME_HELP = "auto (sbx, else docker, else local), sbx, docker, swarm or local (default auto)"
PARALLEL_HELP = "how many agents are changed at once (default 4)"


def _target(run_dir: Path, rest_url: str) -> Target:
    from bandkit.fleet.converge import target_for

    target = target_for(run_dir, rest_url)
    assert target is not None  # a stopped local platform is an error when not stopped_ok
    return target


@task(
    name="up",
    auto_shortflags=False,
    help={
        "file": "the fleet file (default fleet.yaml)",
        "runtime": RUNTIME_HELP,
        "prune": "also remove the agents this fleet made that the file no longer names",
        "dry_run": "print the plan and change nothing",
        "parallel": PARALLEL_HELP,
        "rest_url": "platform REST URL (same default rule as kit.provision)",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("fleet.up")
def fleet_up(
    c: Context,
    file: str = "fleet.yaml",
    runtime: str = "auto",
    prune: bool = False,
    dry_run: bool = False,
    parallel: int = 4,
    rest_url: str = "",
    run_dir: str = "",
) -> None:
    """Make the fleet what the file says: print the plan, then create, update, restart
    (and with --prune remove) agents, each proved connected. A re-run with nothing
    changed does nothing and says so. Progress goes to stderr, the plan to stdout."""
    from bandkit import fleet
    from bandkit.fleet import converge

    loaded = fleet.load(Path(file))
    converge.up(
        loaded,
        _target(resolve_run_dir(c, run_dir), rest_url),
        runtime=runtime,
        prune=prune,
        dry_run=dry_run,
        parallel=parallel,
        out=_out,
    )


@task(
    name="status",
    auto_shortflags=False,
    help={
        "json": "print the rows as a JSON list",
        "rest_url": "platform REST URL (same default rule as kit.provision)",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("fleet.status")
def fleet_status(c: Context, json: bool = False, rest_url: str = "", run_dir: str = "") -> None:
    """One line per agent: runtime, node, state, connected, last seen, image id. Changes
    nothing; CONNECTED is `?` when the platform does not answer."""
    import dataclasses
    import json as json_module

    from bandkit.fleet import converge

    where = resolve_run_dir(c, run_dir)
    rows = converge.status(where, converge.target_for(where, rest_url, stopped_ok=True))
    if json:
        print(json_module.dumps([dataclasses.asdict(r) for r in rows], indent=2))
        return
    if not rows:
        print(f"fleet.status: no fleet in {where}")
        return
    table = [converge.Row.HEADER, *(r.cells() for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(converge.Row.HEADER))]
    for line in table:
        print(
            printable(
                "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
            )
        )


@task(
    name="rollout",
    auto_shortflags=False,
    help={
        "image": "the kit image (or an image made from it) to move every agent onto",
        "parallel": "how many agents per batch (default 2)",
        "rest_url": "platform REST URL (same default rule as kit.provision)",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("fleet.rollout")
def fleet_rollout(
    c: Context, image: str = "", parallel: int = 2, rest_url: str = "", run_dir: str = ""
) -> None:
    """Move the fleet onto another image, a batch at a time: each batch is connected
    again before the next starts. A failed batch is put back on the image it ran and the
    rollout stops (exit 1). A later fleet.up goes back to the file's image: update the
    file's `image` to keep the new one."""
    from bandkit.fleet import converge

    converge.rollout(
        _target(resolve_run_dir(c, run_dir), rest_url),
        need(image, "--image", "band-python-kit:next"),
        parallel=parallel,
        out=_out,
    )


@task(
    name="down",
    auto_shortflags=False,
    help={
        "parallel": PARALLEL_HELP,
        "rest_url": "platform REST URL (same default rule as kit.provision)",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("fleet.down")
def fleet_down(c: Context, parallel: int = 4, rest_url: str = "", run_dir: str = "") -> None:
    """Remove every agent of the fleet (platform agent, sandbox, key, rooms, its copy of
    the workspace) and the fleet's records; re-run it after a failure."""
    from bandkit.fleet import converge
    from bandkit.fleet.converge import Target

    where = resolve_run_dir(c, run_dir)
    target = converge.target_for(where, rest_url, stopped_ok=True)
    if target is None:  # the local platform is stopped: its records are cleared on teardown
        from bandkit.kit import commands

        choice = commands.choose_platform(rest_url, where, stopped_ok=True)
        target = Target(choice.rest_url, choice.websocket, commands.user_key(choice), {}, where)
    converge.down(target, parallel=parallel, out=_out)


def _out(line: str) -> None:
    print(line, flush=True)
