"""The kit spec's facts, stated once, and the two shapes sbx accepts rendered from them.

- `FACTS`: name, image, startup argv, egress allowlist, agent instructions, user, ... .
- `render_current(facts)`: the shape sbx 0.42.1+ accepts (`sandbox.entrypoint`,
  `permissions.network`, `agentInstructions`); this is the kit directory's `spec.yaml`,
  what `sbx create --kit docker/band_python_kit` and `sbx kit validate` read.
- `render_legacy(facts)`: the shape sbx below 0.42.1 accepts (`commands.startup`,
  `caps.network`, `agentContext`, `sandbox.aiFilename`); this is
  `sbx-below-0.42.1/spec.yaml`, a kit directory of its own (its comments live in the
  templates below).

Both files are generated: edit the facts or the templates here, then run
`uv run python -m bandkit.kit.spec_source --write`. `tests/kit/test_spec_shapes.py` fails
when a checked-in file differs from what this module writes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

import yaml

from bandkit.fsio import write_atomic
from bandkit.image.facts import LOCAL_TAG, SPEC, SPEC_LEGACY
from bandkit.kit.spec import ALLOWLIST, KIT_NAME, LAUNCH_COMMAND

CURRENT_PATH = SPEC
LEGACY_PATH = SPEC_LEGACY


@dataclass(frozen=True)
class KitFacts:
    name: str
    display_name: str
    description: str
    image: str
    startup: tuple[str, ...]  # argv: the entrypoint script, then the launcher
    user: str  # the user the startup argv starts as (the entrypoint drops to uid 1000)
    allow: tuple[str, ...]  # the egress baseline
    instructions: str  # markdown for the agent: agentContext / agentInstructions
    ai_filename: str = "AGENTS.md"  # legacy only: where sbx writes the instructions
    # The kit declares no credentials: keys are stored per sandbox by `kit.provision`
    # and injected by the sandbox proxy (a kit-declared inject crashed `sbx create` 0.35).
    credentials: tuple[Mapping[str, object], ...] = field(default=())


FACTS = KitFacts(
    name=KIT_NAME,
    display_name="Band Python Agent",
    description="Runs a Python agent on the Band multi-agent platform from a locked uv workspace.",
    image=LOCAL_TAG,
    startup=LAUNCH_COMMAND,
    user="0",
    allow=ALLOWLIST,
    instructions=(
        "This sandbox runs a Band agent from the workspace's uv project.\n"
        "- Change dependencies with `uv add` / `uv lock` and commit uv.lock; the launcher syncs\n"
        "  exactly what is locked, and refuses a stale lock.\n"
        "- Ask for network access per host, only for what the agent needs.\n"
        "- Never print, log or commit credentials; keys are injected by the sandbox proxy.\n"
    ),
)


def _scalar(value: str) -> str:
    """`value` as a YAML scalar: plain when it reads back unchanged, else double-quoted."""
    try:
        plain_ok = yaml.safe_load(value) == value and value.strip() == value and "#" not in value
    except yaml.YAMLError:
        plain_ok = False
    return value if plain_ok and value else json.dumps(value)


def _flow(items: Sequence[str]) -> str:
    for item in items:
        if "," in item or "[" in item or "]" in item:
            return json.dumps(list(items))
    return "[" + ", ".join(_scalar(item) for item in items) + "]"


def _items(items: Sequence[str], indent: str) -> str:
    return "".join(f"{indent}- {_scalar(item)}\n" for item in items)


def _block(text: str, indent: str = "  ") -> str:
    if not text.endswith("\n") or text.startswith((" ", "\n")):
        raise ValueError("the agent instructions must be non-empty lines ending in a newline")
    return "".join(f"{indent}{line}\n" if line else "\n" for line in text[:-1].split("\n"))


def _check(facts: KitFacts) -> None:
    if facts.credentials:
        raise ValueError(
            "the kit spec carries no credentials block: keys are per sandbox (kit.provision)"
        )
    if not facts.startup or not facts.allow:
        raise ValueError("the kit needs a startup argv and an egress allowlist")


# The templates hold the files' comments; `$name` fields come from the facts.
_HEAD = """\
schemaVersion: "2"
kind: sandbox
name: $name
displayName: $display_name
description: $description
"""

_LEGACY = Template(
    """\
