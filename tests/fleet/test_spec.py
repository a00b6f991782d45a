"""The fleet file (bandkit/fleet/spec.py): the example loads; every invalid file names its
file, line and field, and nothing else is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandkit.fleet import FleetError, load, spec
from bandkit.runtimes.base import Limits

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fleet" / "fleet.yaml"
STARTER = "../../docker/band_python_kit/echo-agent"


def test_the_example_fleet_loads_with_its_defaults_and_overrides() -> None:
    fleet = load(EXAMPLE)
    names = [a.name for a in fleet.spec.agents]
    assert names == ["echo-1", "echo-2", "echo-3"]
    first, third = fleet.spec.agents[0], fleet.spec.agents[2]
    assert fleet.workspace(first) == (REPO / "docker/band_python_kit/echo-agent").resolve()
    assert fleet.resources(first).memory == "256Mi"
    assert fleet.resources(third).memory == "512Mi"
    assert fleet.image(first) == "band-python-kit:local"


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "ws").mkdir(exist_ok=True)
    (tmp_path / "ws" / "band.yaml").write_text("agent: {}\n")
    path = tmp_path / "fleet.yaml"
    path.write_text(text)
    return path


AGENT = "  - name: one\n    description: an agent of the test fleet\n    workspace: ws\n"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "version: 1\nagents:\n" + AGENT + "    colour: blue\n",
            ":6: agents[0].colour: Extra inputs are not permitted",
        ),
        (
            "version: 1\nagents:\n  - name: One_1\n    description: an agent of the test fleet\n"
            "    workspace: ws\n",
            ":3: agents[0].name: Value error, use 1-63 lower-case",
        ),
        ("version: 2\nagents:\n" + AGENT, ":1: version: Input should be 1"),
        ("version: 1\nagents:\n" + AGENT + AGENT, ":2: agents: Value error, agent name 'one'"),
        (
            "version: 1\nagents:\n  - name: one\n    description: short\n    workspace: ws\n",
            ":4: agents[0].description: String should have at least 10 characters",
        ),
        (
            "version: 1\nagents:\n  - name: one\n    description: an agent of the test fleet\n",
            ":3: agents[0]: Value error, give a workspace, an image, or both",
        ),
        (
            "version: 1\ndefaults:\n  resources: {cpu: lots}\nagents:\n" + AGENT,
            ":3: defaults.resources.cpu: String should match pattern",
        ),
        (
            "version: 1\nagents:\n  - name: one\n    description: an agent of the test fleet\n"
            "    workspace: nowhere\n",
            ":5: agents[0].workspace:",
        ),
        ("version: 1\nagents: [\n", ":3: expected the node content"),
        ("- just a list\n", ":1: a fleet file is a mapping"),
    ],
)
def test_an_invalid_fleet_names_the_file_the_line_and_the_field(
    tmp_path: Path, text: str, says: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(FleetError) as caught:
        load(path)
    message = str(caught.value)
    assert message.startswith(str(path)), message
    assert says in message, message


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match=r"fleet.yaml: cannot read it"):
        load(tmp_path / "fleet.yaml")


@pytest.mark.parametrize(
    ("cpu", "memory", "cpus", "memory_bytes"),
    [("250m", "256Mi", "0.25", 256 * 2**20), ("2", "1G", "2", 10**9), ("1500m", "64", "1.5", 64)],
)
def test_resources_become_the_runtimes_limits(
    cpu: str, memory: str, cpus: str, memory_bytes: int
) -> None:
    assert (spec.cpus(cpu), spec.memory_bytes(memory)) == (cpus, memory_bytes)


def test_each_agent_gets_its_resources_and_placement_as_limits() -> None:
    fleet = load(EXAMPLE)
    limits = {a.name: fleet.limits(a) for a in fleet.spec.agents}
    assert limits["echo-1"] == Limits(cpus="0.25", memory_bytes=256 * 2**20)
    assert limits["echo-3"] == Limits(cpus="0.5", memory_bytes=512 * 2**20)
