"""The one base class for failures a user can cause.

Library code raises a subclass of `BandkitError` with a message that says what failed and
what to do, and never names a task. The task layer (`tasks.py`) catches `BandkitError` in
one wrapper and prefixes the task's name, so a user sees `kit.stamp: <message>` and exit 1,
never a traceback.
"""

from __future__ import annotations


class BandkitError(Exception):
    """An expected failure: the message is one line, safe to show (no secret values)."""
