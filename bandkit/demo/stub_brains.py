"""The stub brains' host side: the LLM stub that stands in for both providers.

`start` (called by `brains.prepare`), in order:

1. the scenario compiled into one stub script per role (`stub_scripts`)
   under `<run dir>/demo/llm/scripts/`;
2. a fresh 0600 key file there: one canary key per role, bound to the role's script
   (`anthropic:pm=`, `openai:dev=`, `openai:architect=`), held by the host only;
3. the stub (`bandkit.llm.service.up`), recorded in the manifest first as a tagged
   process so the teardown stops it; its request journal stays in `<run dir>/demo/llm/`.

It returns the stub's URL, each role's canary and the journal; `brains` makes them the
roles' endpoints (the URL, plus `/v1` for the OpenAI clients). `brains.wire` hands the
sandbox a placeholder only, so the stub accepting a request proves the proxy swapped the
key on the wire. See examples/docker_demo/README.md.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from bandkit.demo import DemoError
from bandkit.demo.layout import DemoLayout
from bandkit.demo.stub_scripts import stub_script
from bandkit.errors import BandkitError
from bandkit.fsio import PRIVATE_DIR_MODE, write_private
from bandkit.llm import service
from bandkit.manifest import Kind, Manifest
from examples.docker_demo.cast import Role
from examples.docker_demo.scenario import Scenario

Log = Callable[[str], None]
STUB_SERVICE: Final = "llm-stub"
KEY_PREFIX: Final = {"anthropic": "sk-ant-stub-", "openai": "sk-stub-"}


def stub_dir(layout: DemoLayout) -> Path:
    return layout.home / "llm"


def stub_tag(layout: DemoLayout) -> str:
    return f"bandkit-demo-llm:{layout.run_dir}"


def start(
    layout: DemoLayout,
    manifest: Manifest,
    scenario: Scenario,
    topic: str,
    *,
    providers: Mapping[Role, str],
    log: Log,
) -> tuple[str, dict[Role, str], Path]:
    """Scripts, key file, then the stub (recorded before it starts): its URL, each role's
    canary key (`providers` names the API each role calls) and its request journal."""
    keys = {role: KEY_PREFIX[providers[role]] + secrets.token_urlsafe(24) for role in Role}
    home = stub_dir(layout)
    scripts = home / "scripts"
    try:
        if service.running(home) is not None:
            service.down(home)  # left by a run that died: its keys are stale
        scripts.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        for old in scripts.glob("*.yaml"):
            old.unlink()
        for role in Role:
            data = stub_script(scenario, role, topic=topic)
            (scripts / f"{role.value}.yaml").write_text(json.dumps(data, indent=1) + "\n")
        lines = [f"{providers[role]}:{role.value}={keys[role]}" for role in Role]
        write_private(home / service.KEY_FILE, "\n".join(lines) + "\n")
        tag = stub_tag(layout)
        manifest.record(Kind.PROCESS, tag, service=STUB_SERVICE, run_dir=str(home))
        record, _ = service.up(home, scripts=[scripts], tag=tag)
    except (BandkitError, OSError) as exc:
        raise DemoError(f"the LLM stub: {exc}") from None
    log(f"brains: LLM stub at {record.url} (request log {record.requests_file})")
    return record.url, keys, Path(record.requests_file)
