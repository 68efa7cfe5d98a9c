#!/usr/bin/env bash
# The one entry point for developers and CI.
#
#   scripts/dev.sh test     install deps, configure, build, run every test (ctest)
#   scripts/dev.sh demo     install deps, build, run the main job (--once: stop after showing it)
#   scripts/dev.sh build    install deps, configure and build
#   scripts/dev.sh bench [AREA] [--quick]   build and run the benchmarks in bench/
#                           (AREA: store, placement, relay, acm, netma)
#   scripts/dev.sh lint     buf lint on the contracts
#   scripts/dev.sh deps     only install dependencies
#
# Environment: BUILD_DIR (default build), CODECO_SANITIZE=1 for ASan+UBSan,
# JOBS (default: number of cores).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
JOBS="${JOBS:-$(nproc)}"
BUF="$ROOT/tools/node/node_modules/.bin/buf"
# Relative paths in ccache's hash let several build directories share hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"

deps() { "$ROOT/scripts/install-deps.sh"; }

configure() {
  local sanitize=OFF
  [ "${CODECO_SANITIZE:-0}" = "1" ] && sanitize=ON
  local generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCODECO_SANITIZE="$sanitize"
  fi
}

build() {
  configure
  local start=$SECONDS
  cmake --build "$BUILD_DIR" -j "$JOBS"
  echo "dev.sh: build took $((SECONDS - start)) s"
  if command -v ccache >/dev/null 2>&1; then ccache -s 2>/dev/null | grep -iE "hits|misses" | head -3 || true; fi
}

run_tests() {
  local start=$SECONDS
  # Two at a time: tests start real servers, and CI has two cores.
  (cd "$BUILD_DIR" && ctest --output-on-failure -j 2 --timeout 300)
  echo "dev.sh: tests took $((SECONDS - start)) s"
}

# State of the demo, global so the exit trap can clean up.
DEMO_WORK=""
DEMO_PIDS=()
demo_cleanup() {
  for pid in "${DEMO_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${DEMO_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ -n "$DEMO_WORK" ] && rm -rf "$DEMO_WORK"
}

demo() {
  local once=0
  [ "${1:-}" = "--once" ] && once=1
  local bin="$BUILD_DIR/bin"
  DEMO_WORK="$(mktemp -d /tmp/codeco-demo.XXXXXX)"
  local work="$DEMO_WORK"
  trap demo_cleanup EXIT
  trap 'exit 130' INT TERM
  echo "Starting the six codeco services on loopback (plaintext, development mode)..."
  local svc role
  for svc in acm swm netma mdm pdlc checkpointer; do
    case "$svc" in pdlc|checkpointer) role=mc ;; *) role=hub ;; esac
    "$bin/codeco-$svc" --role "$role" --insecure --listen 127.0.0.1:0 \
      --metrics-listen 127.0.0.1:0 --data-dir "$work/$svc" \
      >"$work/$svc.out" 2>"$work/$svc.log" &
    DEMO_PIDS+=($!)
  done
  printf '\n%-20s %-5s %-22s %s\n' SERVICE ROLE GRPC METRICS
  for svc in acm swm netma mdm pdlc checkpointer; do
    local line="" tries=0
    while [ -z "$line" ] && [ $tries -lt 100 ]; do
      line="$(grep -m1 'listening on' "$work/$svc.out" 2>/dev/null || true)"
      [ -n "$line" ] || { sleep 0.1; tries=$((tries + 1)); }
    done
    [ -n "$line" ] || { echo "codeco-$svc did not start; its log:"; cat "$work/$svc.log"; exit 1; }
    local addr metrics role_of health
    addr="$(sed -E 's/.*listening on ([^ ]+).*/\1/' <<<"$line")"
    metrics="$(sed -E 's/.*metrics=([^ ]+).*/\1/' <<<"$line")"
    role_of="$(sed -E 's/.*role=([^ ]+).*/\1/' <<<"$line")"
    health="$("$bin/codecoctl" health "$addr" --insecure 2>&1 || true)"
    printf '%-20s %-5s %-22s %s  [%s]\n' "codeco-$svc" "$role_of" "$addr" "$metrics" "$health"
  done
  echo
  echo "Try:  $bin/codecoctl health <GRPC> --insecure"
  echo "      $BUF curl --protocol grpc --http2-prior-knowledge --list-methods http://<GRPC>"
  echo "      curl -s <METRICS> | grep codeco_"
  if [ "$once" = 1 ]; then
    echo "Stopping (--once)."
    return 0
  fi
  echo "Press Ctrl-C to stop."
  wait
}

# Runs the benchmarks of one area (store, placement, relay, acm, netma, ...) or
# of all. --quick gives each a short run: Google Benchmark binaries get a small
# --benchmark_min_time, the others their own --quick.
bench() {
  local area="" quick=0 arg
  for arg in "$@"; do
    case "$arg" in
      --quick) quick=1 ;;
      *) area="$arg" ;;
    esac
  done
  build
  local b name ran=0
  for b in "$BUILD_DIR"/bench/*; do
    [ -x "$b" ] && [ -f "$b" ] || continue
    name="$(basename "$b" _bench)"
    [ "$name" = "kv_store" ] && name=store
    [ -z "$area" ] || [ "$area" = "$name" ] || continue
    echo "== $name ($(basename "$b"))"
    if "$b" --help 2>&1 | grep -q benchmark_filter; then
      if [ "$quick" = 1 ]; then "$b" --benchmark_min_time=0.05; else "$b"; fi
    else
      if [ "$quick" = 1 ]; then "$b" --quick; else "$b"; fi
    fi
    ran=1
  done
  [ "$ran" = 1 ] || { echo "dev.sh: no benchmark area \"$area\" (see bench/)"; exit 2; }
}

cmd="${1:-}"
shift || true
case "$cmd" in
  deps) deps ;;
  build) deps; build ;;
  test) deps; build; run_tests ;;
  demo) deps; build; demo "$@" ;;
  bench) deps; bench "$@" ;;
  lint) deps; (cd "$ROOT/proto" && "$BUF" lint) && echo "buf lint: clean" ;;
  *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
