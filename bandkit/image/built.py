"""What an image build that is skipped when its inputs are unchanged reports: the agent
images (`agent`) and the sidecar image (`proxy`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BuiltImage:
    tag: str
    built: bool  # False: an image of the same inputs was there already
    seconds: float
    size_bytes: int

    def line(self) -> str:
        what = "built" if self.built else "up to date:"
        return f"{what} {self.tag} ({self.size_bytes / 1e6:.0f} MB, {self.seconds:.1f}s)"
