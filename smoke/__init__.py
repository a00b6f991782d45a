"""The sandbox smoke: a headless agent in a real sandbox, proven to survive disruptions.

The flow, one run at a time (state in `.sandbox-smoke/`, see `smoke.state`):

1. start or resume a run (`StateStore.begin`: a finished or 12-hour-stale run is archived
   and a fresh one starts, carrying over ids not reaped yet);
2. provision a fresh agent and room for the run (probe label `provision`);
3. probe the round trip: a marker message reaches the agent over WebSocket and its reply
   comes back over REST (`initial`);
4. cut and restore the host's network, probe again (`after-wifi-reconnect`);
5. sleep and wake the host, probe again (`after-sleep-wake`);
6. restart the sandbox daemon, re-provision if needed, probe again (`after-daemon-restart`);
7. reap the agent and room (`cleanup`) and mark the run completed;
8. render the evidence report (`smoke.report`): a verdict derived from the latest probe
   per requirement, the scorecard, the operator's observations, the timeline and the
   follow-up.

`invoke smoke.run` does all of it automatically and offline (`smoke.run.run_all`: the
docker runtime when a daemon answers and the kit image is built, else the local one; the
smoke's own local platform; the drills in `smoke.drills`: a network cut, a sleep/wake, a daemon
restart and a platform restart); the other `smoke.*` tasks are the
operator's manual steps on the same state and report (`smoke/README.md`).

Each phase has exactly one operator message (`smoke.state.OPERATOR_MESSAGES`). The state
holds ids, versions, markers and notes, never a credential.
"""
