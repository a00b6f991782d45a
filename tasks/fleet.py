"""`fleet.*`: many agents from one file (bandkit/fleet/)."""

from __future__ import annotations

from pathlib import Path

from invoke.context import Context
from invoke.tasks import task

from tasks._common import need, reports


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
        "proxy_image": "the credential proxy sidecar's image",
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
