#!/usr/bin/env bash
# Development certificate authority for codeco (openssl only).
#
#   scripts/dev-ca.sh DIR ca                         create DIR/ca.crt, DIR/ca.key (kept if present)
#   scripts/dev-ca.sh DIR issue CLUSTER SERVICE [IP|DNS ...]
#                                                    issue DIR/CLUSTER/SERVICE.{crt,key}
#   scripts/dev-ca.sh DIR operator HUB               issue DIR/HUB/operator.{crt,key}, the
#                                                    federation's operator (codecoctl)
#
# Each issued certificate serves both as server and client identity, with
#   URI SAN  spiffe://codeco/cluster/CLUSTER/SERVICE   (the codeco identity)
#   DNS SAN  localhost, IP SAN 127.0.0.1, ::1          (loopback development)
# plus any extra IP addresses or DNS names given. EC P-256 keys; the CA is
# valid for 10 years, leaf certificates for 1 year. Not for production: keys
# are written unencrypted.
set -euo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] || usage
dir="$1"; cmd="$2"; shift 2
mkdir -p "$dir"

# "operator HUB" is "issue HUB operator": the user-facing identity of the federation.
if [ "$cmd" = operator ]; then
  [ $# -eq 1 ] || usage
  cmd=issue; set -- "$1" operator
fi

label_ok() { [[ "$1" =~ ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$ ]]; }

case "$cmd" in
  ca)
    if [ -s "$dir/ca.crt" ] && [ -s "$dir/ca.key" ]; then exit 0; fi
    openssl ecparam -name prime256v1 -genkey -noout -out "$dir/ca.key" 2>/dev/null
    openssl req -x509 -new -key "$dir/ca.key" -sha256 -days 3650 \
      -subj "/O=codeco/CN=codeco development CA" \
      -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -out "$dir/ca.crt"
    chmod 600 "$dir/ca.key"
    ;;
  issue)
    [ $# -ge 2 ] || usage
    cluster="$1"; service="$2"; shift 2
    label_ok "$cluster" || { echo "dev-ca: cluster must be a DNS label: $cluster" >&2; exit 2; }
    label_ok "$service" || { echo "dev-ca: service must be a DNS label: $service" >&2; exit 2; }
    [ -s "$dir/ca.crt" ] || { echo "dev-ca: no CA in $dir (run: $0 $dir ca)" >&2; exit 2; }
    out="$dir/$cluster"; mkdir -p "$out"
    san="URI:spiffe://codeco/cluster/$cluster/$service,DNS:localhost,IP:127.0.0.1,IP:::1"
    for extra in "$@"; do
      if [[ "$extra" =~ ^[0-9.]+$ || "$extra" == *:* ]]; then san="$san,IP:$extra"; else san="$san,DNS:$extra"; fi
    done
    ext="$(mktemp)"; trap 'rm -f "$ext" "$out/$service.csr"' EXIT
    printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' "$san" > "$ext"
    openssl ecparam -name prime256v1 -genkey -noout -out "$out/$service.key.tmp" 2>/dev/null
    openssl pkcs8 -topk8 -nocrypt -in "$out/$service.key.tmp" -out "$out/$service.key"
    rm -f "$out/$service.key.tmp"
    openssl req -new -key "$out/$service.key" -subj "/O=codeco/OU=$cluster/CN=$service" \
      -out "$out/$service.csr"
    openssl x509 -req -in "$out/$service.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
      -CAcreateserial -days 365 -sha256 -extfile "$ext" -out "$out/$service.crt" 2>/dev/null
    chmod 600 "$out/$service.key"
    ;;
  *) usage ;;
esac
