"""`python -m bandkit.emulator`: parse options, run the emulator, print where it is.

stdout line 1 is the REST base URL and line 2 the WebSocket URL (scripts read these);
the lines after say where the user key, state, CA and pages are, with a one-time login
link for the pages. Logs go to stderr; the link is printed on stdout only.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import secrets
import sys
from pathlib import Path

from bandkit import daemons
from bandkit.emulator.access import allowed_hosts
from bandkit.emulator.errors import EmulatorError, Phase
from bandkit.emulator.server import Emulator, EmulatorConfig

DEFAULTS = EmulatorConfig()
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _pause_seconds(value: str) -> float | None:
    """`--start-paused`: seconds, or `until-resumed` (None: held until faults/resume)."""
    if value == "until-resumed":
        return None
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number of seconds or until-resumed") from None


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bandkit.emulator",
        description=(
            "A local Band platform for the real band-sdk: REST human and agent APIs, "
            "Phoenix WebSocket, a control API under /_emulator/ and live room pages."
        ),
        epilog=(
            "Point an agent at it with BAND_REST_URL=<line 1> and BAND_WS_URL=<line 2>; "
            "register agents with the user key through the human API "
            "(POST /api/v1/me/agents/register). Ctrl-C stops it cleanly."
        ),
    )
    p.add_argument("--host", default=DEFAULTS.host, help="address to bind (default: %(default)s)")
    p.add_argument(
        "--port", type=int, default=DEFAULTS.port, help="port; 0 picks a free one (default)"
    )
    key = p.add_mutually_exclusive_group()
    key.add_argument(
        "--user-key",
        metavar="KEY",
        help="the human API key to accept (generated and printed if absent)",
    )
    key.add_argument(
        "--user-key-file",
        type=Path,
        metavar="PATH",
        help="read the human API key from this file (keeps it out of argv)",
    )
    p.add_argument(
        "--state-file",
        type=Path,
        metavar="PATH",
        help="JSON file to load at start and save after changes (default: in memory only)",
    )
    p.add_argument("--tls", action="store_true", help="serve https/wss with a generated local CA")
    p.add_argument(
        "--tls-dir",
        type=Path,
        metavar="DIR",
        help="CA and certificate directory (default: beside --state-file, else .run/emulator-tls)",
    )
    p.add_argument(
        "--tls-name",
        action="append",
        default=[],
        metavar="NAME",
        help="extra DNS name or IP for the certificate, e.g. host.docker.internal (repeatable)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME[:PORT]",
        help=(
            "another Host name clients reach it by (repeatable); the bound host, 127.0.0.1, "
            "localhost, [::1] and the --tls-name names are always allowed, any other Host "
            "is refused with 421"
        ),
    )
    p.add_argument(
        "--ws-ping-interval",
        type=float,
        metavar="SECONDS",
        default=DEFAULTS.ws_ping_interval,
        help="seconds between WebSocket pings (default: %(default)s)",
    )
    p.add_argument(
        "--ws-ping-timeout",
        type=float,
        metavar="SECONDS",
        default=DEFAULTS.ws_ping_timeout,
        help="drop a socket whose pong is this late, e.g. a frozen agent (default: %(default)s)",
    )
    p.add_argument(
        "--shutdown-timeout",
        type=float,
        metavar="SECONDS",
        default=DEFAULTS.shutdown_timeout,
        help="seconds to wait for connections when stopping (default: %(default)s)",
    )
    p.add_argument(
        "--start-paused",
        type=_pause_seconds,
        default=DEFAULTS.start_paused,
        metavar="SECONDS",
        help="hold agent traffic this long after start, as faults/pause does (for drills); "
        "`until-resumed` holds it until POST /_emulator/faults/resume",
    )
    p.add_argument(
        "--max-delivery-attempts",
        type=int,
        metavar="N",
        default=DEFAULTS.max_delivery_attempts,
        help="processing attempts a message gets per agent before it is failed for good "
        "(default: %(default)s)",
    )
    p.add_argument("--access-log", action="store_true", help="log every HTTP request")
    p.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="stderr log level",
    )
    daemons.add_go_option(p)
    return p


def _user_key(args: argparse.Namespace) -> tuple[str, str]:
    """(key, how to describe its source on stdout without showing a supplied key)."""
    if args.user_key:
        return args.user_key, "user key: as given by --user-key"
    if args.user_key_file is not None:
        try:
            value = args.user_key_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise EmulatorError(
                Phase.CONFIG, f"cannot read --user-key-file {args.user_key_file}: {exc.strerror}"
            ) from None
        if not value:
            raise EmulatorError(Phase.CONFIG, f"--user-key-file {args.user_key_file} is empty")
        return value, f"user key: from {args.user_key_file}"
    generated = f"band_u_{secrets.token_urlsafe(32)}"
    return generated, f"user key: {generated}"


def _banner(emulator: Emulator, key_line: str) -> list[str]:
    cfg = emulator.config
    platform = emulator.platform
    assert platform is not None
    lines = [emulator.rest_url, emulator.ws_url, key_line]
    if cfg.state_file is not None:
        st = platform.state
        lines.append(
            f"state file: {cfg.state_file} ({len(st.agents)} agents, {len(st.rooms)} rooms, "
            f"{len(st.messages)} messages)"
        )
    else:
        lines.append("state: in memory only (use --state-file to keep it across restarts)")
    lines.append(f"platform id: {platform.state.platform_id}")
    if emulator.ca_file is not None:
        lines.append(
            f"CA certificate: {emulator.ca_file} (export SSL_CERT_FILE={emulator.ca_file})"
        )
    minutes = round(platform.pages.login_ttl / 60)
    lines.append(f"room pages: {emulator.login_url()} (login link: works once, {minutes} min)")
    lines.append(f"control: {emulator.rest_url}/_emulator/health (user key)")
    if cfg.host not in LOOPBACK:
        lines.append(
            f"warning: bound to {cfg.host}: anyone who can reach it can try keys and links"
        )
    lines.append("Ctrl-C to stop.")
    return lines


async def _amain(config: EmulatorConfig, user_key: str, key_line: str) -> None:
    emulator = Emulator(config, user_key=user_key)
    await daemons.serve_and_announce(emulator, lambda: _banner(emulator, key_line))


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.after_go and not daemons.await_go("the emulator"):
        return daemons.EXIT_NO_GO
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        user_key, key_line = _user_key(args)
        if args.port < 0 or args.port > 65535:
            raise EmulatorError(Phase.CONFIG, f"--port must be 0..65535, got {args.port}")
        if not 1 <= args.max_delivery_attempts <= 100:
            raise EmulatorError(
                Phase.CONFIG,
                f"--max-delivery-attempts must be 1..100, got {args.max_delivery_attempts}",
            )
        for name in args.allow_host:
            try:
                allowed_hosts(name, 1, tls=False)
            except ValueError:
                raise EmulatorError(
                    Phase.CONFIG, f"--allow-host {name!r} is not a host name or name:port"
                ) from None
        config = EmulatorConfig(
            host=args.host,
            port=args.port,
            state_file=args.state_file,
            tls=args.tls,
            tls_dir=args.tls_dir,
            ws_ping_interval=args.ws_ping_interval,
            ws_ping_timeout=args.ws_ping_timeout,
            shutdown_timeout=args.shutdown_timeout,
            access_log=args.access_log,
            start_paused=args.start_paused,
            extra_tls_hosts=tuple(args.tls_name),
            allow_hosts=tuple(args.allow_host),
            max_delivery_attempts=args.max_delivery_attempts,
        )
        asyncio.run(_amain(config, user_key, key_line))
    except EmulatorError as exc:
        print(f"emulator: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
