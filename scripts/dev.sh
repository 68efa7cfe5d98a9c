#!/usr/bin/env bash
# The one entry point for developers and CI.
#
#   scripts/dev.sh test     install deps, build and run every test (ctest): the plain
#                           suite in build/, then the same suite with AddressSanitizer +
#                           UndefinedBehaviorSanitizer in build-asan/ (what CI runs)
#   scripts/dev.sh test --plain
#                           only the plain suite (the quick loop)
#   scripts/dev.sh test --sanitize address,undefined | --sanitize thread
#                           only the suite built with those sanitizers, in build-asan/
#                           or build-tsan/; the first report fails the test that hit it
#   scripts/dev.sh demo     install deps, build, run the main job: a five-site emulated
#                           federation, bookinfo applied and placed (--once: stop it after)
#   scripts/dev.sh build    install deps, configure and build
#   scripts/dev.sh bench [AREA] [--quick] [--json]   build and run the benchmarks in bench/
#                                        (--json: machine-readable, where a bench has it)
#                           (AREA: store, placement, placement_grpc, relay, acm, auction,
#                           netma, apply_rate, checkpoint, forecast, adaptation, carbon, mdm)
#   scripts/dev.sh lint     buf lint on the contracts
#   scripts/dev.sh deps     only install dependencies
#
# Environment: BUILD_DIR (default build, build-asan or build-tsan),
# JOBS (default: number of cores).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
JOBS="${JOBS:-$(nproc)}"
BUF="$ROOT/tools/node/node_modules/.bin/buf"
# Relative paths in ccache's hash let several build directories share hits.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"
# Debug builds would otherwise hash the working directory too, so a fresh clone
# (CI) could never reuse what another checkout compiled.
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

deps() { "$ROOT/scripts/install-deps.sh"; }

# Sanitizers of this run: empty, "address,undefined" or "thread" (--sanitize).
SANITIZE=""
# Where sanitized processes write their reports (set with --sanitize).
REPORTS=""

configure() {
  local generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  local extra=()
  if [ -n "$SANITIZE" ]; then
    # Sanitized builds are for finding bugs, not for speed: -O1 keeps them fast
    # enough, -g1 keeps line numbers in reports at a fraction of full debug
    # info's compile and link time, and benchmarks are left out.
    extra=(-DCMAKE_BUILD_TYPE=Sanitize "-DCMAKE_CXX_FLAGS_SANITIZE=-O1 -g1"
           "-DCMAKE_C_FLAGS_SANITIZE=-O1 -g1" -DCODECO_BUILD_BENCH=OFF)
  else
    extra=(-DCMAKE_BUILD_TYPE=RelWithDebInfo)
  fi
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    cmake -S "$ROOT" -B "$BUILD_DIR" "${generator[@]}" "${extra[@]}" -DCODECO_SANITIZE="$SANITIZE"
  fi
}

# Which suites `test` runs: "all" (plain, then address,undefined) unless a
# flag picks one (--plain or --sanitize).
SUITES="all"

# Parses `--plain` and `--sanitize LIST`: picks the suite, the sanitizer build
# directory and the runtime options that stop at the first report.
sanitize_from_args() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --plain) SUITES="one"; shift ;;
      --sanitize) [ $# -ge 2 ] || { echo "dev.sh: --sanitize needs address,undefined or thread" >&2; exit 2; }
                  SANITIZE="$2"; shift 2 ;;
      --sanitize=*) SANITIZE="${1#--sanitize=}"; shift ;;
      *) echo "dev.sh: unknown test flag: $1" >&2; exit 2 ;;
    esac
  done
  if [ -n "$SANITIZE" ]; then SUITES="one"; fi
  case "$SANITIZE" in
    "") return 0 ;;
    address,undefined|undefined,address|address|undefined)
      [ "$SANITIZE" = "undefined,address" ] && SANITIZE="address,undefined"
      BUILD_DIR="$ROOT/build-asan" ;;
    thread) BUILD_DIR="$ROOT/build-tsan" ;;
    *) echo "dev.sh: --sanitize takes address,undefined or thread, not '$SANITIZE'" >&2; exit 2 ;;
  esac
  local supp="$ROOT/scripts/sanitizers"
  # Every sanitized process, the tests' own and the servers they start, writes
  # its report to a file here (log_path), so a report in a child process that
  # its test never looks at still fails the run (see run_tests).
  REPORTS="$BUILD_DIR/sanitizer-reports"
  local log="log_path=$REPORTS/report"
  # halt_on_error: the first report ends the process with a non-zero code, so
  # the test (or the server a test started, whose exit the test checks) fails.
  export ASAN_OPTIONS="$log:log_exe_name=1:halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  export UBSAN_OPTIONS="$log:log_exe_name=1:halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  export TSAN_OPTIONS="$log:log_exe_name=1:halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
}

