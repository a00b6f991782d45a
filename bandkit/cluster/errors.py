"""The cluster's one error type."""

from __future__ import annotations

from bandkit.errors import BandkitError


class ClusterError(BandkitError):
    """A cluster operation failed; the message names what and what to do."""
