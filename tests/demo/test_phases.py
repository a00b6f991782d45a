"""`demo.up`'s phases: their one progress-line format, the egress-and-secrets check (fail
closed), and a bad `DEMO_POLL_INTERVAL_S` refused before anything exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandkit.demo import DemoError, run
from bandkit.demo.layout import DemoLayout
from bandkit.demo.phases import PHASES, egress_and_secrets, phase_line
from bandkit.demo.preflight import UpOptions
from bandkit.kit.provision import ProvisionRequest
from bandkit.runtimes.base import PROXY_MANAGED_PLACEHOLDER, Secret
from bandkit.runtimes.local import LocalRuntime
from examples.docker_demo.cast import CAST, Role

REST = "http://127.0.0.1:9"


def test_the_phases_in_order_and_their_line() -> None:
    assert PHASES == (
        "preflight",
        "provision",
        "egress and secrets",
        "sandboxes",
        "connect",
        "meeting",
        "verdict",
        "teardown",
    )
    assert phase_line("connect", "waiting") == "demo.up: phase connect: waiting"
    with pytest.raises(AssertionError):
        phase_line("lunch", "no such phase")


def requests(tmp_path: Path) -> dict[Role, ProvisionRequest]:
    return {
        role: ProvisionRequest(
            name=CAST[role].sandbox,
            description=CAST[role].description,
            workspace=tmp_path / role.value,
            rest_url=REST,
            create=False,
        )
        for role in Role
    }


def test_egress_and_secrets_fails_closed_on_a_missing_key(tmp_path: Path) -> None:
    runtime = LocalRuntime(tmp_path / "rt")
    wanted = requests(tmp_path)
    pm = wanted[Role.PM]
    secret = Secret("BAND_API_KEY", (pm.secret_host,), "k-pm", PROXY_MANAGED_PLACEHOLDER)
    runtime.set_secret(pm.name, secret)
    lines: list[str] = []
    with pytest.raises(DemoError, match="no agent key is stored for band-demo-dev, band-demo-arch"):
        egress_and_secrets(wanted, runtime, lines.append)
    assert lines == [
        "demo.up: phase egress and secrets: agent keys as local secrets scoped to each sandbox; "
        "egress to 127.0.0.1:9"
    ]
    for role in (Role.DEV, Role.ARCHITECT):
        runtime.set_secret(wanted[role].name, secret)
    egress_and_secrets(wanted, runtime, lines.append)  # all three held: passes
    assert "k-pm" not in "\n".join(lines)


def test_a_bad_poll_interval_is_refused_before_anything_exists(tmp_path: Path) -> None:
    lines: list[str] = []
    options = UpOptions(run_dir=tmp_path / "run", runtime="local")
    with pytest.raises(DemoError, match=r"^DEMO_POLL_INTERVAL_S must be a number of seconds"):
        run.up(options, env={"DEMO_POLL_INTERVAL_S": "0"}, log=lines.append)
    assert lines == [phase_line("preflight", lines[0].split(": ", 2)[2])]
    assert not DemoLayout.for_run_dir(tmp_path / "run").home.exists()
