"""The three-agent demo's orchestration: what `invoke demo.up|down|status|logs` call.

`demo.up` (`run.up`) runs these phases, each resource recorded in the run manifest
(`<run_dir>/demo/manifest.json`, `layout`) before it exists, and tears everything down at
the end (unless `--keep`), on any failure, and on Ctrl-C or SIGTERM (`signals`):

1. preflight (`preflight`), before any change: scripted brains only, the scenario and
   the caps parse, the runtime's tools answer, no unfinished manifest and no
   `band-demo-*` sandbox (refuse to clobber: run `demo.down`);
2. platform (`target`): the local emulator (reused, or started and recorded) or a real
   deployment from `BAND_REST_URL` / `BAND_WS_URL` / `BAND_API_KEY_USER`;
3. sweep (`cast_ops`): delete stale demo agents (our names and the `[band-demo]` marker);
4. stage (`staging`): copy each role's workspace under the box root with its endpoints
   and scenario lines; the tracked tree is never modified;
5. provision (`cast_ops`): register the three agents, write each agent.id, store each
   key as a proxy-managed secret; create the three sandboxes; wait until every agent
   says it is connected (deadline, progress line);
6. meet (`examples.docker_demo.conductor`): the room, the brief, the breaker; every line
   goes to the terminal and the transcript (`transcript`), except the presenter's
   one-time login link (`presenter`: the terminal only);
7. teardown (`teardown`): exactly what the manifest lists, in reverse; the exit code
   says how the meeting ended (`outcome`).

`demo.down` (`teardown.down`) removes what an earlier run left; `demo.status` and
`demo.logs` (`status`; `--follow`: `follow`) read without changing anything.

The library and the example: this package is the orchestration, and `examples/docker_demo/`
is the example it runs. The example holds what a user copies or loads by path: the
breaker, the conductor and its feed, the cast, the scenarios and the caps. It also holds
what runs inside the sandboxes: the agent program and the role workspaces. This package
imports the example; the example imports nothing from the kit
(`tests/demo/test_demo_boundary.py`).

Modules:

- `run`: `demo.up`, from nothing back to nothing; `phases`: the phases and progress lines;
- `preflight`: what `demo.up` was asked for (`UpOptions`) and every check before a change;
- `target`: the platform (the local emulator or a real deployment);
- `cast_ops`: the three agents on the platform and in their sandboxes;
- `staging`: the staged workspace copies; `layout`: the run's files and its run record;
- `brains`: what the brains add to each sandbox; `stub_brains`: the LLM stub's host side;
  `stub_scripts`: a scenario as stub scripts; `cli_image`, `codex_local`: the codex CLI
  on docker and on local;
- `presenter`: the presenter's seat; `transcript`: every line to terminal and file;
- `signals`: Ctrl-C and SIGTERM; `teardown`: removing exactly what was recorded;
  `outcome`: how a run ended and its exit code;
- `status`, `follow`: `demo.status` and `demo.logs` (`--follow`).

`DemoError` (here) is the package's one error type.
"""

from __future__ import annotations

from bandkit.errors import BandkitError


class DemoError(BandkitError):
    """A demo step failed; the message says what and what to do (never a key)."""
