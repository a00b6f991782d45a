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

Run as `python -m bandkit.runtimes.egress CONFIG` (see `start`); it writes
`{"port": N}` to the ports file atomically, then serves until SIGTERM or until its box
directory is removed. Header values are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import h11

from bandkit.errors import BandkitError
from bandkit.fsio import read_regular, write_private
from bandkit.runtimes import processes

HEAD_LIMIT = 64 * 1024  # a request head larger than this is malformed
HEAD_TIMEOUT_S = 30.0  # a client that sends no complete head by then is dropped
CONNECT_TIMEOUT_S = 15.0  # upstream TCP connect
MAX_CLIENTS = 256  # open connections per sandbox; more are refused (host fds are finite)
MAX_LOG_BYTES = 5 * 1024 * 1024  # the policy log rotates once to policy.log.1 past this
ORPHAN_CHECK_S = 2.0
START_TIMEOUT_S = 15.0
BUFFER = 64 * 1024
WEB_PORTS = frozenset({80, 443})
LOG_NAME = "policy.log"
GRANTS_NAME = "grants.json"
CONFIG_NAME = "egress-config.json"
PORTS_NAME = "egress.json"
DROPPED_HEADERS = frozenset(
    {b"host", b"connection", b"proxy-connection", b"proxy-authorization", b"keep-alive"}
)

_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_PORT = re.compile(r"[0-9]{1,5}")


class EgressError(BandkitError):
    """A rule is malformed, or the egress proxy could not start; the message says which."""


class Malformed(Exception):
    """A request the proxy refuses to parse (answered 400)."""


# -- rules
@dataclass(frozen=True)
class Rule:
    """One allow rule. `kind`: exact | one (`*.x`) | any (`**.x`) | all (`**`) | ip."""

    text: str
    kind: str
    host: str
    ports: frozenset[int]
    source: str = "sandbox"

    def admits(self, host: str, port: int) -> bool:
        if port not in self.ports:
            return False
        if self.kind in ("exact", "ip"):
            return host == self.host
        if self.kind == "all":
            return True
        if self.kind == "any":
            return host.endswith("." + self.host) or host == self.host
        head, dot, tail = host.partition(".")
        return bool(head) and dot == "." and tail == self.host


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def split_host_port(text: str) -> tuple[str, str | None]:
    """`host[:port]`, `[v6][:port]` -> (host, port or None); no validation of either."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("unclosed [")
        rest = text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError("junk after ]")
        return text[1:end], (rest[1:] if rest else None)
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, port
    if ":" in text:
        raise ValueError("an IPv6 address must be written [addr]")
    return text, None


def normal_host(host: str) -> str:
    """A lower-case hostname or a canonical IP literal; ValueError for anything else."""
    address = _ip(host)
    if address is not None:
        return str(address)
    lowered = host.lower().rstrip(".")
    if len(lowered) > 253 or not _HOSTNAME.fullmatch(lowered):
        raise ValueError(f"not a hostname: {host[:80]!r}")
    return lowered


def _port(text: str) -> int:
    if not _PORT.fullmatch(text) or not 0 < int(text) < 65536:
        raise ValueError(f"not a port: {text[:10]!r}")
    return int(text)


def parse_rule(text: str, source: str = "sandbox") -> Rule:
    """A rule from its text (`pypi.org`, `*.band.ai:443`, `127.0.0.1:8080`, `**`)."""
    try:
        raw = text.strip()
        host_part, port_part = split_host_port(raw)
        ports = frozenset({_port(port_part)}) if port_part is not None else WEB_PORTS
        if host_part == "**":
            return Rule(raw, "all", "", ports, source)
        for prefix, kind in (("**.", "any"), ("*.", "one")):
            if host_part.startswith(prefix):
                suffix = normal_host(host_part[len(prefix) :])
                if _ip(suffix) is not None:
                    raise ValueError("a wildcard needs a domain suffix")
                return Rule(raw, kind, suffix, ports, source)
        host = normal_host(host_part)
        return Rule(raw, "ip" if _ip(host) is not None else "exact", host, ports, source)
    except ValueError as exc:
        raise EgressError(
            f"invalid egress rule {text[:80]!r} ({exc}): use host, *.domain, **.domain, "
            "an IP address or [IPv6], optionally with :PORT"
        ) from None


def is_local(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
    networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network] = (),
) -> bool:
    """An address on this host or its own networks, not the internet."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address.is_loopback
        or address.is_link_local
        or address.is_unspecified
        or address.is_multicast
        or any(address in net for net in networks if net.version == address.version)
    )


