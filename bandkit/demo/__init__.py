"""The three-agent demo's orchestration: what `invoke demo.up|down|status|logs` call.

`demo.up` (`run.up`) runs these phases, each resource recorded in the run manifest
(`<run_dir>/demo/manifest.json`, `layout`) before it exists, and tears everything down at
the end (unless `--keep`), on any failure, and on Ctrl-C or SIGTERM (`signals`):

1. preflight (`preflight`), before any change: scripted brains only, the scenario and
   the caps parse, the runtime's tools answer, no unfinished manifest and no
   `band-demo-*` sandbox (refuse to clobber: run `demo.down`);
2. platform (`target`): the local emulator (reused, or started and recorded) or a real
   deployment from `BAND_REST_URL` / `BAND_WS_URL` / `BAND_API_KEY_USER`;
3. sweep (`cast_ops`): delete stale demo agents (our names and the `[band-demo]` marker);
4. stage (`staging`): copy each role's workspace under the box root with its endpoints
   and scenario lines; the tracked tree is never modified;
5. provision (`cast_ops`): register the three agents, write each agent.id, store each
   key as a proxy-managed secret; create the three sandboxes; wait until every agent
   says it is connected (deadline, progress line);
6. meet (`examples.docker_demo.conductor`): the room, the brief, the breaker; every line
   goes to the terminal and the transcript (`transcript`);
7. teardown (`teardown`): exactly what the manifest lists, in reverse; the exit code
   says how the meeting ended (`outcome`).

`demo.down` (`teardown.down`) removes what an earlier run left; `demo.status` and
`demo.logs` (`status`) read without changing anything.
"""
