"""The demo's one error type."""

from __future__ import annotations

from bandkit.errors import BandkitError


class DemoError(BandkitError):
    """A demo step failed; the message says what and what to do (never a key)."""
