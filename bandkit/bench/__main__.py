"""`python -m bandkit.bench [--quick] [name [--option value ...] ...]`: run the named
benchmarks (all when none given); options after a name go to that benchmark (`demo
--brains stub`). `--help` lists them; `--quick` runs each once at its smallest sizes."""

from __future__ import annotations

import importlib
import os
import sys

from bandkit.bench import BENCHES, QUICK_ENV

USAGE = "usage: python -m bandkit.bench [--quick] [NAME [--option VALUE ...]] ..."
GLOBAL_FLAGS = ("--quick", "--help", "-h")


def help_text() -> str:
    width = max(len(name) for name in BENCHES)
    lines = [
        USAGE,
        "",
        "Runs the named benchmarks, or all of them, and prints their figures.",
        "",
        "options:",
        f"  {'--quick':<{width}}  one iteration at the smallest sizes (also {QUICK_ENV}=1): "
        "proves each benchmark runs",
        f"  {'--help':<{width}}  this list",
        "",
        "benchmarks:",
        *(f"  {name:<{width}}  {bench.summary}" for name, bench in BENCHES.items()),
    ]
    return "\n".join(lines)


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
    if any(arg in ("--help", "-h") for arg in argv):
        print(help_text())
        return 0
    if "--quick" in argv:
        os.environ[QUICK_ENV] = "1"  # before any benchmark module is imported
    runs = parse([arg for arg in argv if arg not in GLOBAL_FLAGS]) or [
        (name, []) for name in BENCHES
    ]
    unknown = [n for n, _ in runs if n not in BENCHES]
    if unknown:
        print(
            f"bench: unknown benchmark(s) or option(s) {', '.join(unknown)}; known: "
            f"{', '.join(BENCHES)} (`--help` says what each measures)",
            file=sys.stderr,
        )
        return 2
    for name, options in runs:
        print(f"== {name}{' ' + ' '.join(options) if options else ''}", flush=True)
        module = importlib.import_module(f"bandkit.bench.{BENCHES[name].module}")
        for line in module.run(options) if options else module.run():
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
