#!/usr/bin/env bash
# Stops the cluster scripts/ceph/start.sh started (its daemons, by the pid files in its
# folder, each only if that process is still one of them: a pid left by a cluster that
# died may belong to another process by now) and removes its folder.
set -uo pipefail
dir="${MEDIAGATE_CEPH_DIR:-/tmp/mediagate-ceph}"
# The gateway first, the monitor last: the others talk to it while they stop.
for pidfile in "$dir/run/client.rgw.pid" "$dir/run/osd.0.pid" "$dir/run/mon.a.pid"; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-c $dir/ceph.conf" || continue
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
done
rm -rf "$dir"
