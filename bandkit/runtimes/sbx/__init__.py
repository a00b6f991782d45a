"""The `sbx` runtime: drives the Docker Sandboxes CLI in the installed version's grammar.

`SbxRuntime` is the `Runtime` for sbx; it holds an `SbxCli` and calls the parts with it.
Modules, one concern each:

- `runtime`: `SbxRuntime`, the sandbox lifecycle and the manifest record of what it adds;
- `cli`: `SbxCli` (the binary, its version read once, the grammar by version, the argv
  runner) and the version and JSON parsers;
- `policy`: the network rules a sandbox needs (`sbx policy`);
- `secrets`: sandbox-scoped custom secrets (`sbx secret`);
- `templates`: a kit image built on this host, loaded into sbx's image store once;
- `kits`: the kit directory `sbx create` gets, in the shape the installed sbx decodes;
- `supervisor`: from 0.43, the detached process holding `sbx run --name N` on a pty
  (`python -m bandkit.runtimes.sbx.supervisor`).

The names below are imported on first use, so that process starts without the runtime's
imports (the manifest's pydantic models).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bandkit.runtimes.sbx.cli import Grammar, SbxCli, parse_version
    from bandkit.runtimes.sbx.runtime import SbxRuntime

__all__ = ["Grammar", "SbxCli", "SbxRuntime", "parse_version"]
_DEFINED_IN = {"Grammar": "cli", "SbxCli": "cli", "parse_version": "cli", "SbxRuntime": "runtime"}


def __getattr__(name: str) -> Any:
    if name not in _DEFINED_IN:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_DEFINED_IN[name]}"), name)
