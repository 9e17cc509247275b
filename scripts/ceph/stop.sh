#!/usr/bin/env bash
# Stops the cluster scripts/ceph/start.sh started (its daemons, by the pid files in its
# folder) and removes its folder.
set -uo pipefail
dir="${MEDIAGATE_CEPH_DIR:-/tmp/mediagate-ceph}"
for pidfile in "$dir"/run/*.pid; do
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
done
rm -rf "$dir"