class Policy:
    """Static rules plus the grants file, re-read whenever it changes."""

    def __init__(
        self,
        rules: Iterable[Rule],
        grants: Path | None = None,
        local_networks: Iterable[str] = (),
    ) -> None:
        self.static = tuple(rules)
        self.grants_path = grants
        self.local_networks = tuple(ipaddress.ip_network(n, strict=False) for n in local_networks)
        self._grants: tuple[Rule, ...] = ()
        self._stamp: tuple[int, int] | None = None

    def rules(self) -> tuple[Rule, ...]:
        return self.static + self._load_grants()

    def _load_grants(self) -> tuple[Rule, ...]:
        if self.grants_path is None:
            return ()
        try:
            info = os.stat(self.grants_path, follow_symlinks=False)
        except FileNotFoundError:
            self._grants, self._stamp = (), None
            return ()
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp != self._stamp:
            grants: list[Rule] = []
            with contextlib.suppress(OSError, ValueError, BandkitError):
                data, _ = read_regular(self.grants_path, what="egress grants")
                grants = [parse_rule(str(t), "grant") for t in json.loads(data)]
            self._grants, self._stamp = tuple(grants), stamp
        return self._grants

    def match(self, host: str, port: int) -> Rule | None:
        """The first rule admitting host:port (deny rules do not exist: default deny)."""
        return next((r for r in self.rules() if r.admits(host, port)), None)

    def reachable(self, rule: Rule, addresses: Iterable[str]) -> list[str]:
        """The resolved addresses `rule` may reach: local ones only when named exactly."""
        out = []
        for text in addresses:
            address = _ip(text.split("%", 1)[0])
            if address is None:
                continue
            if is_local(address, self.local_networks) and not (
                rule.kind == "ip" and rule.host == str(address)
            ):
                continue
            out.append(text)
        return out


