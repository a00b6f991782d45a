"""The three-agent demo: Maya (PM), Sam (Developer) and Jordan (Architect) in one Band room.

The pure parts (no IO, no clock), importable and unit-tested:

* ``cast``: the roles, names, sandboxes and descriptions;
* ``breaker``: the circuit breaker that bounds the meeting;
* ``projection``: room messages projected to what the breaker observes;
* ``settings``: the breaker's caps and timers from ``DEMO_*`` environment variables;
* ``scenario``: the scenario files that script the agents;
* ``speech``: the conductor's words and the transcript's line format.

The host-side conductor (``conductor``, with ``room``, its human-API client, and
``observer``, its WebSocket/poll feed) and the scripted brain (``brain``, copied into each
workspace under ``agents/``), and the agent program staged with it (``agent_main``,
``brains_frameworks``). This package is what a user copies or loads by path and what runs
inside the sandboxes; it imports nothing from the kit. The orchestration around it is the
library ``bandkit.demo`` (``README.md``, "What is an example here").
"""