build() {
  configure
  local start=$SECONDS
  cmake --build "$BUILD_DIR" -j "$JOBS"
  echo "dev.sh: build took $((SECONDS - start)) s"
  if command -v ccache >/dev/null 2>&1; then ccache -s 2>/dev/null | grep -iE "hits|misses" | head -3 || true; fi
}

run_tests() {
  local start=$SECONDS status=0
  if [ -n "$REPORTS" ]; then rm -rf "$REPORTS"; mkdir -p "$REPORTS"; fi
  # Two at a time: tests start real servers, and CI has two cores.
  (cd "$BUILD_DIR" && set -o pipefail &&
     ctest --output-on-failure -j 2 --timeout 300 2>&1 | tee "$BUILD_DIR/ctest-output.log") || status=$?
  echo "dev.sh: tests took $((SECONDS - start)) s"
  if [ -n "$REPORTS" ] && [ -n "$(ls -A "$REPORTS")" ]; then
    local f
    for f in "$REPORTS"/*; do
      echo "== sanitizer report $(basename "$f")"
      head -c 20000 "$f"
    done
    echo "dev.sh: $(ls "$REPORTS" | wc -l) sanitizer report(s) ($SANITIZE) in $REPORTS"
    [ "$status" = 0 ] && status=1
  fi
  return "$status"
}

# Prints the failed tests of the suite built in $1 and what each printed, so a
# failure early in a long run is still in the last lines a CI log keeps.
failure_summary() {
  local log="$1/ctest-output.log"
  [ -f "$log" ] && grep -qE '\*\*\*(Failed|Timeout|Exception)|Not Run' "$log" || return 0
  echo "== failures in $(basename "$1"):"
  awk '/Test +#[0-9]+: .*(\*\*\*(Failed|Timeout|Exception)|Not Run)/ { on = 1; n = 0 }
       on && /^ +Start +[0-9]+: |^[0-9]+\/[0-9]+ Test +#[0-9]+: .* Passed/ { on = 0 }
       on && n++ < 80 { print }' "$log"
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
  local -a extra=()
  for arg in "$@"; do
    case "$arg" in
      --quick) quick=1 ;;
      --*) extra+=("$arg") ;;  # e.g. --json, for the benches that take it
      *) area="$arg" ;;
    esac
  done
  # With --json, stdout carries only the benches' JSON; the rest goes to stderr.
  local log=1
  case " ${extra[*]} " in *" --json "*) log=2 ;; esac
  build >&"$log"
  local b name ran=0
  for b in "$BUILD_DIR"/bench/*; do
    [ -x "$b" ] && [ -f "$b" ] || continue
    name="$(basename "$b" _bench)"
    [ "$name" = "kv_store" ] && name=store
    # An area runs its own binary and any named <area>_<part>_bench.
    [ -z "$area" ] || [ "$area" = "$name" ] || [ "${name#"${area}"_}" != "$name" ] || continue
    echo "== $name ($(basename "$b"))" >&"$log"
    if "$b" --help 2>&1 | grep -q benchmark_filter; then
      if [ "$quick" = 1 ]; then "$b" --benchmark_min_time=0.05; else "$b"; fi
    else
      if [ "$quick" = 1 ]; then "$b" --quick "${extra[@]}"; else "$b" "${extra[@]}"; fi
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
  test)
    sanitize_from_args "$@"
    if [ "$SUITES" = all ]; then
      # The plain suite, then the ASan+UBSan one in a fresh dev.sh (its own
      # sanitizer environment); both always run, either failing fails the run.
      start=$SECONDS status=0
      deps; build; run_tests || status=$?
      "$ROOT/scripts/dev.sh" test --sanitize address,undefined || status=$?
      failure_summary "$ROOT/build"
      failure_summary "$ROOT/build-asan"
      echo "dev.sh: plain and address,undefined suites took $((SECONDS - start)) s (status $status)"
      exit "$status"
    fi
    deps; build; run_tests ;;
  demo) deps; build; demo "$@" ;;
  bench) if [[ " $* " == *" --json "* ]]; then deps >&2; else deps; fi; bench "$@" ;;
  lint) deps; (cd "$ROOT/proto" && "$BUF" lint) && echo "buf lint: clean" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
