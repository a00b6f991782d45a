"""`python -m bandkit.bench [name ...]`: run the named benchmarks (all when none given)."""

from __future__ import annotations

import importlib
import sys

from bandkit.bench import BENCHES


def main(argv: list[str]) -> int:
    names = argv or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"bench: unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(BENCHES)}")
        return 2
    for name in names:
        print(f"== {name}", flush=True)
        module = importlib.import_module(f"bandkit.bench.{BENCHES[name]}")
        for line in module.run():
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
