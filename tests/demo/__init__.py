"""Tests for the demo's pure parts: breaker, projection and settings."""
