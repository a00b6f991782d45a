"""Shared test helpers: `images` (kit images, once a run), `readme` (the README), `wait`."""
