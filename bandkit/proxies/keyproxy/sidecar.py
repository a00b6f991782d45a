"""The credential proxy as a pod's sidecar: one route, its key and client token read from
mounted files, everything else from arguments (the image `band-credential-proxy` runs it).

    credential-proxy --upstream https://platform.example:443 --key-file /run/band-key/agent-key
        --token-file /run/band-token/token [--listen 127.0.0.1:18080]
        [--placeholder proxy-managed] [--path /api/v1/agent ...] [--state-dir /tmp/keyproxy]

The agent reaches it at `http://<listen>/<token>` (REST) and `ws://<listen>/<token>/...`
(the socket) with the placeholder as its key; the proxy checks the token, forwards only
the `--path` prefixes (default: the Band agent API and its socket) and swaps the key in
below them, as every box's proxy does (`bandkit.proxies.keyproxy`). The key and the token
are read from their files, never from argv or the environment, and reach no log line. It
writes its port to `<state-dir>/ports.json` and serves until SIGTERM or until that folder
is gone. Exit 2: an unusable argument or file (the message names it, never a value).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from bandkit.proxies.keyproxy.config import ConfigError, parse_config
from bandkit.proxies.keyproxy.server import serve
from bandkit.proxies.wire import until_stopped

LISTEN = "127.0.0.1:18080"
PLACEHOLDER = "proxy-managed"
# The Band agent API below a platform origin: REST, then the Phoenix socket.
BAND_PATHS = ("/api/v1/agent", "/api/v1/socket/websocket")
STATE_DIR = "/tmp/keyproxy"  # noqa: S108 (the pod's own /tmp, an emptyDir)
MAX_SECRET_BYTES = 4096


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="credential-proxy", description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="the platform's origin (https://...)")
    parser.add_argument("--key-file", required=True, type=Path, help="the agent key's file")
    parser.add_argument("--token-file", required=True, type=Path, help="the client token's file")
    parser.add_argument("--listen", default=LISTEN, help=f"ADDRESS:PORT (default {LISTEN})")
    parser.add_argument("--placeholder", default=PLACEHOLDER, help="what the agent sends as key")
    parser.add_argument(
        "--path", action="append", dest="paths", help="a path prefix to forward (repeatable)"
    )
    parser.add_argument("--state-dir", default=STATE_DIR, type=Path, help="where ports.json goes")
    return parser


def _secret(path: Path, what: str) -> str:
    """A mounted secret's value (one line, trailing newline dropped); ConfigError names
    the file, never its content."""
    try:
        raw = path.read_bytes()[: MAX_SECRET_BYTES + 1]
    except OSError as exc:
        raise ConfigError(f"cannot read the {what} file {path}: {exc.strerror}") from None
    value = raw.decode("utf-8", errors="replace").strip()
    if not value or len(raw) > MAX_SECRET_BYTES or "\n" in value:
        raise ConfigError(f"the {what} file {path} must hold one non-empty line")
    return value


def _listen(raw: str) -> tuple[str, int]:
    host, _, port = raw.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(f"--listen {raw!r} must be ADDRESS:PORT")
    return host, int(port)


def config(args: argparse.Namespace) -> tuple[dict[str, object], str]:
    """The keyproxy config the arguments and files make, and the address to listen on."""
    host, port = _listen(args.listen)
    paths = list(args.paths or BAND_PATHS)
    route = {
        "upstream": args.upstream,
        "paths": paths,
        "swaps": [[args.placeholder, _secret(args.key_file, "key"), paths]],
        "port": port,
    }
    return {"token": _secret(args.token_file, "token"), "routes": [route]}, host


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        raw, host = config(args)
        token, routes, limits = parse_config(raw)
        args.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (ConfigError, OSError) as exc:
        reason = str(exc) if isinstance(exc, ConfigError) else f"state dir: {exc.strerror}"
        sys.stderr.write(f"credential-proxy: {reason}\n")
        return 2
    ports_file = args.state_dir / "ports.json"
    serving = serve(token, routes, ports_file, host, limits)
    asyncio.run(until_stopped(serving, args.state_dir, (signal.SIGTERM, signal.SIGINT)))
    return 0
