"""Host firewall for a docker sandbox network: its bridge reaches the host only at the proxy.

A sandbox's internal bridge network has no route off the host, but its gateway address is
the host itself, and packets from a bridge to any host address go through the host's
INPUT chain (not FORWARD, where Docker isolates internal networks). Without this guard a
container reaches every host service listening on 0.0.0.0 or on a host address: sshd, a
dev server, a database. The guard closes that.

Contract, per sandbox network (`Guard`):

- one chain per network and family, `BANDKIT-<first 12 of the network id>`, in the
  filter table of `iptables` and `ip6tables`, jumped to from the top of INPUT by the
  bridge interface (`-i <bridge>`);
- IPv4 chain: replies of established connections and TCP to the egress proxy's port on
  the gateway address RETURN (the host's own INPUT rules still decide them: the guard
  only subtracts); everything else arriving on the bridge (other TCP ports, any other
  host address, UDP such as DNS to the gateway, ICMP, broadcasts) is dropped. IPv6 chain:
  everything is dropped (the proxy listens on IPv4 only);
- every rule carries the comment `bandkit:<run id>`; only rules with it are ever
  changed or removed, and a same-named chain holding any other rule is reported and kept;
- `install` is idempotent (an up-to-date chain is left alone); `remove` treats
  "already absent" as success. The caller records the guard in its manifest before
  `install`, and `remove` runs from that record at teardown.

Fail closed: a missing `iptables`, a non-root caller or any failed rule raises
`HostGuardError` with what to install or do; the caller then makes no container.
`pure`: `rules(guard)` is the argv list of a fresh install, with no IO.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import itertools
import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bandkit import tools
from bandkit.fsio import UnsafePathError, read_regular, write_private
from bandkit.runtimes.base import SandboxError

CHAIN_PREFIX = "BANDKIT-"
RECORD_NAME = "firewall.json"  # in the sandbox's host-side box: what `start` re-installs
COMMENT_PREFIX = "bandkit:"
T_TOOL = 20.0
WAIT = ("-w", "5")  # wait for the xtables lock instead of failing at once
_BRIDGE = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")  # IFNAMSIZ - 1
_HEX = re.compile(r"^[0-9a-f]{12,64}$")
_RUN_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
OPT_OUT_ENV = "BANDKIT_HOST_FIREWALL"
INSTALL_HINT = (
    "install iptables (`apt-get install iptables`) and run as root (or with "
    "CAP_NET_ADMIN); to run without the host firewall anyway (the sandbox can then reach "
    f"every host service), set {OPT_OUT_ENV}=off"
)
REMOVE_HINT = "install iptables and run the teardown again as root"
DISABLED = (
    "docker runtime: host firewall is off (BANDKIT_HOST_FIREWALL=off): sandbox {name} can reach "
    "every service listening on the host's addresses, not only its egress proxy"
)


def wanted(environ: dict[str, str] | None = None) -> bool:
    """On unless the operator set BANDKIT_HOST_FIREWALL to off/0/false/no."""
    value = (os.environ if environ is None else environ).get(OPT_OUT_ENV, "")
    return value.strip().lower() not in ("off", "0", "false", "no")


class HostGuardError(SandboxError):
    """The host firewall of a sandbox network could not be set or removed."""


@dataclass(frozen=True)
class Tools:
    """The iptables binaries (IPv4, IPv6); `find()` looks in /usr/sbin, /sbin, then PATH."""

    iptables: str
    ip6tables: str

    @classmethod
    def find(cls) -> Tools:
        return cls(_find("iptables"), _find("ip6tables"))


def _find(name: str) -> str:
    for folder in ("/usr/sbin", "/sbin"):
        if Path(folder, name).is_file():
            return f"{folder}/{name}"
    return shutil.which(name) or f"/usr/sbin/{name}"


@dataclass(frozen=True)
class Guard:
    """What the firewall of one sandbox network needs (all validated: they go into argv)."""

    run_id: str
    network_id: str
    bridge: str
    gateway: str
    port: int

    def __post_init__(self) -> None:
        if not _RUN_ID.match(self.run_id):
            raise HostGuardError(f"host firewall: bad run id {self.run_id!r}")
        if not _HEX.match(self.network_id):
            raise HostGuardError(f"host firewall: bad network id {self.network_id!r}")
        if not _BRIDGE.match(self.bridge):
            raise HostGuardError(f"host firewall: bad bridge interface name {self.bridge!r}")
        try:
            ipaddress.IPv4Address(self.gateway)
        except ValueError:
            raise HostGuardError(
                f"host firewall: gateway {self.gateway!r} is not an IPv4 address"
            ) from None
        if not 0 < self.port < 65536:
            raise HostGuardError(f"host firewall: bad egress proxy port {self.port}")

    @property
    def chain(self) -> str:
        return chain_name(self.network_id)

    @property
    def comment(self) -> str:
        return COMMENT_PREFIX + self.run_id


def chain_name(network_id: str) -> str:
    return CHAIN_PREFIX + network_id[:12]


def bridge_name(network_id: str, options: dict[str, str]) -> str:
    """The Linux bridge of a docker bridge network: its option, else `br-<id[:12]>`."""
    return options.get("com.docker.network.bridge.name") or f"br-{network_id[:12]}"


def _tag(comment: str) -> list[str]:
    return ["-m", "comment", "--comment", comment]


def chain_specs(guard: Guard, ipv6: bool = False) -> list[list[str]]:
    """The rules of the guard's chain, in order (each without `-A <chain>`)."""
    tag = _tag(guard.comment)
    if ipv6:
        return [[*tag, "-j", "DROP"]]
    proxy = ["-d", f"{guard.gateway}/32", "-p", "tcp", "-m", "tcp", "--dport", str(guard.port)]
    return [
        ["-m", "conntrack", "--ctstate", "ESTABLISHED", *tag, "-j", "RETURN"],
        [*proxy, *tag, "-j", "RETURN"],
        [*tag, "-j", "DROP"],
    ]


