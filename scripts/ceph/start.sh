#!/usr/bin/env bash
# Starts a one-host Ceph cluster with its S3 gateway (RGW) on loopback, for the tests that
# need an S3 server which checks SigV4 signatures (s3rver accepts any secret), and prints
# the URL the tests read from MEDIAGATE_TEST_S3_URL: http://ACCESS_KEY:SECRET@127.0.0.1:PORT.
# Only that line goes to stdout; progress goes to stderr.
#
# One monitor, one OSD keeping its objects in memory (memstore: nothing on disk, gone when
# it stops), one radosgw, cephx off between them (S3 clients are still checked: RGW verifies
# every request's signature against the user's secret). Its files are in
# MEDIAGATE_CEPH_DIR (default /tmp/mediagate-ceph). Idempotent: when the gateway already
# answers there, it prints the URL and does nothing else. scripts/ceph/stop.sh stops it.
#
# Needs ceph-mon, ceph-osd and radosgw (Debian: apt-get install -y --no-install-recommends
# ceph-mon ceph-osd radosgw); .ci/run installs them when they are missing.
set -euo pipefail

dir="${MEDIAGATE_CEPH_DIR:-/tmp/mediagate-ceph}"
# Below the kernel's ephemeral range (32768-60999), so no client socket of a test takes them.
mon_port="${MEDIAGATE_CEPH_MON_PORT:-16789}"
rgw_port="${MEDIAGATE_CEPH_RGW_PORT:-17480}"
access_key="MEDIAGATETESTACCESS1"
secret_key="mediagate-test-secret-0123456789abcdef"
url="http://${access_key}:${secret_key}@127.0.0.1:${rgw_port}"
conf="$dir/ceph.conf"

log() { echo "ceph: $*" >&2; }

# The gateway answers an anonymous request with S3's XML (ListAllMyBuckets of nobody).
rgw_answers() { curl -fsS --max-time 2 "http://127.0.0.1:${rgw_port}/" >/dev/null 2>&1; }

for binary in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph; do
  command -v "$binary" >/dev/null 2>&1 || { log "$binary is missing (apt-get install -y --no-install-recommends ceph-mon ceph-osd radosgw)"; exit 1; }
done

if [ -f "$conf" ] && rgw_answers; then
  log "already running in $dir"
  echo "$url"
  exit 0
fi

started=$(date +%s%N)
# Whatever is left of an earlier cluster in this folder (its daemons, then its files).
"$(dirname "$0")/stop.sh" >/dev/null 2>&1 || true
rm -rf "$dir"
mkdir -p "$dir/mon" "$dir/osd" "$dir/run" "$dir/log"
fsid=$(cat /proc/sys/kernel/random/uuid)

cat > "$conf" <<CONF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
mon initial members = a
ms bind msgr1 = false
client mount timeout = 30
auth cluster required = none
auth service required = none
auth client required = none
run dir = $dir/run
pid file = $dir/run/\$name.pid
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
keyring = $dir/keyring
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 1
osd pool default pgp num = 1
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon warn on pool no redundancy = false
# Commits of the monitor sooner than its default second apart: each pool RGW creates waits on one.
paxos propose interval = 0.05
paxos min wait = 0.01
mon data avail warn = 1
mon data avail crit = 0
[mon.a]
mon data = $dir/mon
[osd.0]
osd data = $dir/osd
osd objectstore = memstore
memstore device bytes = 1073741824
[client.rgw]
ms mon client mode = crc
rgw frontends = beast endpoint=127.0.0.1:$rgw_port
rgw dns name = 127.0.0.1
rgw data = $dir/rgw
CONF

log "monitor on 127.0.0.1:$mon_port"
monmaptool --create --addv a "[v2:127.0.0.1:$mon_port]" --fsid "$fsid" "$dir/monmap" >/dev/null
ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap"
ceph-mon -c "$conf" -i a

log "OSD (memstore)"
osd_uuid=$(cat /proc/sys/kernel/random/uuid)
ceph -c "$conf" osd new "$osd_uuid" 0 >/dev/null
ceph-osd -c "$conf" -i 0 --mkfs --osd-uuid "$osd_uuid" 2>>"$dir/log/mkfs.log"
ceph-osd -c "$conf" -i 0 2>>"$dir/log/osd-start.log"

log "radosgw on 127.0.0.1:$rgw_port"
mkdir -p "$dir/rgw"
radosgw -c "$conf" -n client.rgw
for _ in $(seq 1 300); do
  rgw_answers && break
  sleep 0.1
done
rgw_answers || { log "radosgw does not answer on 127.0.0.1:$rgw_port (see $dir/log)"; exit 1; }

radosgw-admin -c "$conf" user create --uid=mediagate-test --display-name="mediagate tests" \
  --access-key="$access_key" --secret-key="$secret_key" >/dev/null
log "ready in $(( ($(date +%s%N) - started) / 1000000 )) ms ($dir)"
echo "$url"
