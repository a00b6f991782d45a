"""Runnable examples. A package so that tests and tasks import their tested parts."""
