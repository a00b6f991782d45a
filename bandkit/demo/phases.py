"""The phases of `demo.up`, the progress line that starts each, and the small phase that
has no module of its own (egress and secrets).

`PHASES` is the order a run goes through; `phase_line` is the one format of their
progress lines (`demo.up: phase <name>: <what happens>`), which a user, the tests and the
benchmarks watch. The agents' keys are stored at provisioning, right after each
registration (a key is shown once); `egress_and_secrets` checks, fail closed, that the
runtime holds all three, each scoped to its sandbox, before any sandbox exists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from bandkit.demo import DemoError
from bandkit.kit.provision import ProvisionRequest, sandbox_env
from bandkit.runtimes.base import Runtime, SandboxError
from examples.docker_demo.cast import Role

PHASES: Final = (
    "preflight",
    "provision",
    "egress and secrets",
    "sandboxes",
    "connect",
    "meeting",
    "verdict",
    "teardown",
)


def phase_line(name: str, detail: str) -> str:
    """The progress line that starts phase `name` (one of `PHASES`)."""
    assert name in PHASES, name
    return f"demo.up: phase {name}: {detail}"


def egress_and_secrets(
    requests: Mapping[Role, ProvisionRequest], runtime: Runtime, say: Callable[[str], None]
) -> None:
    """Check every agent's key is held by the runtime, scoped to its sandbox (fail closed),
    and say which egress each sandbox gets (made with the sandbox, as the runtime allows)."""
    hosts = sorted({host for r in requests.values() for host in sandbox_env(r)[1]})
    say(
        phase_line(
            "egress and secrets",
            f"agent keys as {runtime.name.value} secrets scoped to each sandbox; egress to "
            f"{', '.join(hosts) or 'the platform'}",
        )
    )
    try:
        missing = [
            r.name for r in requests.values() if not runtime.has_secret(r.name, r.secret_host)
        ]
    except SandboxError as exc:
        raise DemoError(f"cannot check the stored agent keys: {exc}") from None
    if missing:
        raise DemoError(f"no agent key is stored for {', '.join(missing)}; run `demo.down`")
