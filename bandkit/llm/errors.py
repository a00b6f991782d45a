"""The stub's operator-facing failures: each message says what failed and what to do."""

from __future__ import annotations

from bandkit.errors import BandkitError


class LLMStubError(BandkitError):
    """A failure to start, stop or configure the LLM stub."""


class ScriptError(LLMStubError):
    """A script file that cannot be read or does not follow the schema (names the file)."""
