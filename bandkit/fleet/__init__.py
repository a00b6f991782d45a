"""Fleets: one file describes many agents (`fleet.yaml`), rendered for a cluster engine.

- `spec`: the fleet file's schema (pydantic, strict), `load` with errors that name the
  file, the line and the field.
- `kubernetes`: `render`, the fleet as a kustomize base (a Sandbox or a Deployment per
  agent, its key's Secret, its NetworkPolicy, the credential proxy as a native sidecar).
  `schemas/sandbox-v1beta1.schema.json` is the JSON Schema its Sandbox objects are checked
  against offline (written from the agent-sandbox API reference).
- `converge` (imported by name: it reaches the kit): `up`, `status`, `rollout`, `down`,
  the converge loop over a run directory's fleet manifest.
"""

from pathlib import Path

from bandkit.fleet.kubernetes import render
from bandkit.fleet.spec import Agent, Fleet, FleetError, FleetFile, load

SANDBOX_SCHEMA = Path(__file__).with_name("schemas") / "sandbox-v1beta1.schema.json"

__all__ = ["SANDBOX_SCHEMA", "Agent", "Fleet", "FleetError", "FleetFile", "load", "render"]
