#!/usr/bin/env bash
# Applies examples/quickstart to a fresh `masterd -dev` with the local builds
# of masterd and terraform-provider-allot, installed through dev_overrides in
# a generated Terraform CLI configuration: nothing is downloaded. It then
# shows that a second plan has nothing to do, and stops the server.
#
#   examples/quickstart/demo.sh           # builds into ./bin unless BIN is set
#   ALLOT_DEMO_HTTP=127.0.0.1:6050 examples/quickstart/demo.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${BIN:-$root/bin}
http=${ALLOT_DEMO_HTTP:-127.0.0.1:5050}

if [[ ! -x $bin/masterd || ! -x $bin/terraform-provider-allot ]]; then
  mkdir -p "$bin"
  (cd "$root" && go build -o "$bin/masterd" ./masterd && go build -o "$bin/terraform-provider-allot" .)
fi

work=$(mktemp -d)
masterd_pid=
cleanup() {
  if [[ -n $masterd_pid ]]; then
    kill "$masterd_pid" 2>/dev/null || true
    wait "$masterd_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

if (exec 3<>"/dev/tcp/${http%:*}/${http##*:}") 2>/dev/null; then
  echo "demo: something already listens on $http; set ALLOT_DEMO_HTTP to another address" >&2
  exit 1
fi
"$bin/masterd" -dev -http "$http" >"$work/masterd.log" 2>&1 &
masterd_pid=$!
for _ in $(seq 100); do
  if curl -fsS "http://$http/v1/cluster" 2>/dev/null | grep -q '"leader":{'; then break; fi
  kill -0 "$masterd_pid" 2>/dev/null || { cat "$work/masterd.log" >&2; exit 1; }
  sleep 0.1
done

cat >"$work/dev.tfrc" <<EOT
provider_installation {
  dev_overrides {
    "allot/allot" = "$bin"
  }
  direct {}
}
EOT
# A copy, so that the state stays out of the repository.
cp "$root/examples/quickstart/main.tf" "$work/"
export TF_CLI_CONFIG_FILE=$work/dev.tfrc TF_IN_AUTOMATION=1 CHECKPOINT_DISABLE=1
export ALLOT_ADDR=http://$http

echo "== masterd -dev on $ALLOT_ADDR; terraform apply examples/quickstart"
terraform -chdir="$work" apply -auto-approve -input=false
echo "== terraform plan: nothing to change"
terraform -chdir="$work" plan -input=false -detailed-exitcode
echo "== the cluster now holds:"
curl -fsS "$ALLOT_ADDR/v1/quotas"; echo
curl -fsS "$ALLOT_ADDR/v1/ratelimits"; echo
