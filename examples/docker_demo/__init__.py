"""The three-agent demo: Maya (PM), Sam (Developer) and Jordan (Architect) in one Band room.

The pure parts, importable and unit-tested:

* ``breaker``: the circuit breaker that bounds the meeting (no IO, no clock);
* ``projection``: room messages projected to what the breaker observes;
* ``settings``: the breaker's caps and timers from ``DEMO_*`` environment variables.
"""
