"""`python -m bandkit.llm`: load the scripts and keys, serve in the foreground, say where.

stdout line 1 is the base URL (scripts read it); the lines after give the environment an
agent needs, where the keys and request log are, and a one-time login link for the turns
page (the pages take the operator key, `--operator-key-file`, or that link's session;
never "any loopback client"). Logs go to stderr and never hold a key. `--check` only
validates the scripts (and key file) and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import secrets
import sys
from pathlib import Path

from bandkit import daemons
from bandkit.fsio import UnsafePathError, read_regular
from bandkit.llm.errors import LLMStubError
from bandkit.llm.keys import KeyRing
from bandkit.llm.pipeline import AGENT_HEADER
from bandkit.llm.script import ScriptSet, load_scripts
from bandkit.llm.server import LLMStub
from bandkit.llm.state import StubConfig

DEFAULTS = StubConfig()
LOOPBACK = ("127.0.0.1", "::1", "localhost")
log = logging.getLogger("bandkit.llm")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bandkit.llm",
        description=(
            "A local LLM stub for developing agents offline: the Anthropic Messages API "
            "(/v1/messages) and the OpenAI Responses and Chat Completions APIs "
            "(/v1/responses, /v1/chat/completions), streaming and not, answered from "
            "YAML scripts (one file per agent: rules on the tools offered, the last tool "
            "result and the user message; the reply is text or a tool call)."
        ),
        epilog=(
            "Script selection per request, first that applies: the "
            f"{AGENT_HEADER} header; a key bound to an agent in the key file "
            "(provider:agent=KEY); the model name (a script's `models`, or its agent name); "
            "the only script loaded. Keys: only the key file's keys are accepted (a "
            "placeholder such as proxy-managed is refused with the provider's 401). "
            "Turns: GET / (the page) and /_stub/turns, /_stub/health (JSON), for the "
            "operator only: the operator key in X-Bandkit-Operator-Key, or the session of "
            "a one-time login link (printed here; POST /_stub/login-link with the key "
            "mints another). Script schema: see bandkit/llm/script.py. Ctrl-C stops it "
            "cleanly."
        ),
    )
    p.add_argument(
        "--script",
        action="append",
        type=Path,
        required=True,
        metavar="FILE|DIR",
        help="a script file, or a directory of *.yaml scripts (repeatable)",
    )
    p.add_argument("--host", default=DEFAULTS.host, help="address to bind (default: %(default)s)")
    p.add_argument(
        "--port", type=int, default=DEFAULTS.port, help="port; 0 picks a free one (default)"
    )
    p.add_argument(
        "--key-file",
        type=Path,
        metavar="PATH",
        help=(
            "accepted keys, PROVIDER[:AGENT]=KEY a line (anthropic, openai); without it a "
            "key per provider is generated and printed on stdout"
        ),
    )
    p.add_argument(
        "--operator-key-file",
        type=Path,
        metavar="PATH",
        help=(
            "the operator's key for the pages and /_stub/* routes, one line (keep it "
            "0600); without it one is generated and printed on stdout"
        ),
    )
    p.add_argument(
        "--log-file",
        type=Path,
        metavar="PATH",
        help="append every request as a JSON line here, keys redacted (default: none)",
    )
    p.add_argument(
        "--shutdown-timeout",
        type=float,
        metavar="SECONDS",
        default=DEFAULTS.shutdown_timeout,
        help="seconds to wait for open requests when stopping (default: %(default)s)",
    )
    p.add_argument(
        "--keep-turns",
        type=int,
        metavar="N",
        default=DEFAULTS.keep_turns,
        help="turns kept in memory for /_stub/turns (default: %(default)s)",
    )
    p.add_argument("--check", action="store_true", help="validate the scripts and exit")
    p.add_argument("--access-log", action="store_true", help="log every HTTP request line")
    p.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="stderr log level",
    )
    daemons.add_go_option(p)
    return p


def _read_private(path: Path, what: str) -> str:
    """A key file's text (a regular file, never through a link); LLMStubError naming it."""
    try:
        raw, mode = read_regular(path, what=what)
    except FileNotFoundError:
        raise LLMStubError(f"{what} {path} does not exist") from None
    except UnsafePathError as exc:
        raise LLMStubError(str(exc)) from None
    except OSError as exc:
        raise LLMStubError(f"cannot read {what} {path}: {exc.strerror}") from None
    if mode & 0o077:
        log.warning("%s %s is readable by others (mode %o); chmod 600 it", what, path, mode)
    return raw.decode("utf-8", errors="replace")


