#!/usr/bin/env bash
# Applies examples/quickstart to a fresh `masterd -dev` with the local builds
# of masterd and terraform-provider-allot, installed through dev_overrides in
# a generated Terraform CLI configuration: nothing is downloaded. It then
# shows that a second plan has nothing to do, starts agentd (real tasks in
# real cgroups: run it as root), runs the example framework
# (examples/framework) with tasks that have requests and limits, shows each
# task's cgroup files while it runs and the tasks' final states (through the
# allot CLI), prints `allot status` and the web UI's URL, and stops what it
# started (on a terminal, after Enter, so that the UI can be looked at).
#
#   examples/quickstart/demo.sh           # builds into ./bin unless BIN is set
#   ALLOT_DEMO_HTTP=127.0.0.1:6050 ALLOT_DEMO_AGENT_HTTP=127.0.0.1:6051 examples/quickstart/demo.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${BIN:-$root/bin}
http=${ALLOT_DEMO_HTTP:-127.0.0.1:5050}
agent_http=${ALLOT_DEMO_AGENT_HTTP:-127.0.0.1:5051}
# Its own cgroup root, so that the demo never touches another agent's tasks.
cgroup_root=allot-demo

if [[ ! -x $bin/masterd || ! -x $bin/terraform-provider-allot || ! -x $bin/agentd || ! -x $bin/framework || ! -x $bin/allot ]]; then
  mkdir -p "$bin"
  (cd "$root" && go build -o "$bin/masterd" ./masterd && go build -o "$bin/terraform-provider-allot" . &&
    go build -o "$bin/agentd" ./agentd && go build -o "$bin/framework" ./examples/framework &&
    go build -o "$bin/allot" ./allot)
fi
if [[ $(id -u) != 0 ]]; then
  echo "demo: agentd runs tasks in cgroups it creates: run the demo as root" >&2
  exit 1
fi

work=$(mktemp -d)
masterd_pid= agent_pid= framework_pid=
# stop ends a process this script started and waits for it.
stop() {
  if [[ -n $1 ]]; then
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
  fi
}
cleanup() {
  stop "$framework_pid"
  stop "$agent_pid"   # first, so that it leaves a running master
  stop "$masterd_pid"
  rm -rf "$work"
}
trap cleanup EXIT

for addr in "$http" "$agent_http"; do
  if (exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}") 2>/dev/null; then
    echo "demo: something already listens on $addr; set ALLOT_DEMO_HTTP / ALLOT_DEMO_AGENT_HTTP to other addresses" >&2
    exit 1
  fi
done
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

echo "== agentd node-1 (cpus:4;mem:4096;disk:8192), tasks in cgroup /$cgroup_root"
"$bin/agentd" -master "$ALLOT_ADDR" -name node-1 -work-dir "$work/agent" -http "$agent_http" \
  -resources 'cpus:4;mem:4096;disk:8192' -cgroup-root "$cgroup_root" 2>"$work/agentd.log" &
agent_pid=$!
for i in $(seq 100); do
  if curl -fsS "$ALLOT_ADDR/v1/agents" 2>/dev/null | grep -q '"connected":true'; then break; fi
  if ! kill -0 "$agent_pid" 2>/dev/null || ((i == 100)); then
    echo "demo: the agent did not connect; its log:" >&2
    cat "$work/agentd.log" >&2
    exit 1
  fi
  sleep 0.1
done
curl -fsS "$ALLOT_ADDR/v1/agents"; echo

echo "== examples/framework: 3 tasks 'sleep 3', each requesting cpus:0.5;mem:64, with limits"
echo "   hello-0: cpus:1;mem:128   hello-1: mem:Infinity   hello-2: none (memory limit = request)"
"$bin/framework" -master "$ALLOT_ADDR" -name hello -role '*' -tasks 3 -command 'sleep 3' -cpus 0.5 -mem 64 \
  -limits 'cpus:1;mem:128' -limits 'mem:Infinity' -limits '' -timeout 60s >"$work/framework.out" 2>&1 &
framework_pid=$!
for i in $(seq 100); do
  n=$(curl -fsS "http://$agent_http/v1/containers" | jq '.containers | length')
  if [[ $n == 3 ]]; then break; fi
  if ((i == 100)); then echo "demo: the tasks did not start" >&2; cat "$work/framework.out" "$work/agentd.log" >&2; exit 1; fi
  sleep 0.1
done

echo "== each task's cgroup, as agentd set it (GET http://$agent_http/v1/containers)"
# cgroup v1 keeps each controller in its own hierarchy; v2 has one.
if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then
  files=(cpu.weight cpu.max memory.low memory.max)
else
  files=(cpu/cpu.shares cpu/cpu.cfs_quota_us cpu/cpu.cfs_period_us memory/memory.soft_limit_in_bytes memory/memory.limit_in_bytes)
fi
curl -fsS "http://$agent_http/v1/containers" | jq -r '.containers | sort_by(.task_id)[] | [.task_id, .cgroup, (.pids[0] // ""), .oom_score_adj, (.limits | tostring)] | @tsv' |
  while IFS=$'\t' read -r task cgroup pid oom limits; do
    echo "-- $task  cgroup $cgroup  limits $limits  pid $pid  oom_score_adj $oom (/proc/$pid/oom_score_adj: $(cat "/proc/$pid/oom_score_adj" 2>/dev/null))"
    for f in "${files[@]}"; do
      if [[ -e /sys/fs/cgroup/cgroup.controllers ]]; then path=/sys/fs/cgroup$cgroup/$f; else path=/sys/fs/cgroup/${f%%/*}$cgroup/${f#*/}; fi
      printf '   %-40s %s\n' "${f#*/}" "$(cat "$path" 2>/dev/null)"
    done
  done

if ! wait "$framework_pid"; then
  framework_pid=
  echo "demo: the framework failed; its output, the agent's log, and the end of masterd's:" >&2
  cat "$work/framework.out" "$work/agentd.log" >&2
  tail -n 20 "$work/masterd.log" >&2
  exit 1
fi
framework_pid=
echo "== the framework's view"
cat "$work/framework.out"

echo "== the agent's log"
cat "$work/agentd.log"

echo "== allot task list"
"$bin/allot" task list
echo "== allot status"
"$bin/allot" status
echo "== the web UI: http://$http/ui/"
# On a terminal the cluster stays up until Enter, so that the UI can be
# looked at; in a log the demo goes straight on and stops.
if [[ -t 0 && -t 1 ]]; then
  read -r -p "demo: open http://$http/ui/ in a browser; press Enter to stop masterd and agentd " _ || true
fi
echo "== stopping agentd and masterd"
stop "$agent_pid"; agent_pid=
stop "$masterd_pid"; masterd_pid=
# agentd keeps its root cgroup across restarts; the demo is over, so it goes.
for dir in /sys/fs/cgroup/*/"$cgroup_root" "/sys/fs/cgroup/$cgroup_root"; do
  if [[ -d $dir ]]; then rmdir "$dir" 2>/dev/null || true; fi
done
echo "demo: done"
