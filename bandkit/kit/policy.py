"""What `invoke kit.allow` / `kit.policy-log` call: a provisioned sandbox's egress policy.

The sandbox is found through its provisioning manifest (`<run_dir>/provision/<name>/`,
as `kit.provision` wrote it) and the runtime recorded there. Docker sandboxes have the
kit's own egress proxy: a grant is recorded in that manifest before it takes effect (so
`kit.unprovision` removes it), and the log lists every allowed and blocked request.
sbx has its own policy commands, named in the error; the local runtime has no egress
control at all.
"""

from __future__ import annotations

from pathlib import Path

from bandkit.errors import BandkitError
from bandkit.manifest import Kind, Manifest, ManifestError
from bandkit.proxies import egress
from bandkit.runtimes.base import RuntimeName, SandboxError, validate_name
from bandkit.runtimes.docker import DockerRuntime
from bandkit.runtimes.select import get_runtime


class PolicyError(BandkitError):
    """The sandbox has no egress policy here, or the grant could not be made."""


def _manifest_path(run_dir: Path, name: str) -> Path:
    from bandkit.kit.commands import manifest_path

    path = manifest_path(run_dir, name)
    if not path.is_file():
        raise PolicyError(
            f"no sandbox {name!r} was provisioned in {run_dir} (no manifest at {path}); "
            "run kit.provision first"
        )
    return path


def _docker(manifest: Manifest, name: str, run_dir: Path) -> DockerRuntime:
    used = {
        r.details.get("runtime", "")
        for r in manifest.resources
        if r.kind is Kind.SANDBOX and r.details.get("name") == name
    }
    if RuntimeName.DOCKER.value in used:
        runtime = get_runtime("docker", run_dir=run_dir / "runtimes", manifest=manifest)
        assert isinstance(runtime, DockerRuntime)
        return runtime
    if RuntimeName.SBX.value in used:
        raise PolicyError(
            f"{name} is an sbx sandbox: use `sbx policy allow network --sandbox {name} HOST` "
            f"and `sbx policy log {name}`"
        )
    if RuntimeName.LOCAL.value in used:
        raise PolicyError(f"{name} is a local sandbox: the local runtime has no egress policy")
    raise PolicyError(f"the manifest of {name} records no sandbox (created with --no-create?)")


def allow(*, name: str, host: str, run_dir: Path) -> str:
    """Grant sandbox `name` egress to `host` (host[:port], *.domain, **.domain, an IP)."""
    name = validate_name(name)
    try:
        with Manifest.open(_manifest_path(run_dir, name)) as manifest:
            return _docker(manifest, name, run_dir).allow(name, host)
    except (ManifestError, SandboxError, egress.EgressError) as exc:
        raise PolicyError(str(exc)) from None


def policy_log(*, name: str, run_dir: Path, as_json: bool = False) -> str:
    """The sandbox's allowed and blocked requests: a table, or `sbx policy log --json`'s
    shape (`blocked_hosts` / `allowed_hosts`)."""
    import json

    name = validate_name(name)
    try:
        with Manifest.open(_manifest_path(run_dir, name)) as manifest:
            events = _docker(manifest, name, run_dir).policy_log(name)
    except (ManifestError, SandboxError) as exc:
        raise PolicyError(str(exc)) from None
    summary = egress.summarize(events)
    return json.dumps(summary, indent=2) if as_json else egress.render(summary)
