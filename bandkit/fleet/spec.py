"""The fleet file: one YAML document naming many agents, validated strictly.

    version: 1
    defaults:                 # optional; each agent may override any of these
      image: band-python-kit:local
      resources: {cpu: 500m, memory: 512Mi}
    agents:
      - name: echo-1          # the sandbox name (1-63 of a-z, 0-9, '-')
        description: an echo agent in the example fleet
        workspace: ../../docker/band_python_kit/echo-agent   # relative to this file
        image: band-agent-echo:...   # optional: an agent image (kit.build-agent)
        workspace_dir: /workspace    # kubernetes: where the image holds the workspace
        resources: {cpu: 250m, memory: 256Mi}
        placement: {constraints: ["node.role==worker"]}

Unknown fields are errors. An error names the file, the line and the field
(`fleet.yaml:7: agents[0].name: ...`): the document is read with ruamel, which keeps each
node's line, and pydantic's error location is walked back onto it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from bandkit.errors import BandkitError
from bandkit.runtimes.base import Limits

NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")
CPU = re.compile(r"[0-9]+(\.[0-9]+)?m?")
MEMORY = re.compile(r"[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?")
MEMORY_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
MEMORY_UNITS |= {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


class FleetError(BandkitError):
    """The fleet file cannot be read or is invalid; the message names file, line, field."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Resources(Strict):
    cpu: Annotated[str, Field(pattern=CPU.pattern)] = "500m"
    memory: Annotated[str, Field(pattern=MEMORY.pattern)] = "512Mi"


def cpus(quantity: str) -> str:
    """A Kubernetes CPU quantity as a decimal number of CPUs: 250m -> 0.25, 2 -> 2."""
    if quantity.endswith("m"):
        return f"{int(float(quantity[:-1])) / 1000:g}"
    return f"{float(quantity):g}"


def memory_bytes(quantity: str) -> int:
    """A Kubernetes memory quantity in bytes: 256Mi -> 268435456, 1G -> 10**9."""
    digits = quantity.rstrip("KMGTikmgt")
    return int(digits) * MEMORY_UNITS[quantity[len(digits) :]]


class Placement(Strict):
    constraints: tuple[str, ...] = ()  # swarm-style `node.role==worker`, `node.labels.k==v`


class Defaults(Strict):
    image: str = "band-python-kit:local"
    resources: Resources = Resources()
    placement: Placement = Placement()


class Agent(Strict):
    name: str
    description: Annotated[str, Field(min_length=10, max_length=500)]
    workspace: Path | None = None
    image: str | None = None
    workspace_dir: Annotated[str, Field(pattern=r"/[A-Za-z0-9._/-]*")] = "/workspace"
    resources: Resources | None = None
    placement: Placement | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if NAME.fullmatch(value) is None:
            raise ValueError("use 1-63 lower-case letters, digits and '-', starting alphanumeric")
        return value

    @model_validator(mode="after")
    def _source(self) -> Agent:
        if self.workspace is None and self.image is None:
            raise ValueError("give a workspace, an image, or both")
        return self


class FleetFile(Strict):
    version: Literal[1]
    defaults: Defaults = Defaults()
    agents: Annotated[tuple[Agent, ...], Field(min_length=1)]

    @field_validator("agents")
    @classmethod
    def _unique(cls, agents: tuple[Agent, ...]) -> tuple[Agent, ...]:
        seen: set[str] = set()
        for agent in agents:
            if agent.name in seen:
                raise ValueError(f"agent name {agent.name!r} appears twice")
            seen.add(agent.name)
        return agents


class Fleet:
    """A validated fleet file and where it is (workspaces are relative to it)."""

    def __init__(self, path: Path, spec: FleetFile) -> None:
        self.path = path
        self.spec = spec

    def workspace(self, agent: Agent) -> Path | None:
        if agent.workspace is None:
            return None
        return (self.path.parent / agent.workspace).resolve()

    def image(self, agent: Agent) -> str:
        return agent.image or self.spec.defaults.image

    def resources(self, agent: Agent) -> Resources:
        return agent.resources or self.spec.defaults.resources

    def placement(self, agent: Agent) -> Placement:
        return agent.placement or self.spec.defaults.placement

    def limits(self, agent: Agent) -> Limits:
        """The agent's resources (as limits) and placement, for its sandbox."""
        resources = self.resources(agent)
        return Limits(
            cpus=cpus(resources.cpu),
            memory_bytes=memory_bytes(resources.memory),
            constraints=self.placement(agent).constraints,
        )


def load(path: Path) -> Fleet:
    """Read and validate `path`; FleetError naming the line and field on any problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FleetError(f"{path}: cannot read it ({exc.strerror})") from None
    try:
        document = YAML(typ="rt").load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise FleetError(f"{path}{at}: {problem}") from None
    if not isinstance(document, dict):
        raise FleetError(f"{path}:1: a fleet file is a mapping (version, defaults, agents)")
    try:
        spec = FleetFile.model_validate(_plain(document))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in first["loc"])
        where = where.replace(".[", "[")
        line = _line(document, first["loc"])
        field = f" {where}:" if where else ""
        raise FleetError(f"{path}:{line}:{field} {first['msg']}") from None
    for agent in spec.agents:
        workspace = Fleet(path, spec).workspace(agent)
        if workspace is not None and not (workspace / "band.yaml").is_file():
            index = spec.agents.index(agent)
            line = _line(document, ("agents", index, "workspace"))
            raise FleetError(
                f"{path}:{line}: agents[{index}].workspace: {workspace} has no band.yaml"
            )
    return Fleet(path, spec)


def _plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k): _plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_plain(v) for v in node]
    return node


def _line(document: Any, loc: tuple[Any, ...]) -> int:
    """The 1-based line of the deepest node of `loc` the document has."""
    node, line = document, 1
    for part in loc:
        lc = getattr(node, "lc", None)
        try:
            if lc is not None:
                row = lc.key(part)[0] if isinstance(node, dict) else lc.item(part)[0]
                line = row + 1
            node = node[part]
        except (KeyError, IndexError, TypeError):
            break
    return line
