"""What the docker lane's scheduling needs to know of the tests.

The demo's containers have fixed names, so one demo runs on the daemon at a time (the
`one_demo_on_the_daemon` lock). The docker lane runs with `--dist loadgroup`, and every
test that takes that lock is in `DEMO_GROUP`: one worker runs them one after another,
while the other workers build and test beside it instead of waiting on the lock.
"""

DEMO_GROUP = "docker-demo"
