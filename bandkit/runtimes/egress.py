"""The docker runtime's egress proxy: the only way out of a sandbox, default deny.

A docker sandbox sits alone on an internal bridge network (no route off the host). Its
one exit is this host-side HTTP proxy, listening on that network's gateway address and
serving only clients from that network. It takes two request forms and nothing else:

- `CONNECT host:port` (HTTPS, WebSockets, anything tunnelled): answered
  `HTTP/1.1 200 Connection established`, then the bytes are piped both ways;
- plain HTTP in absolute form (`GET http://host[:port]/path HTTP/1.1`): forwarded in
  origin form with `Host` set to the target and `Connection: close`, proxy headers
  dropped, the response piped back untouched.

Every request head is parsed with h11; a malformed head, an origin-form request or any
other scheme is answered 400. A target no rule admits is answered 403. Every decision is
appended to the policy log as one JSON line (`sandbox`, `decision`, `host`, `proxy_type`,
`rule`, `source`, `reason`, `time`), which `summarize` folds into the shape of
`sbx policy log --json` (`blocked_hosts` / `allowed_hosts` with counts and last seen).

Rules are sbx host patterns: `host`, `*.suffix` (one label), `**.suffix` (any depth),
`**` (any host), an IPv4 literal or `[IPv6]`, each optionally `:PORT`; without a port a
rule admits the web ports 80 and 443 only. A destination on a local address (loopback,
link-local, unspecified, multicast, or the sandbox's own network), named directly or
reached through DNS, is admitted only by a rule naming that exact address: `**` never
opens the host's loopback. The rules are the kit's allowlist (`caps.network.allow` of
the kit spec), the sandbox's own (`SandboxSpec.egress`), the platform routes the runtime
adds (its credential proxy), and per-sandbox grants (`kit.allow`) kept in a grants file
that the running proxy re-reads when it changes.

The parts: `egress_rules` (rules, host parsing, the policy, the kit allowlist),
`egress_request` (request heads and answers), `egress_log` (the policy log and its
summary), `egress_proxy` (the server and its config); this module is the runtime side
(start, restart, stop, grants, proxy variables) and re-exports the parts' public names.

Run as `python -m bandkit.runtimes.egress CONFIG` (see `start`); it writes
`{"port": N}` to the ports file atomically, then serves until SIGTERM or until its box
directory is removed. Header values are never logged.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bandkit.fsio import read_regular, write_private
from bandkit.runtimes import processes
from bandkit.runtimes.egress_log import (
    LOG_NAME,
    MAX_LOG_BYTES,
    PolicyLog,
    read_log,
    render,
    summarize,
)
from bandkit.runtimes.egress_proxy import (
    BUFFER,
    CONNECT_TIMEOUT_S,
    HEAD_TIMEOUT_S,
    MAX_CLIENTS,
    ORPHAN_CHECK_S,
    Config,
    Proxy,
    _main,
    pipe_both,
    read_head,
    serve,
)
from bandkit.runtimes.egress_request import (
    DROPPED_HEADERS,
    HEAD_LIMIT,
    Malformed,
    Request,
    parse_request,
    response,
)
from bandkit.runtimes.egress_rules import (
    WEB_PORTS,
    EgressError,
    Policy,
    Rule,
    _bracket,
    is_local,
    kit_allowlist,
    normal_host,
    parse_rule,
    split_host_port,
)

__all__ = [
    "BUFFER",
    "CONFIG_NAME",
    "CONNECT_TIMEOUT_S",
    "DROPPED_HEADERS",
    "GRANTS_NAME",
    "HEAD_LIMIT",
    "HEAD_TIMEOUT_S",
    "LOG_NAME",
    "MAX_CLIENTS",
    "MAX_LOG_BYTES",
    "ORPHAN_CHECK_S",
    "PORTS_NAME",
    "START_TIMEOUT_S",
    "WEB_PORTS",
    "Config",
    "EgressError",
    "Malformed",
    "Policy",
    "PolicyLog",
    "Proxy",
    "Request",
    "Rule",
    "add_grant",
    "egress_tag",
    "grants",
    "is_local",
    "kit_allowlist",
    "normal_host",
    "parse_request",
    "parse_rule",
    "pipe_both",
    "proxy_env",
    "read_head",
    "read_log",
    "remove_grant",
    "render",
    "response",
    "restart",
    "running",
    "serve",
    "split_host_port",
    "start",
    "stop",
    "summarize",
]

START_TIMEOUT_S = 15.0
GRANTS_NAME = "grants.json"
CONFIG_NAME = "egress-config.json"
PORTS_NAME = "egress.json"


# -- the runtime side
def egress_tag(box: Path) -> str:
    """The tag of a box's egress proxy process (see `processes`)."""
    return f"bandkit-egress:{box}"


def running(box: Path) -> bool:
    return bool(processes.tagged_pids(egress_tag(box)))


def start(
    box: Path,
    *,
    sandbox: str,
    listen: str,
    clients: str,
    rules: Sequence[Rule],
    port: int = 0,
) -> int:
    """Start the box's egress proxy (its rules written to a 0600 config); its port."""
    config = Config(
        sandbox=sandbox,
        listen=listen,
        port=port,
        clients=clients,
        rules=[{"rule": r.text, "source": r.source} for r in rules],
        grants=str(box / GRANTS_NAME),
        log=str(box / LOG_NAME),
        ports_file=str(box / PORTS_NAME),
    )
    config.save(box / CONFIG_NAME)
    return _spawn(box)


def restart(box: Path) -> int:
    """Start the proxy again from its saved config, on the port it had (the container's
    proxy variables name it); a no-op returning the port while it runs."""
    config = Config.load(box / CONFIG_NAME)
    previous = json.loads(read_regular(box / PORTS_NAME, what="egress ports")[0])["port"]
    if running(box):
        return int(previous)
    config.port = int(previous)
    config.save(box / CONFIG_NAME)
    return _spawn(box)


def _spawn(box: Path) -> int:
    ports = box / PORTS_NAME
    ports.unlink(missing_ok=True)
    with (box / "egress.log").open("ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bandkit.runtimes.egress", str(box / CONFIG_NAME)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env={**os.environ, processes.TAG_ENV: egress_tag(box)},
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ports.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise EgressError(f"the egress proxy did not start; see {box / 'egress.log'}")
        time.sleep(0.02)
    return int(json.loads(read_regular(ports, what="egress ports")[0])["port"])


def stop(box: Path) -> None:
    processes.terminate_tagged(egress_tag(box))


def grants(box: Path) -> list[str]:
    try:
        data, _ = read_regular(box / GRANTS_NAME, what="egress grants")
    except FileNotFoundError:
        return []
    return [str(item) for item in json.loads(data)]


def add_grant(box: Path, rule: Rule) -> None:
    current = grants(box)
    if rule.text not in current:
        write_private(box / GRANTS_NAME, json.dumps([*current, rule.text]))


def remove_grant(box: Path, text: str) -> None:
    if not box.is_dir():
        return
    current = grants(box)
    if text in current:
        write_private(box / GRANTS_NAME, json.dumps([t for t in current if t != text]))


def proxy_env(address: str, port: int) -> dict[str, str]:
    """The variables that send a sandbox's HTTP(S) clients through its egress proxy."""
    url = f"http://{_bracket(address)}:{port}"
    env = {}
    for name in ("HTTP_PROXY", "HTTPS_PROXY"):
        env[name] = env[name.lower()] = url
    env["NO_PROXY"] = env["no_proxy"] = ""  # loopback too: the platform route is upstream
    return env


if __name__ == "__main__":
    asyncio.run(_main(Path(sys.argv[1])))
