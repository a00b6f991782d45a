"""Benchmarks run by `nox -s bench` (`python -m bandkit.bench [name ...]`).

Each benchmark is a module here with `run() -> list[str]`: it measures, compares with the
upstream kit where that runs here, and returns the lines to print (figures and ratios).
Register it in `BENCHES` below.
"""

from __future__ import annotations

# name -> module under bandkit.bench; each module defines `run() -> list[str]`.
BENCHES: dict[str, str] = {
    "launcher": "launcher",
    "image": "image",
    "image_multiarch": "image_multiarch",
    "emulator": "emulator",
    "emulator_rooms": "emulator_rooms",
    "runtimes": "runtimes",
    "demo": "demo",
    "smoke": "smoke",
    "newcomer": "newcomer",
    "proxy": "proxy",
    "release": "release",
}
