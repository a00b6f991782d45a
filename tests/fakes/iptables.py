"""A recording stand-in for `iptables` / `ip6tables` (filter table; no root, no kernel).

It keeps the table as `-S` prints it (lines `-N chain`, `-A chain spec...`) in a JSON
state file per binary and understands what `bandkit.runtimes.hostguard` calls: -S, -N,
-A, -I <chain> 1, -D, -F, -X (an unknown chain fails as the real one does). `fail_on`
makes one operation fail (exit 4), to test that the runtime fails closed.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bandkit.runtimes.hostguard import Tools

SCRIPT = r"""#!{python}
import json, os, shlex, sys
path, fail_on, manifest = {state!r}, {fail_on!r}, {manifest!r}
state = json.load(open(path)) if os.path.exists(path) else {{"lines": [], "calls": []}}
args = [a for a in sys.argv[1:]]
if args[:2] == ["-w", "5"]:
    args = args[2:]
op, chain, spec = args[0], (args[1] if len(args) > 1 else ""), args[2:]
state["calls"].append({{"argv": args, "manifest": open(manifest).read()
                       if manifest and os.path.exists(manifest) else ""}})
lines = state["lines"]
def done(code=0, err=""):
    state["lines"] = lines
    json.dump(state, open(path, "w"))
    sys.stderr.write(err)
    sys.exit(code)
if op == fail_on:
    done(4, "iptables: Permission denied (you must be root)\n")
known = {{"INPUT", "FORWARD", "OUTPUT"}} | {{l[1] for l in lines if l[0] == "-N"}}
if op != "-S" and op != "-N" and chain not in known:
    done(1, f"iptables: chain {{chain}} does not exist\n")
if op == "-S":
    print("-P INPUT ACCEPT")
    for l in [l for l in lines if l[0] == "-N"] + [l for l in lines if l[0] == "-A"]:
        print(shlex.join(l))
elif op == "-N":
    if chain in known:
        done(1, "iptables: Chain already exists.\n")
    lines.append(["-N", chain])
elif op == "-A":
    lines.append(["-A", chain, *spec])
elif op == "-I":
    lines.insert(0, ["-A", chain, *spec[1:]])
elif op == "-D":
    if ["-A", chain, *spec] not in lines:
        done(1, "iptables: Bad rule (does a matching rule exist in that chain?).\n")
    lines.remove(["-A", chain, *spec])
elif op == "-F":
    lines = [l for l in lines if l[:2] != ["-A", chain]]
elif op == "-X":
    if any(l[-2:] == ["-j", chain] for l in lines):
        done(1, "iptables: Too many links.\n")
    lines = [l for l in lines if l != ["-N", chain]]
done()
"""


@dataclass
class FakeIptables:
    directory: Path

    @property
    def tools(self) -> Tools:
        return Tools(str(self.directory / "iptables"), str(self.directory / "ip6tables"))

    def data(self, binary: str = "iptables") -> dict[str, Any]:
        state = self.directory / f"{binary}-state.json"
        if not state.exists():
            return {"lines": [], "calls": []}
        loaded: dict[str, Any] = json.loads(state.read_text())
        return loaded

    def lines(self, binary: str = "iptables") -> list[str]:
        return [shlex.join(line) for line in self.data(binary)["lines"]]

    def add(self, binary: str, *line: str) -> None:
        """Plant a rule (or `-N chain`) someone else made."""
        data = self.data(binary)
        data["lines"].append(list(line))
        (self.directory / f"{binary}-state.json").write_text(json.dumps(data))


def fake_iptables(
    directory: Path, *, fail_on: str = "", manifest: Path | None = None
) -> FakeIptables:
    """Both binaries in `directory`; each call also records the manifest's text then."""
    directory.mkdir(parents=True, exist_ok=True)
    for binary in ("iptables", "ip6tables"):
        script = directory / binary
        script.write_text(
            SCRIPT.format(
                python=sys.executable,
                state=str(directory / f"{binary}-state.json"),
                fail_on=fail_on,
                manifest=str(manifest or ""),
            )
        )
        script.chmod(0o755)
    return FakeIptables(directory)
