"""The release pipeline: gather, then decide, then act (`invoke release.*`).

1. **Gather** (IO): `gather` lists tags and probes every immutable reference in each
   registry (`oci`, the registry API through the `oras` SDK), looks at the git tag and
   the working tree; `lock_gate` runs the quarantine gate on the SDK lock (the clock,
   PyPI). `settings` says which registries.
2. **Decide** (pure): `versions` parses and orders version tags, computes the next
   rebuild suffix and which floating tags may move; `plan` turns an `Observed` snapshot
   into an ordered `Plan` or refuses with an exit code; `quarantine_rules` are the quarantine
   gate's rules, which refuse too-young dependencies before anything is built;
   `kit_artifact` makes the kit's OCI bytes.
3. **Act** (IO): `execute` runs the plan's steps in order and stops at the first failure
   (`build_once` builds and pushes the image, `oci` copies digests and pushes kits);
   floating tags are the plan's last steps, so a run that stops early never moves them.
   `summary` renders the final table; `publish` strings the three together.

The decision modules read no clock, network or environment: time, registry state and
index answers are passed in, so every decision is testable offline.
"""
