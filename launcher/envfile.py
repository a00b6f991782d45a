"""A small dotenv reader: NAME=value lines, parsed as data (never sourced or executed).

Supported: blank lines, `# comments`, an optional `export ` prefix, unquoted values
(an inline ` #` starts a comment), 'single-quoted' (literal) and "double-quoted"
values (\\n, \\t, \\", \\\\ escapes). Anything else is an error that names the line
number, never its content.
"""

from __future__ import annotations

import re

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
DOUBLE_QUOTE_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}


class EnvFileError(Exception):
    """A line that is not NAME=value; the message never includes the line's text."""


def _double_quoted(body: str, lineno: int) -> tuple[str, str]:
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char == '"':
            return "".join(out), body[index + 1 :]
        if char == "\\" and index + 1 < len(body):
            nxt = body[index + 1]
            out.append(DOUBLE_QUOTE_ESCAPES.get(nxt, "\\" + nxt))
            index += 2
            continue
        out.append(char)
        index += 1
    raise EnvFileError(f"line {lineno}: unterminated double-quoted value")


def _value(raw: str, lineno: int) -> str:
    raw = raw.strip()
    if raw.startswith("'"):
        end = raw.find("'", 1)
        if end < 0:
            raise EnvFileError(f"line {lineno}: unterminated single-quoted value")
        value, rest = raw[1:end], raw[end + 1 :]
    elif raw.startswith('"'):
        value, rest = _double_quoted(raw[1:], lineno)
    else:
        return raw.split(" #", 1)[0].split("\t#", 1)[0].strip()
    rest = rest.strip()
    if rest and not rest.startswith("#"):
        raise EnvFileError(f"line {lineno}: unexpected text after the quoted value")
    return value


def parse_env_file(text: str) -> dict[str, str]:
    """NAME -> value for every assignment (a later line wins over an earlier one)."""
    values: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("export "):
            stripped = stripped.removeprefix("export ").lstrip()
        name, sep, rest = stripped.partition("=")
        name = name.strip()
        if not sep or not NAME.fullmatch(name):
            raise EnvFileError(f"line {lineno} is not NAME=value")
        values[name] = _value(rest, lineno)
    return values
