"""Tests for the sandbox smoke's state, rotation, verdict and evidence report (offline)."""