def jump_spec(guard: Guard) -> list[str]:
    return ["-i", guard.bridge, *_tag(guard.comment), "-j", guard.chain]


def rules(guard: Guard, tools: Tools = Tools("iptables", "ip6tables")) -> list[list[str]]:
    """The argv list of a fresh install: per family, make the chain, fill it, jump to it."""
    out: list[list[str]] = []
    for binary, ipv6 in ((tools.iptables, False), (tools.ip6tables, True)):
        out.append([binary, *WAIT, "-N", guard.chain])
        out += [[binary, *WAIT, "-A", guard.chain, *s] for s in chain_specs(guard, ipv6)]
        out.append([binary, *WAIT, "-I", "INPUT", "1", *jump_spec(guard)])
    return out


# -- IO
def _run(
    argv: Sequence[str], *, check: bool = True, hint: str = INSTALL_HINT
) -> subprocess.CompletedProcess[str]:
    try:
        return tools.run(argv, what="host firewall", timeout=T_TOOL, check=check)
    except tools.ToolError as exc:
        raise HostGuardError(f"{exc}; {hint}") from None


def _table(binary: str, hint: str) -> list[list[str]]:
    """`<binary> -S` (the whole filter table) as token lists, one per line."""
    out = _run([binary, *WAIT, "-S"], hint=hint).stdout
    return [shlex.split(line) for line in out.splitlines() if line.strip()]


def _listed(table: list[list[str]], chain: str) -> list[list[str]] | None:
    """The `-A chain` lines of `table`; None when the chain is absent. (`iptables -S
    <absent chain>` says "incompatible" on the nf_tables backend, so the table is read.)"""
    if ["-N", chain] not in table:
        return None
    return [tokens for tokens in table if tokens[:2] == ["-A", chain]]


def _ours(tokens: Sequence[str], comment: str) -> bool:
    return any(a == "--comment" and b == comment for a, b in itertools.pairwise(tokens))


def _foreign(chain: str, binary: str, listed: list[list[str]], comment: str) -> HostGuardError:
    others = [shlex.join(t) for t in listed if not _ours(t, comment)]
    return HostGuardError(
        f"host firewall: chain {chain} ({binary}) has rules (in it or jumping to it) "
        f"this run did not make ({others[0] if others else '?'}); kept it. "
        "Remove it yourself if it is yours (iptables -D/-F/-X), then re-run"
    )


def install(guard: Guard, tools: Tools) -> None:
    """Make (or bring up to date) the guard's chains and INPUT jumps; idempotent."""
    for binary, ipv6 in ((tools.iptables, False), (tools.ip6tables, True)):
        want = [["-A", guard.chain, *spec] for spec in chain_specs(guard, ipv6)]
        table = _table(binary, INSTALL_HINT)
        listed = _listed(table, guard.chain)
        if listed is None:
            _run([binary, *WAIT, "-N", guard.chain])
        elif any(not _ours(t, guard.comment) for t in listed):
            raise _foreign(guard.chain, binary, listed, guard.comment)
        if listed != want:
            if listed:
                _run([binary, *WAIT, "-F", guard.chain])
            for rule in want:
                _run([binary, *WAIT, *rule])
        jump = jump_spec(guard)
        if ["-A", "INPUT", *jump] not in table:
            _run([binary, *WAIT, "-I", "INPUT", "1", *jump])


