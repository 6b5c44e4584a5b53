#!/usr/bin/env bash
# Applies examples/quickstart to a fresh `masterd -dev` with the local builds
# of masterd and terraform-provider-allot, installed through dev_overrides in
# a generated Terraform CLI configuration: nothing is downloaded. It then
# shows that a second plan has nothing to do, starts an agent (simagent, a
# simulated one, until agentd exists), runs the example framework
# (examples/framework) on it, shows the tasks, and stops what it started.
#
#   examples/quickstart/demo.sh           # builds into ./bin unless BIN is set
#   ALLOT_DEMO_HTTP=127.0.0.1:6050 examples/quickstart/demo.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${BIN:-$root/bin}
http=${ALLOT_DEMO_HTTP:-127.0.0.1:5050}

if [[ ! -x $bin/masterd || ! -x $bin/terraform-provider-allot || ! -x $bin/simagent || ! -x $bin/framework ]]; then
  mkdir -p "$bin"
  (cd "$root" && go build -o "$bin/masterd" ./masterd && go build -o "$bin/terraform-provider-allot" . &&
    go build -o "$bin/simagent" ./tools/simagent && go build -o "$bin/framework" ./examples/framework)
fi

work=$(mktemp -d)
masterd_pid= agent_pid=
# stop ends a process this script started and waits for it.
stop() {
  if [[ -n $1 ]]; then
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
  fi
}
cleanup() {
  stop "$agent_pid"   # first, so that it leaves a running master
  stop "$masterd_pid"
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
# Colours only on a terminal: the demo's output is often read in a log.
tf_color=()
[[ -t 1 ]] || tf_color=(-no-color)

echo "== masterd -dev on $ALLOT_ADDR; terraform apply examples/quickstart"
terraform -chdir="$work" apply -auto-approve -input=false "${tf_color[@]}"
echo "== terraform plan: nothing to change"
terraform -chdir="$work" plan -input=false -detailed-exitcode "${tf_color[@]}"
echo "== the cluster now holds:"
curl -fsS "$ALLOT_ADDR/v1/quotas"; echo
curl -fsS "$ALLOT_ADDR/v1/ratelimits"; echo

echo "== an agent: simagent node-1 (cpus:4;mem:4096;disk:8192, tasks simulated)"
"$bin/simagent" -master "$ALLOT_ADDR" -name node-1 -resources 'cpus:4;mem:4096;disk:8192' 2>"$work/simagent.log" &
agent_pid=$!
for i in $(seq 100); do
  if curl -fsS "$ALLOT_ADDR/v1/agents" 2>/dev/null | grep -q '"connected":true'; then break; fi
  if ! kill -0 "$agent_pid" 2>/dev/null || ((i == 100)); then
    echo "demo: the agent did not connect; its log:" >&2
    cat "$work/simagent.log" >&2
    exit 1
  fi
  sleep 0.1
done
curl -fsS "$ALLOT_ADDR/v1/agents"; echo

echo "== examples/framework: 3 tasks 'sleep 1' on role '*'"
if ! "$bin/framework" -master "$ALLOT_ADDR" -name hello -role '*' -tasks 3 -command 'sleep 1' -cpus 0.5 -mem 64 -timeout 60s; then
  echo "demo: the framework failed; the agent's log, and the end of masterd's:" >&2
  cat "$work/simagent.log" >&2
  tail -n 20 "$work/masterd.log" >&2
  exit 1
fi

echo "== GET /v1/tasks"
if command -v jq >/dev/null && command -v column >/dev/null; then
  { printf 'TASK\tSTATE\tROLE\tRESOURCES\tAGENT\n'
    curl -fsS "$ALLOT_ADDR/v1/tasks" |
      jq -r '.tasks[] | [.task_id, .state, .role, (.resources | to_entries | map("\(.key):\(.value)") | join(";")), .agent_id] | @tsv'
  } | column -t -s $'\t'
else
  curl -fsS "$ALLOT_ADDR/v1/tasks"; echo
fi

echo "== stopping the agent and masterd; the agent's log:"
stop "$agent_pid"; agent_pid=
cat "$work/simagent.log"
stop "$masterd_pid"; masterd_pid=
echo "demo: done"
