"""A box's egress proxy, host side: its files, its process (started, found, stopped), the
grants it re-reads and the variables that point a sandbox at it.

The box directory holds the config (`CONFIG_NAME`, 0600), the port (`PORTS_NAME`), the
grants (`GRANTS_NAME`), the policy log and the proxy's stderr (`egress.log`). The process
runs `python -m MODULE CONFIG` and carries the tag `egress_tag(box)` (see
`bandkit.processes`): it is found and stopped by that tag, never by its command
line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bandkit import processes
from bandkit.fsio import read_regular, write_private
from bandkit.proxies.egress.log import LOG_NAME
from bandkit.proxies.egress.rules import EgressError, Rule, _bracket
from bandkit.proxies.egress.server import Config

MODULE = "bandkit.proxies.egress"  # what the proxy process runs (`python -m`)
START_TIMEOUT_S = 15.0
GRANTS_NAME = "grants.json"
CONFIG_NAME = "egress-config.json"
PORTS_NAME = "egress.json"


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
            [sys.executable, "-m", MODULE, str(box / CONFIG_NAME)],
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