def installed(guard: Guard, tools: Tools) -> bool:
    """Whether the guard's chains hold exactly its rules and INPUT jumps to them, in both
    families (a reboot or a flush of the firewall leaves them out); HostGuardError when
    the tables cannot be read."""
    for binary, ipv6 in ((tools.iptables, False), (tools.ip6tables, True)):
        table = _table(binary, INSTALL_HINT)
        want = [["-A", guard.chain, *spec] for spec in chain_specs(guard, ipv6)]
        if _listed(table, guard.chain) != want or ["-A", "INPUT", *jump_spec(guard)] not in table:
            return False
    return True


def remove(run_id: str, chain: str, tools: Tools) -> None:
    """Delete this run's INPUT jumps to `chain`, then the chain if it holds only this run's
    rules (a foreign rule keeps it: HostGuardError). Absent already is success."""
    comment = COMMENT_PREFIX + run_id
    if not chain.startswith(CHAIN_PREFIX) or not _RUN_ID.match(run_id):
        raise HostGuardError(f"host firewall: refusing to remove chain {chain!r}")
    for binary in (tools.iptables, tools.ip6tables):
        table = _table(binary, REMOVE_HINT)
        jumps = [t for t in table if t[:2] == ["-A", "INPUT"] and t[-2:] == ["-j", chain]]
        for tokens in jumps:
            if _ours(tokens, comment):
                _run([binary, *WAIT, "-D", *tokens[1:]], hint=REMOVE_HINT)
        listed = _listed(table, chain)
        if listed is None:
            continue
        foreign = [t for t in listed + jumps if not _ours(t, comment)]
        if foreign:
            raise _foreign(chain, binary, foreign, comment)
        _run([binary, *WAIT, "-F", chain], hint=REMOVE_HINT)
        _run([binary, *WAIT, "-X", chain], hint=REMOVE_HINT)


def leftovers(run_id: str, tools: Tools) -> list[str]:
    """Every rule of run `run_id` still in either table (`-S` lines): [] once torn down."""
    comment = COMMENT_PREFIX + run_id
    found = []
    for binary in (tools.iptables, tools.ip6tables):
        tokens = _table(binary, REMOVE_HINT)
        found += [f"{Path(binary).name} {shlex.join(t)}" for t in tokens if _ours(t, comment)]
    return found


def network_facts(docker: str, network: str) -> tuple[str, str]:
    """(network id, bridge interface) of docker bridge network `network`."""
    argv = [docker, "network", "inspect", "--format", "{{json .Id}} {{json .Options}}", network]
    result = _run(argv, check=False)
    ident, _, options = result.stdout.strip().partition(" ")
    try:
        network_id, opts = json.loads(ident), json.loads(options or "null") or {}
    except ValueError:
        network_id, opts = None, None
    if result.returncode != 0 or not isinstance(network_id, str) or not isinstance(opts, dict):
        detail = (result.stderr or result.stdout).strip()[:300]
        raise HostGuardError(f"host firewall: cannot inspect network {network} ({detail})")
    return network_id, bridge_name(network_id, {str(k): str(v) for k, v in opts.items()})


# -- the box's record (host side): `start` re-installs from it, `remove` removes by it
def write_record(box: Path, guard: Guard) -> None:
    write_private(box / RECORD_NAME, json.dumps(dataclasses.asdict(guard)))


def read_record(box: Path) -> Guard | None:
    """The guard recorded in `box`; None when there is none (firewall off, or removed)."""
    try:
        data, _ = read_regular(box / RECORD_NAME, what="host firewall record")
    except FileNotFoundError:
        return None
    except (OSError, UnsafePathError) as exc:
        raise HostGuardError(f"host firewall record in {box}: {exc}") from None
    try:
        loaded = json.loads(data)
        return Guard(**{f.name: loaded[f.name] for f in dataclasses.fields(Guard)})
    except (ValueError, KeyError, TypeError):
        raise HostGuardError(
            f"host firewall record {box / RECORD_NAME} is malformed; remove the sandbox "
            "and create it again"
        ) from None


def reinstall(box: Path, tools: Tools) -> None:
    """Install the guard recorded in `box` again (idempotent); nothing when none is."""
    guard = read_record(box)
    if guard is not None:
        install(guard, tools)
