#!/usr/bin/env bash
# Installs everything codeco needs to build, test and run, from Debian packages
# and npm only. Idempotent: installs only what is missing, runs `apt-get update`
# at most once, and puts npm tools into the project-local tools/node/ folder.
#
#   scripts/install-deps.sh          # build + test + demo dependencies
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Debian packages, grouped by what needs them (libtorch-dev: PDLC's LSTM, CPU;
# libvalijson-dev: MDM's JSON Schema validation).
BUILD_PKGS=(cmake ninja-build ccache g++ pkg-config git)
LIB_PKGS=(libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
          libabsl-dev prometheus-cpp-dev librocksdb-dev catch2 libyaml-cpp-dev
          nlohmann-json3-dev libssl-dev libcurl4-openssl-dev libbenchmark-dev
          coinor-libcbc-dev libhiredis-dev libtorch-dev libvalijson-dev)
# Real servers the testbed and tests run: Prometheus scrapes every service;
# docker-registry holds checkpoint images; redis-server is the stateful workload;
# criu (3.17 on Debian 12) backs the checkpointer's CRIU driver where `criu check`
# passes (root, a full kernel; in containers it fails and the driver says why);
# etcd-server/etcd-client hold a replicated hub's state (store.backend: etcd).
SERVER_PKGS=(prometheus docker-registry redis-server criu etcd-server etcd-client)
# iproute2: deploy_manifests_test starts each service in a network namespace of its own.
# python3-kubernetes: the official client's models check the stand-in
# kube-apiserver's documents (services/kubelms/tests/check_kube_json.py).
TOOL_PKGS=(openssl nodejs npm curl procps iproute2 python3-kubernetes)
# Test data: the official JSON-Schema-Test-Suite MDM's schema validation runs.
TEST_DATA_PKGS=(json-schema-test-suite)

missing=()
for pkg in "${BUILD_PKGS[@]}" "${LIB_PKGS[@]}" "${SERVER_PKGS[@]}" "${TOOL_PKGS[@]}" \
           "${TEST_DATA_PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if [ "${#missing[@]}" -gt 0 ]; then
  # nodejs/npm may come from another source (e.g. a preinstalled Node); skip them if present.
  filtered=()
  for pkg in "${missing[@]}"; do
    case "$pkg" in
      nodejs) command -v node >/dev/null 2>&1 || filtered+=("$pkg") ;;
      npm) command -v npm >/dev/null 2>&1 || filtered+=("$pkg") ;;
      *) filtered+=("$pkg") ;;
    esac
  done
  if [ "${#filtered[@]}" -gt 0 ]; then
    echo "install-deps: installing Debian packages: ${filtered[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${filtered[@]}"
  fi
fi

# npm tools (buf for lint and outside-client tests, grpc-js for the JS client tests),
# pinned, into tools/node/ so nothing is installed globally.
NODE_DIR="$ROOT/tools/node"
if [ ! -x "$NODE_DIR/node_modules/.bin/buf" ] || [ ! -d "$NODE_DIR/node_modules/@grpc/grpc-js" ]; then
  echo "install-deps: installing npm tools into tools/node"
  (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error 2>/dev/null || \
     npm install --no-audit --no-fund --loglevel=error)
fi
echo "install-deps: ok"