# Kit spec for sbx below 0.42.1 (0.34-0.42.0): schemaVersion "2" in the older field
# grammar, which sbx 0.42.1+ rejects; ../spec.yaml is the current shape. Use this
# directory as the kit there: `sbx create --kit .../sbx-below-0.42.1 ...`. Generated with
# ../spec.yaml from one set of facts: edit bandkit/kit/spec_source.py and run
# `uv run python -m bandkit.kit.spec_source --write`, never this file. Releases stamp the
# `image:` line to <registry ref>@sha256:<digest> and publish it as the kit tag
# X.Y.Z-sbx-below-0.42.1.
"""
    + _HEAD
    + """\
sandbox:
  image: $image
  aiFilename: $ai_filename
commands:
  # Headless: re-runs on every sandbox start, through the entrypoint (CA, drop to uid 1000)
  # into the launcher. No sandbox.entrypoint: in sbx 0.34 that runs only on an attached PTY.
  startup:
    - command: $startup
      user: $user
      background: true
      description: Launch the Band agent
caps:
  network:
    # The minimal egress baseline: Band and the two PyPI hosts. Everything else is a
    # per-sandbox opt-in (`sbx policy allow network --sandbox NAME HOST`).
    allow:
${allow}\
agentContext: |
$instructions"""
)

_CURRENT = Template(
    """\
# Kit spec in the current shape (sbx 0.42.1+: schemaVersion "2" with its own decoder).
# For sbx below 0.42.1 use the kit directory sbx-below-0.42.1/ beside this file (the
# legacy commands/caps/agentContext grammar). Both are generated from one set of facts:
# edit bandkit/kit/spec_source.py and run `uv run python -m bandkit.kit.spec_source
# --write`, never this file. The repo copy points at the locally built image; releases
# stamp the `image:` line to <registry ref>@sha256:<digest> (`uv run invoke kit.stamp`).
"""
    + _HEAD
    + """\
sandbox:
  image: $image
  # Starts as the image's user (uid $user_id; this shape has no user key); the script
  # installs the proxy CA, drops to uid 1000 and execs the launcher. From sbx 0.43 it
  # runs only while a host process keeps `sbx run --name NAME` attached.
  entrypoint: $startup
permissions:
  network:
    # The minimal egress baseline: Band and the two PyPI hosts. Everything else is a
    # per-sandbox opt-in (`sbx policy allow network --sandbox NAME HOST`).
    allow:
${allow}\
agentInstructions: |
$instructions"""
)


def _fields(facts: KitFacts) -> dict[str, str]:
    _check(facts)
    return {
        "name": _scalar(facts.name),
        "display_name": _scalar(facts.display_name),
        "description": _scalar(facts.description),
        "image": _scalar(facts.image),
        "ai_filename": _scalar(facts.ai_filename),
        "startup": _flow(facts.startup),
        "user": json.dumps(facts.user),
        "user_id": facts.user,
        "allow": _items(facts.allow, "      "),
        "instructions": _block(facts.instructions),
    }


def render_legacy(facts: KitFacts = FACTS) -> str:
    """The shape of sbx below 0.42.1: `sbx-below-0.42.1/spec.yaml`."""
    return _LEGACY.substitute(_fields(facts))


def render_current(facts: KitFacts = FACTS) -> str:
    """The current shape (sbx 0.42.1+ accepts only this one): the kit's `spec.yaml`."""
    return _CURRENT.substitute(_fields(facts))


def rendered(facts: KitFacts = FACTS) -> dict[Path, str]:
    """Each generated file and its text."""
    return {CURRENT_PATH: render_current(facts), LEGACY_PATH: render_legacy(facts)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bandkit.kit.spec_source",
        description="Render the kit spec in both shapes from one set of facts.",
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--write", action="store_true", help="write spec.yaml and sbx-below-0.42.1/spec.yaml"
    )
    mode.add_argument("--check", action="store_true", help="exit 1 if a file differs")
    args = parser.parse_args(argv)
    stale = []
    for path, text in rendered().items():
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        if args.write:
            path.parent.mkdir(mode=0o755, exist_ok=True)
            write_atomic(path, text, mode=0o644)
            print(f"wrote {path}")
        else:
            stale.append(path)
    for path in stale:
        print(f"{path} differs from the generator; run with --write", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
