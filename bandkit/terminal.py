"""Sandbox-controlled text made safe to show on the operator's terminal.

An agent's log lines, its replies and the messages it posts are the sandbox's to choose:
an escape sequence in them (OSC `ESC ] 0;title BEL` retitles the window, some terminals
act on OSC 52 clipboard writes or on hyperlinks, CSI `ESC [ 2J` clears the screen,
`\\r` and backspace overwrite what was printed before) would act on the operator's
terminal. Every host-side print of such text goes through `printable`: each control
character but newline and tab (C0, DEL, C1, and the Unicode bidirectional overrides that
reorder what is shown) becomes a visible escape such as `\\x1b`, so the readable text
stays and nothing reaches the terminal as a control.
"""

from __future__ import annotations

import re

# C0 but \t (09) and \n (0a), DEL, C1, then the bidi embeddings, overrides and isolates.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character but newline and tab shown as an escape
    (`\\x1b`, `\\x07`, `\\u202e`); CRLF line ends become plain newlines first."""
    return _CONTROLS.sub(_escaped, text.replace("\r\n", "\n"))
