#!/bin/sh
# Start one node's Docker daemon. Run as
#   nsenter --net=/run/netns/NETNS -- unshare --mount --uts --propagation slave -- \
#     sh node-start.sh HOSTNAME NODE_DIR RUN_DIR
# so it has the node's network namespace and a mount and UTS namespace of its own.
# `ip netns exec` would remount /sys and lose the cgroup v1 mounts: instead the cgroup
# tree is set aside, a fresh sysfs (the namespace's own /sys/class/net) mounted, and the
# tree moved back. The node's own /etc/docker (a key.json of its own: a shared one gives
# every daemon the same engine id and the swarm refuses them) and a resolv.conf that
# fails fast (offline, a registry lookup would wait on DNS) are bound over the host's.
set -eu
name=$1
node_dir=$2
run_dir=$3
hostname "$name"
mkdir -p "$run_dir/cgroup-aside"
mount --rbind /sys/fs/cgroup "$run_dir/cgroup-aside"
umount -l /sys
mount -t sysfs sysfs /sys
mount --move "$run_dir/cgroup-aside" /sys/fs/cgroup
mount --bind "$node_dir/etc" /etc/docker
mount --bind "$node_dir/resolv.conf" /etc/resolv.conf
exec dockerd --config-file "$node_dir/etc/daemon.json"
