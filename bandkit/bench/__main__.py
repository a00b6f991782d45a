"""`python -m bandkit.bench [name [--option value ...] ...]`: run the named benchmarks (all
when none given); options after a name go to that benchmark (`demo --brains stub`)."""

from __future__ import annotations

import importlib
import sys

from bandkit.bench import BENCHES


def parse(argv: list[str]) -> list[tuple[str, list[str]]]:
    """Names, each with the `--options` that follow it (`demo --brains stub`)."""
    runs: list[tuple[str, list[str]]] = []
    for arg in argv:
        if runs and (arg.startswith("-") or (runs[-1][1] and runs[-1][1][-1].startswith("-"))):
            runs[-1][1].append(arg)
        else:
            runs.append((arg, []))
    return runs


def main(argv: list[str]) -> int:
    runs = parse(argv) or [(name, []) for name in BENCHES]
    unknown = [n for n, _ in runs if n not in BENCHES]
    if unknown:
        print(f"bench: unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(BENCHES)}")
        return 2
    for name, options in runs:
        print(f"== {name}{' ' + ' '.join(options) if options else ''}", flush=True)
        module = importlib.import_module(f"bandkit.bench.{BENCHES[name]}")
        for line in module.run(options) if options else module.run():
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