def read_operator_key(path: Path) -> str:
    """The operator key: its file's one line."""
    key = _read_private(path, "operator key file").strip()
    if len(key) < 16 or any(c.isspace() for c in key):
        raise LLMStubError(f"operator key file {path} must hold one key of 16+ characters")
    return key


def read_keys(path: Path) -> KeyRing:
    return KeyRing.parse(_read_private(path, "key file"), str(path))


def _agents_line(scripts: ScriptSet) -> str:
    parts = []
    for name, script in scripts.agents.items():
        models = f" (models: {', '.join(script.models)})" if script.models else ""
        parts.append(f"{name}{models}")
    return "agents: " + "; ".join(parts)


def banner(stub: LLMStub, keys_line: list[str]) -> list[str]:
    url = stub.url
    config = stub.config
    lines = [
        url,
        _agents_line(stub.stub.scripts),
        f"ANTHROPIC_BASE_URL={url}",
        f"OPENAI_BASE_URL={url}/v1",
        *keys_line,
        f"turns: {url}/ (page) and {url}/_stub/turns (JSON), operator only",
        f"turns page: {stub.login_url()} (login link: works once, "
        f"{round(stub.stub.pages.login_ttl / 60)} min)",
        f"request log: {config.log_file}" if config.log_file else "request log: none (--log-file)",
    ]
    if config.host not in LOOPBACK:
        lines.append(f"warning: bound to {config.host}: anyone who can reach it can try keys")
    lines.append("Ctrl-C to stop.")
    return lines


async def _amain(stub: LLMStub, keys_line: list[str]) -> None:
    await daemons.serve_and_announce(stub, lambda: banner(stub, keys_line))


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.after_go and not daemons.await_go("the LLM stub"):
        return daemons.EXIT_NO_GO
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        if not 0 <= args.port <= 65535:
            raise LLMStubError(f"--port must be 0..65535, got {args.port}")
        scripts = load_scripts(args.script)
        if args.key_file is not None:
            keys = read_keys(args.key_file)
            keys_line = [f"keys: from {args.key_file}"]
        else:
            keys = KeyRing.generate()
            keys_line = [
                f"{provider} key: {value}"
                for provider, values in keys.keys.items()
                for value in values
            ]
        if args.operator_key_file is not None:
            operator_key = read_operator_key(args.operator_key_file)
            keys_line.append(f"operator key: from {args.operator_key_file}")
        else:
            operator_key = secrets.token_urlsafe(32)
            keys_line.append(f"operator key: {operator_key}")
        if args.check:
            unknown = sorted(keys.agents() - set(scripts.agents))
            if unknown:
                raise LLMStubError(f"keys bound to agents without a script: {', '.join(unknown)}")
            print(f"scripts ok: {_agents_line(scripts)}")
            return 0
        config = StubConfig(
            host=args.host,
            port=args.port,
            log_file=args.log_file,
            shutdown_timeout=args.shutdown_timeout,
            access_log=args.access_log,
            keep_turns=max(1, args.keep_turns),
            operator_key=operator_key,
        )
        stub = LLMStub(config, scripts=scripts, keys=keys)
        asyncio.run(_amain(stub, keys_line))
    except LLMStubError as exc:
        print(f"llm stub: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
