#!/usr/bin/env bash
# The neighborhood auction on CODEF's five-site federation (issue 11): SWM's
# plans for greenness applications with and without it, one federation each.
#
#   auction_compare [--quick] [--apps N]
#
# Each run: `codecoctl up` (with Prometheus, so PDLC reads usage) with or
# without --auction; three of nancy-cloud's four VMs (the greenest cluster)
# loaded to 90 % with `codecoctl fault node`; once PDLC shows it, N
# greenness applications of one 1-CPU service applied one after the other.
# Printed per run: where each landed, and the mean energy per busy core and
# grid carbon intensity of the clusters that host them, read back from
# PDLC's ENERGY and CARBON components (100 x ref / (ref + v), refs 10 W per
# core and 300 gCO2/kWh). The scores order clusters by their nodes' mean, so
# a green cluster with one idle node loses to browner idle ones; a bid is the
# best node's. --quick: 2 applications. Wall-clock time (a benchmark).
set -euo pipefail

apps=4
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) apps=2; shift ;;
    --apps) apps="$2"; shift 2 ;;
    --help|-h) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "auction_compare: unknown flag $1" >&2; exit 2 ;;
  esac
done
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ctl="$here/../bin/codecoctl"
scenario="@PROJECT_SOURCE_DIR@/examples/scenarios/grid5000-five-sites.yaml"
[ -x "$ctl" ] || { echo "auction_compare: $ctl not built" >&2; exit 1; }
[ -f "$scenario" ] || { echo "auction_compare: scenario not found" >&2; exit 1; }

# Waits up to $1 seconds for command $2... to succeed.
wait_for() {
  local limit=$1; shift
  for _ in $(seq 1 "$limit"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  return 1
}
ready6() { [ "$("$ctl" get clusters 2>/dev/null | grep -c ' Ready ')" -ge 6 ]; }
# The greenness score line of node $2 in cluster $1.
score_line() { "$ctl" get scores --profile greenness --cluster "$1" 2>/dev/null | awk -v n="$2" '$2 == n'; }
# Whether PDLC shows node $1 of nancy-cloud with CPU headroom at most 20 (loaded).
loaded() { local h; h="$(score_line nancy-cloud "$1" | awk '{print $5}')"; [ -n "$h" ] && [ "$h" != "-" ] && awk -v h="$h" 'BEGIN{exit !(h <= 20)}'; }
# Whether PDLC shows node $1 of nancy-cloud with CPU headroom of at least 50
# (idle: the first minute's rates are not yet meaningful).
idle() { local h; h="$(score_line nancy-cloud "$1" | awk '{print $5}')"; [ -n "$h" ] && [ "$h" != "-" ] && awk -v h="$h" 'BEGIN{exit !(h >= 50)}'; }
placed() { "$ctl" get apps 2>/dev/null | awk -v a="$1" '$1 == a && NF >= 6 && $NF != "-" {found=1} END{exit !found}'; }

run() {
  local mode="$1" flag=""
  [ "$mode" = with ] && flag="--auction"
  export CODECO_HOME; CODECO_HOME="$(mktemp -d /tmp/codeco-auction-XXXXXX)"
  trap '"$ctl" down >/dev/null 2>&1 || true' EXIT
  "$ctl" up --scenario "$scenario" $flag > "$CODECO_HOME/up.log" 2>&1 ||
    { echo "up failed:"; tail -5 "$CODECO_HOME/up.log"; return 1; }
  wait_for 120 ready6 || { echo "clusters not ready"; return 1; }
  local all; all="$("$ctl" get scores --profile greenness --cluster nancy-cloud 2>/dev/null |
                     awk '$1 == "nancy-cloud" && $2 != "(cluster)" {print $2}' | sort)"
  local nodes spare; nodes="$(echo "$all" | head -3)"; spare="$(echo "$all" | sed -n 4p)"
  [ -n "$spare" ] || { echo "nancy-cloud shows fewer than 4 nodes in get scores"; return 1; }
  wait_for 180 idle "$spare" || { echo "nancy-cloud/$spare never showed idle"; return 1; }
  local n
  for n in $nodes; do "$ctl" fault node "nancy-cloud/$n" --load 90% >/dev/null; done
  for n in $nodes; do wait_for 180 loaded "$n" || { echo "load on $n never showed"; return 1; }; done
  wait_for 60 idle "$spare" || { echo "nancy-cloud/$spare not idle"; return 1; }
  local i where=() watts=0 carbon=0
  for i in $(seq 1 "$apps"); do
    cat > "$CODECO_HOME/g$i.yaml" <<EOT
apiVersion: codeco.io/v1
kind: CodecoApp
metadata:
  name: green-$i
spec:
  appName: green-$i
  performanceProfile: greenness
  codecoapp-msspec:
    - serviceName: work
      podspec:
        containers:
          - name: work
            image: registry.example/demo/batch:1
            resources:
              requests: {cpu: 1000m, memory: 256Mi}
EOT
    "$ctl" apply -f "$CODECO_HOME/g$i.yaml" >/dev/null
    wait_for 90 placed "green-$i" || { echo "green-$i never placed"; return 1; }
    local cluster; cluster="$("$ctl" get apps | awk -v a="green-$i" '$1 == a {print $NF}')"
    where+=("$cluster")
    # The hosting cluster's energy and carbon, from the first node line of its
    # greenness scores (one call: both columns).
    local e c
    read -r e c < <("$ctl" get scores --profile greenness --cluster "$cluster" |
                    awk -v c="$cluster" '$1 == c && $2 != "(cluster)" {print $7, $8; exit}')
    watts="$(awk -v s="$watts" -v e="$e" 'BEGIN{print s + 10 * (100 / e - 1)}')"
    carbon="$(awk -v s="$carbon" -v c="$c" 'BEGIN{print s + 300 * (100 / c - 1)}')"
  done
  printf '%-16s %-60s %6.1f W/core %6.1f gCO2/kWh\n' "$mode auction" "${where[*]}" \
    "$(awk -v s="$watts" -v n="$apps" 'BEGIN{print s / n}')" \
    "$(awk -v s="$carbon" -v n="$apps" 'BEGIN{print s / n}')"
  "$ctl" down >/dev/null 2>&1 || true
  trap - EXIT
}

echo "== $apps greenness applications (1 CPU each), nancy-cloud's VMs 1-3 at 90 % CPU"
printf '%-16s %-60s %s\n' "plan" "hosting clusters, in apply order" "mean of the hosts"
run without
run with
