"""The egress proxy server: admit, resolve, connect, pipe; every decision logged.

A head that does not parse is answered 400, a target no rule admits (or one resolving
only to local or private addresses it may not reach, see `rules`) 403, an
unreachable upstream 502; otherwise a tunnel is opened (`CONNECT`) to one of the
addresses checked (the name is resolved once) or the rewritten request forwarded, and
bytes are piped both ways. Only clients from the sandbox network are served, at most
`wire.MAX_CLIENTS` at once. Header values are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import signal
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bandkit.fsio import read_regular, write_private
from bandkit.proxies.egress.log import PolicyLog
from bandkit.proxies.egress.request import Request, parse_request
from bandkit.proxies.egress.rules import LocalRefused, Policy, Rule, _ip, parse_rule
from bandkit.proxies.wire import (
    BUFFER,
    HEAD_LIMIT,
    HEAD_TIMEOUT_S,
    ClientSlots,
    MalformedRequest,
    answer,
    copy,
    open_upstream,
    until_stopped,
)

CONNECT_TIMEOUT_S = 15.0  # upstream TCP connect (any internet host)


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
        self.slots = ClientSlots()

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
        if not ours or not self.slots.take():
            reason = "too many connections" if ours else "client outside the sandbox network"
            self.record("blocked", None, host="", proxy_type="", rule="", reason=reason)
            writer.close()
            return
        try:
            await self._serve(reader, writer)
        except OSError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self.slots.give()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head, rest = await asyncio.wait_for(read_head(reader), HEAD_TIMEOUT_S)
            request = parse_request(head)
        except (MalformedRequest, TimeoutError) as exc:
            reason = "malformed request" if isinstance(exc, MalformedRequest) else "no request head"
            self.record("blocked", None, host="", proxy_type="", rule="", reason=reason)
            writer.write(answer(400, "Bad Request", f"{reason}: {exc}"[:300]))
            await writer.drain()
            return
        rules = self.policy.admitting(request.host, request.port)
        if not rules:
            self.record("blocked", request, rule="", reason="no rule admits this host")
            writer.write(answer(403, "Forbidden", f"blocked by egress policy: {request.target}"))
            await writer.drain()
            return
        # Resolved once; the connection goes to exactly the addresses checked here (a
        # second lookup could answer differently: DNS rebinding).
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                request.host, request.port, type=socket.SOCK_STREAM
            )
        except OSError:
            infos = []
        try:
            routes = self.policy.reachable(rules, dict.fromkeys(str(i[4][0]) for i in infos))
        except LocalRefused as exc:
            self.record("blocked", request, rule=rules[0].text, reason=str(exc))
            writer.write(
                answer(403, "Forbidden", f"blocked by egress policy: {request.target} ({exc})")
            )
            await writer.drain()
            return
        connected = await self._connect(routes, request.port)
        if connected is None:
            rule = routes[0][1] if routes else rules[0]
            self.record(
                "allowed", request, rule=rule.text, source=rule.source, reason="upstream failed"
            )
            writer.write(answer(502, "Bad Gateway", f"cannot reach {request.target}"))
            await writer.drain()
            return
        up_reader, up_writer, rule = connected
        self.record("allowed", request, rule=rule.text, source=rule.source)
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
        self, routes: Sequence[tuple[str, Rule]], port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Rule] | None:
        """The first of the checked addresses that answers (an IP literal each: no lookup
        happens here), with the rule that admitted it."""
        for address, rule in routes:
            with contextlib.suppress(OSError, TimeoutError):
                up_reader, up_writer = await open_upstream(address, port, CONNECT_TIMEOUT_S)
                return up_reader, up_writer, rule
        return None


async def read_head(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """(head through CRLFCRLF, bytes already read after it); MalformedRequest past
    HEAD_LIMIT."""
    buffer = b""
    while True:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            return buffer[: end + 4], buffer[end + 4 :]
        if len(buffer) > HEAD_LIMIT:
            raise MalformedRequest("request head too large")
        chunk = await reader.read(BUFFER)
        if not chunk:
            raise MalformedRequest("connection closed before a complete request head")
        buffer += chunk


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy until `src` ends, then half-close `dst` (the other way may go on)."""
    await copy(src, dst)
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


async def main(config_path: Path) -> None:
    """Serve the box of `config_path` until SIGTERM or until that box directory is gone."""
    config = Config.load(config_path)
    await until_stopped(serve(config), config_path.parent, (signal.SIGTERM,))
