"""The kit image: facts, local bases, build (buildx or per-arch), push, registry, side builder.

Flow: `facts` (paths, tags, versions) → `bases` (local base images when the official ones
cannot be pulled) → `build` (`buildx` detection, per-arch fallback) → `push` (immutable
tags first, digest read back, floating tags last; `refs` parses references) → `registry`
(a throwaway local registry). `builder` starts the side dockerd for multi-platform builds.
"""
