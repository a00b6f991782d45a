"""The Docker Engine the docker runtime drives: its CLI binary run with argv and a timeout
(never a shell), and a container's state.

`Engine` is the handle every part of the runtime takes. Environment values never go into
argv: `docker create` reads them from a 0600 `base.env_file`, `docker exec` from its own
environment (`run_tool(env=...)`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bandkit.runtimes.base import ExecResult, SandboxStatus, run_tool, validate_name

T_QUICK = 60.0
T_CREATE = 300.0


@dataclass(frozen=True)
class Engine:
    """The docker binary (a path or a name on PATH) and the daemon it targets: `host` as
    its DOCKER_HOST (a swarm manager), else the one its environment names."""

    binary: str = "docker"
    host: str | None = None

    def run(
        self,
        *args: str,
        what: str,
        timeout: float = T_QUICK,
        check: bool = True,
        input: str | None = None,
        redact: tuple[str, ...] = (),
    ) -> ExecResult:
        result = run_tool(
            [self.binary, *args],
            what=f"docker {what}",
            timeout=timeout,
            check=check,
            input=input,
            redact=redact,
            env={"DOCKER_HOST": self.host} if self.host else None,
        )
        return ExecResult(result.returncode, result.stdout, result.stderr)


def container_status(engine: Engine, name: str) -> SandboxStatus:
    """Running, stopped, or absent (no container of that name)."""
    result = engine.run(
        "inspect",
        "--type",
        "container",
        "--format",
        "{{.State.Running}}",
        validate_name(name),
        what="inspect",
        check=False,
    )
    if result.returncode != 0:
        return SandboxStatus.ABSENT
    running = result.stdout.strip() == "true"
    return SandboxStatus.RUNNING if running else SandboxStatus.STOPPED
