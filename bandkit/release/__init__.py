"""The release pipeline's decision core: gather, then decide, then act.

1. **Gather** (IO, elsewhere): list tags and probe every immutable reference in each
   registry, look at the git tag and the working tree, read the lock file. The result is a
   frozen snapshot (`plan.Observed`, a `uv.lock` text, index answers).
2. **Decide** (pure, here): `versions` parses and orders version tags, computes the next
   rebuild suffix and which floating tags may move; `plan` turns an `Observed` snapshot
   into an ordered `Plan` or refuses with an exit code; `lockage` is the quarantine gate
   that refuses too-young dependencies before anything is built.
3. **Act** (IO, elsewhere): run the plan's steps in order and stop at the first failure.
   Floating tags are the plan's last steps, so a run that stops early never moves them.

Nothing in this package reads a clock, the network or the environment: time, registry
state and index answers are passed in, so every decision is testable offline.
"""