# -- requests
@dataclass(frozen=True)
class Request:
    proxy_type: str  # "connect" | "http"
    host: str
    port: int
    head: bytes = field(default=b"", repr=False)  # what goes upstream (http only)
    method: str = ""

    @property
    def target(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_request(head: bytes) -> Request:
    """A proxy request from a complete head (ending in CRLFCRLF); Malformed otherwise."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
    try:
        conn.receive_data(head)
        event = conn.next_event()
    except h11.RemoteProtocolError as exc:
        raise Malformed(f"unparseable request head ({exc})") from None
    if not isinstance(event, h11.Request):
        raise Malformed("incomplete request head")
    method = event.method.decode("ascii", "replace")
    target = event.target.decode("ascii", "replace")
    if method == "CONNECT":
        try:
            host, connect_port = split_host_port(target)
            if connect_port is None:
                raise ValueError("no port")
            return Request("connect", normal_host(host), _port(connect_port), method=method)
        except ValueError as exc:
            raise Malformed(f"CONNECT needs host:port ({exc})") from None
    parts = urlsplit(target)
    if parts.scheme.lower() != "http" or not target.lower().startswith("http://"):
        raise Malformed("only CONNECT and absolute-form http:// requests are proxied")
    try:
        if "@" in parts.netloc:
            raise ValueError("user information in the URL")
        host, port_text = split_host_port(parts.netloc)
        host = normal_host(host)
        port = _port(port_text) if port_text else 80
    except ValueError as exc:
        raise Malformed(f"bad absolute URL ({exc})") from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    authority = Request("http", host, port).target if port != 80 else _bracket(host)
    version = event.http_version.decode("ascii")
    lines = [f"{method} {path} HTTP/{version}".encode("ascii"), b"Host: " + authority.encode()]
    for name, value in event.headers.raw_items():
        if name.lower() not in DROPPED_HEADERS:
            lines.append(name + b": " + value)
    lines.append(b"Connection: close")
    return Request("http", host, port, b"\r\n".join(lines) + b"\r\n\r\n", method)


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def response(status: int, reason: str, text: str) -> bytes:
    body = (text + "\n").encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


# -- the policy log
class PolicyLog:
    """Append-only JSON lines; rotated once (to `.1`) past MAX_LOG_BYTES."""

    def __init__(self, path: Path, sandbox: str) -> None:
        self.path = path
        self.sandbox = sandbox

    def write(self, **event: Any) -> None:
        record = {"time": _now(), "sandbox": self.sandbox, **event}
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path, follow_symlinks=False).st_size + len(line) > MAX_LOG_BYTES:
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.path, flags, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def read_log(box: Path) -> list[dict[str, Any]]:
    """Every event of a sandbox's policy log, oldest first (the rotated part included)."""
    events: list[dict[str, Any]] = []
    for path in (box / f"{LOG_NAME}.1", box / LOG_NAME):
        try:
            data, _ = read_regular(path, what="policy log")
        except FileNotFoundError:
            continue
        for line in data.decode("utf-8", "replace").splitlines():
            with contextlib.suppress(ValueError):
                item = json.loads(line)
                if isinstance(item, dict):
                    events.append(item)
    return events


def summarize(events: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """`sbx policy log --json`'s shape: blocked and allowed hosts with rule, type, count."""
    groups: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
    for event in events:
        decision = str(event.get("decision", ""))
        key = (
            decision,
            str(event.get("host", "")),
            str(event.get("proxy_type", "")),
            str(event.get("rule", "")),
            str(event.get("sandbox", "")),
        )
        row = groups.setdefault(
            key,
            {
                "host": key[1],
                "vm_name": key[4],
                "proxy_type": key[2],
                "rule": key[3],
                "reason": str(event.get("reason", "")),
                "since": str(event.get("time", "")),
                "last_seen": "",
                "count_since": 0,
            },
        )
        row["count_since"] += 1
        row["last_seen"] = str(event.get("time", ""))
    return {
        "blocked_hosts": [r for k, r in groups.items() if k[0] == "blocked"],
        "allowed_hosts": [r for k, r in groups.items() if k[0] == "allowed"],
    }


_UNPRINTABLE = re.compile(r"[^\x21-\x7e]")


def render(summary: dict[str, list[dict[str, Any]]]) -> str:
    """A text table of `summarize`'s result (sandbox-supplied text made printable)."""

    def cell(value: object, width: int = 60) -> str:
        return _UNPRINTABLE.sub("?", str(value))[:width] or "-"

    rows = [("DECISION", "HOST", "RULE", "TYPE", "COUNT", "LAST SEEN", "REASON")]
    for decision, key in (("blocked", "blocked_hosts"), ("allowed", "allowed_hosts")):
        for r in summary.get(key, []):
            rows.append(
                (
                    decision,
                    cell(r["host"]),
                    cell(r["rule"]),
                    cell(r["proxy_type"]),
                    str(r["count_since"]),
                    cell(r["last_seen"]),
                    cell(r.get("reason", ""), 80).replace("?", " "),
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


# -- the server
@dataclass
class Config:
    sandbox: str
    listen: str
    port: int
    clients: str  # the sandbox network (CIDR); every other peer is refused
    rules: list[dict[str, str]]  # {"rule": text, "source": kit|sandbox|platform}
    grants: str
    log: str
    ports_file: str

    @classmethod
    def load(cls, path: Path) -> Config:
        data, _ = read_regular(path, what="egress config")
        return cls(**json.loads(data))

    def save(self, path: Path) -> None:
        write_private(path, json.dumps(self.__dict__, indent=2))


class Proxy:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.clients = ipaddress.ip_network(config.clients, strict=False)
        rules = [parse_rule(r["rule"], r.get("source", "sandbox")) for r in config.rules]
        self.policy = Policy(rules, Path(config.grants), [config.clients])
        self.log = PolicyLog(Path(config.log), config.sandbox)
        self.slots = asyncio.Semaphore(MAX_CLIENTS)

    def record(self, decision: str, request: Request | None, **extra: str) -> None:
        event: dict[str, Any] = {"decision": decision, **extra}
        if request is not None:
            event.update(host=request.target, proxy_type=request.proxy_type)
        with contextlib.suppress(OSError):
            self.log.write(**event)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("", 0)
        address = _ip(str(peer[0]).split("%", 1)[0])
        ours = address is not None and address in self.clients
        if not ours or self.slots.locked():
            reason = "too many connections" if ours else "client outside the sandbox network"
            self.record("blocked", None, host="", proxy_type="", rule="", reason=reason)
            writer.close()
            return
        async with self.slots:
            try:
                await self._serve(reader, writer)
            except OSError:
                pass
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head, rest = await asyncio.wait_for(read_head(reader), HEAD_TIMEOUT_S)
            request = parse_request(head)
        except (Malformed, TimeoutError) as exc:
            reason = "malformed request" if isinstance(exc, Malformed) else "no request head"
            self.record("blocked", None, host="", proxy_type="", rule="", reason=reason)
            writer.write(response(400, "Bad Request", f"{reason}: {exc}"[:300]))
            await writer.drain()
            return
        rule = self.policy.match(request.host, request.port)
        if rule is None:
            self.record("blocked", request, rule="", reason="no rule admits this host")
            writer.write(response(403, "Forbidden", f"blocked by egress policy: {request.target}"))
            await writer.drain()
            return
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                request.host, request.port, type=socket.SOCK_STREAM
            )
        except OSError:
            infos = []
        addresses = self.policy.reachable(rule, dict.fromkeys(str(i[4][0]) for i in infos))
        if infos and not addresses:
            self.record("blocked", request, rule=rule.text, reason="resolves to a local address")
            writer.write(response(403, "Forbidden", f"blocked by egress policy: {request.target}"))
            await writer.drain()
            return
        upstream = await self._connect(addresses, request.port)
        if upstream is None:
            self.record(
                "allowed", request, rule=rule.text, source=rule.source, reason="upstream failed"
            )
            writer.write(response(502, "Bad Gateway", f"cannot reach {request.target}"))
            await writer.drain()
            return
        self.record("allowed", request, rule=rule.text, source=rule.source)
        up_reader, up_writer = upstream
        if request.proxy_type == "connect":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
        else:
            up_writer.write(request.head)
        if rest:
            up_writer.write(rest)
        try:
            # A forwarded http request ends with its response (Connection: close); a
            # tunnel lives until both sides closed it.
            await pipe_both(
                reader, writer, up_reader, up_writer, tunnel=request.proxy_type == "connect"
            )
        finally:
            up_writer.close()

    async def _connect(
        self, addresses: Sequence[str], port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        for address in addresses:
            with contextlib.suppress(OSError, TimeoutError):
                return await asyncio.wait_for(
                    asyncio.open_connection(address, port, limit=BUFFER), CONNECT_TIMEOUT_S
                )
        return None


async def read_head(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """(head through CRLFCRLF, bytes already read after it); Malformed past HEAD_LIMIT."""
    buffer = b""
    while True:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            return buffer[: end + 4], buffer[end + 4 :]
        if len(buffer) > HEAD_LIMIT:
            raise Malformed("request head too large")
        chunk = await reader.read(BUFFER)
        if not chunk:
            raise Malformed("connection closed before a complete request head")
        buffer += chunk


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    while data := await src.read(BUFFER):
        dst.write(data)
        await dst.drain()
    if dst.can_write_eof():
        with contextlib.suppress(OSError):
            dst.write_eof()


async def pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
    *,
    tunnel: bool = True,
) -> None:
    """Copy both ways until both sides finished (a tunnel) or the upstream finished (a
    forwarded request); an error on either side ends both."""
    upload = asyncio.ensure_future(_copy(reader, up_writer))
    download = asyncio.ensure_future(_copy(up_reader, writer))
    tasks = [upload, download]
    try:
        pending: set[asyncio.Future[None]] = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            if any(t.exception() is not None for t in done) or (download in done and not tunnel):
                break
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task


async def serve(config: Config, *, ready: asyncio.Event | None = None) -> None:
    """Serve until cancelled (tests) or, run as a module, until SIGTERM / box removal."""
    proxy = Proxy(config)
    server = await asyncio.start_server(proxy.handle, config.listen, config.port, limit=BUFFER)
    port = server.sockets[0].getsockname()[1]
    write_private(Path(config.ports_file), json.dumps({"port": port}))
    if ready is not None:
        ready.set()
    async with server:
        await server.serve_forever()


async def _main(config_path: Path) -> None:
    config = Config.load(config_path)
    task = asyncio.ensure_future(serve(config))
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    box = config_path.parent
    while not task.done():
        await asyncio.wait([task], timeout=ORPHAN_CHECK_S)
        if not box.is_dir():
            task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


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


def kit_allowlist(spec_path: Path | None = None) -> tuple[str, ...]:
    """`caps.network.allow` of the kit spec (`bandkit.image.facts.SPEC`), never retyped."""
    import yaml

    from bandkit.image.facts import SPEC

    path = spec_path or SPEC
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    allow = ((data.get("caps") or {}).get("network") or {}).get("allow")
    if not isinstance(allow, list) or not all(isinstance(h, str) for h in allow):
        raise EgressError(f"{path}: caps.network.allow must be a list of hosts")
    return tuple(allow)


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
