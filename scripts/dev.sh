#!/usr/bin/env bash
# The one entry point for developers and CI.
#
#   scripts/dev.sh test     install deps, configure, build, run every test (ctest)
#   scripts/dev.sh demo     install deps, build, run the main job: a five-site emulated
#                           federation, bookinfo applied and placed (--once: stop it after)
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

# The main job: an emulated five-site federation (CODEF), the hub's and every
# cluster's services, the bookinfo application applied through ACM and placed
# by SWM, its placement shown. The federation stays up for exploring with
# codecoctl (stop it with `build/bin/codecoctl down`); --once stops it at the end.
demo() {
  local once=0
  [ "${1:-}" = "--once" ] && once=1
  local ctl="$BUILD_DIR/bin/codecoctl"
  local scenario="$ROOT/examples/scenarios/grid5000-five-sites.yaml"
  local cam="$ROOT/examples/cams/bookinfo.yaml"
  "$ctl" down >/dev/null 2>&1 || true
  echo "== codecoctl up --scenario examples/scenarios/grid5000-five-sites.yaml"
  "$ctl" up --scenario "$scenario"
  # Expanded now: the trap runs after this function's locals are gone.
  [ "$once" = 1 ] && trap "'$ctl' down" EXIT
  echo
  echo "== waiting for the clusters' agents to register with the hub"
  local i
  for i in $(seq 1 60); do
    [ "$("$ctl" get clusters 2>/dev/null | grep -c ' Ready ')" -ge 6 ] && break
    sleep 0.5
  done
  "$ctl" get clusters
  echo
  echo "== codecoctl apply -f examples/cams/bookinfo.yaml"
  "$ctl" apply -f "$cam"
  for i in $(seq 1 120); do
    # Placed, then Running once the clusters' agents report its pods running.
    "$ctl" get apps 2>/dev/null | grep -qE '^bookinfo +(Running|Degraded|Failed)' && break
    sleep 0.5
  done
  echo
  echo "== codecoctl get apps"
  "$ctl" get apps
  echo
  echo "== codecoctl describe app bookinfo"
  "$ctl" describe app bookinfo
  echo
  if [ "$once" = 1 ]; then
    echo "Stopping the federation (--once)."
  else
    echo "The federation keeps running. Try: $ctl health --all | $ctl fault link rennes nantes --rtt 50ms"
    echo "Stop it with: $ctl down"
  fi
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
    # An area runs its own binary and any named <area>_<part>_bench.
    [ -z "$area" ] || [ "$area" = "$name" ] || [ "${name#"${area}"_}" != "$name" ] || continue
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
