"""The `swarm` runtime: a sandbox as swarm services on a Docker Swarm, with the docker
runtime's custody (the key only in its credential proxy's service, the agent on an
internal overlay with no other way out).

The modules, one concern each:

- `runtime`: `SwarmRuntime`, the lifecycle, the verbs and the removers (its docstring has
  what one sandbox is made of, and what `docker service create` cannot express);
- `objects`: the labelled swarm objects and the removal of only what is ours;
- `egress`: the overlay the credential proxies share, their way off their node;
- `relay`: the platform relay on the local cluster's hub (a host process whose listening
  sockets live in the hub's network namespace), with its policy log.
- `drain` (imported by name: `cluster.drain`): a node drained with the kit's sandboxes
  moved off it first, in an order that spares them the engine's overlay join race.
"""

from bandkit.runtimes.swarm.runtime import SwarmRuntime

__all__ = ["SwarmRuntime"]
