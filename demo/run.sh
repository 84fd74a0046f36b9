#!/usr/bin/env bash
# The main job on an embedded default: boot a demo fleet of real systemd hosts (systemd-nspawn,
# one network namespace and sshd each), then run the unchanged llmops.sglang.deploy playbook
# against them over real SSH.
#
#   bash demo/run.sh          # every host replays a real recorded startup that becomes ready (the first one
#                             # paced so its stages can be followed), then a second deploy of the same hosts shows
#                             # the no-change path (changed=0), then the read-only check
#   bash demo/run.sh crash    # the first host replays a real recorded CUDA OOM, the second runs the real
#                             # `python -m sglang.launch_server` (it fails: no GPU stack), the third a recorded
#                             # NCCL "unhandled system error" at start
#   bash demo/run.sh tune     # the seeds' tuning experiment with llmops.sglang.tune on the first host: baseline, SM120
#                             # fusion (regression, rolled back), NCCL_ALGO=Tree (crash, rolled back), one table
#   bash demo/run.sh fleet    # the real SGLang model gateway (smg from PyPI) on a fourth host in front of the three,
#                             # load through it, a change rolled across the workers with llmops.sglang.roll (drained,
#                             # changed, proven back in rotation), and the count of failed requests at the end
#   bash demo/run.sh guard    # the runtime guard (docs/guard.md) beside the server on the first host: a hang with
#                             # /health green restarted once, a crash loop stopped, an Xid of its GPU stopping it and
#                             # refusing the next deploy with NVIDIA's meaning, a stop during load within its bound;
#                             # one line per event, the guard's summary at the end
#
# The screen shows one line per phase with its time, and the playbooks' output through the collection's stdout
# callback llmops.sglang.brief; everything (the set-up's output, and each playbook as ansible.builtin.default prints
# it) goes to the full log, $LLMOPS_FLEET_DIR/demo-MODE.log, whose path is printed first and last.
#
# Needs root on a Debian 12 / Ubuntu 24.04 machine with network access to PyPI and the Debian archive; no GPU.
# LLMOPS_DEMO_KEEP=1 leaves the hosts up (the demo prints how to reach and stop them),
# LLMOPS_DEMO_NODES="a b c" names the hosts (LLMOPS_DEMO_GATEWAY the fleet mode's gateway host, default gateway1),
# LLMOPS_FLEET_DIR moves the state (default /var/tmp/llmops-fleet),
# LLMOPS_CONTROLLER_PYTHON picks the controller's interpreter (default: the newest Python >= 3.12, else python3).
set -euo pipefail

scenario=${1:-ready}
case "$scenario" in
  ready | crash | tune | fleet | guard) ;;
  *) echo "demo/run.sh: unknown mode '$scenario'; usage: $0 [ready|crash|tune|fleet|guard]" >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fleet="$repo/tests/infra/fleet.sh"
default_dir=/var/tmp/llmops-fleet
dir=${LLMOPS_FLEET_DIR:-$default_dir}
export LLMOPS_FLEET_DIR=$dir
# shellcheck disable=SC2206  # host names are words
nodes=(${LLMOPS_DEMO_NODES:-node1 node2 node3})
if [ "${#nodes[@]}" -eq 0 ]; then
  echo "demo/run.sh: LLMOPS_DEMO_NODES names no host; give one name per host, e.g. LLMOPS_DEMO_NODES=\"a b c\"" >&2
  exit 2
fi
# the tune and guard demos run on the first host alone; the fleet demo adds the gateway's host
[ "$scenario" = tune ] || [ "$scenario" = guard ] && nodes=("${nodes[0]}")
workers=("${nodes[@]}")
gateway=${LLMOPS_DEMO_GATEWAY:-gateway1}
[ "$scenario" = fleet ] && nodes+=("$gateway")

if [ "$(id -u)" -ne 0 ]; then
  echo "demo/run.sh boots systemd-nspawn hosts and network namespaces: run it as root" >&2
  exit 1
fi

mkdir -p "$dir"
log="$dir/demo-$scenario.log"
: >"$log"
t_demo=$(date +%s.%N)
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
echo "llmops.sglang demo ($scenario) on ${nodes[*]}; the full log: $log"

# phase TITLE CMD...: one line on the screen (the title, then what the command noted in $note and its time), the
# command's output in the full log; on a failure the log's last lines and the exit code.
phase() {
  local title=$1 t0 rc=0
  shift
  note=
  t0=$(date +%s.%N)
  printf '== %s ... ' "$title"
  printf '\n== %s\n' "$title" >>"$log"
  "$@" >>"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then
    printf 'failed (exit code %d) after %s s; the last lines of %s:\n' "$rc" "$(seconds_since "$t0")" "$log"
    tail -n 20 "$log" | sed 's/^/  /'
    exit "$rc"
  fi
  printf '%s%s s\n' "${note:+$note, }" "$(seconds_since "$t0")"
}

# The hosts' state lives in $dir; a command to reach them names it when it is not the default.
# shellcheck disable=SC2317  # runs through phase (or the EXIT trap)
fleet_cmd() {
  local where=tests/infra/fleet.sh
  [ "$(pwd -P)" = "$(cd "$repo" && pwd -P)" ] || where="$repo/tests/infra/fleet.sh"
  if [ "$dir" = "$default_dir" ]; then echo "bash $where"; else echo "LLMOPS_FLEET_DIR=$dir bash $where"; fi
}

# shellcheck disable=SC2317  # runs through phase (or the EXIT trap)
controller_venv() {
  local venv
  venv=$(bash "$repo/tests/infra/controller-venv.sh" "$dir/controller-venv" "$repo/tests/requirements-demo.txt") || return
  "$venv/bin/ansible" --version || return
  # "ansible [core 2.21.5]" -> "ansible-core 2.21.5"; sed reads it all: head would break the pipe (set -o pipefail)
  note=$("$venv/bin/ansible" --version | sed -n '1s/^ansible \[core \(.*\)\]$/ansible-core \1/p')
}

# The set-up below is shared by every demo run on this state directory: one run at a time does it (two demo modes can
# run at once, with different host names).
exec 7>"$dir/.demo-setup.lock"
flock 7
phase "Installing host tools (openssh, mmdebstrap, systemd-container, ...)" bash "$fleet" deps
phase "Preparing the controller venv (ansible-core 2.21 on Python >= 3.12; 2.19 on Debian 12's Python 3.11)" controller_venv
venv="$dir/controller-venv"
export PATH="$venv/bin:$PATH"
# fleet.sh's pip download runs with the venv's pip (a stock Debian python3 has none)
export LLMOPS_FLEET_PYTHON="$venv/bin/python"

mkdir -p "$dir/collections/ansible_collections/llmops"
ln -sfn "$repo" "$dir/collections/ansible_collections/llmops/sglang"
export ANSIBLE_COLLECTIONS_PATH="$dir/collections"
export ANSIBLE_HOST_KEY_CHECKING=False
export ANSIBLE_SSH_CONTROL_PATH_DIR="$dir/cp"
export ANSIBLE_PIPELINING=True
export ANSIBLE_SSH_RETRIES=3
export ANSIBLE_FORKS=10
# The collection's own screen output (plugins/callback/brief.py): progress, one line per host per event, the table; the
# rest (task headers, every result, as ansible.builtin.default prints them in YAML) goes to the full log.
export ANSIBLE_STDOUT_CALLBACK=llmops.sglang.brief
export ANSIBLE_CALLBACK_RESULT_FORMAT=yaml
export ANSIBLE_LOG_PATH="$log"
# the log also keeps the lines that are -v on the screen (a host's passed pre-flight, its SM120 patch state, ...)
export ANSIBLE_LOG_VERBOSITY=1
# README's ansible.cfg: the controller looks for the hosts' results every 10 ms, not every 1 ms (less controller CPU
# while a task waits; the key has no environment variable). A configuration of the user's own (ANSIBLE_CONFIG) wins.
if [[ -z ${ANSIBLE_CONFIG:-} ]]; then
  printf '# written by demo/run.sh\n[defaults]\ninternal_poll_interval = 0.01\n' >"$dir/ansible.cfg"
  export ANSIBLE_CONFIG="$dir/ansible.cfg"
fi

export LLMOPS_DEMO_WHEELHOUSE="$dir/wheelhouse"
phase "Downloading the SGLang release for the hosts' wheelhouse (they have no route to PyPI)" \
  bash "$fleet" wheelhouse "$LLMOPS_DEMO_WHEELHOUSE" sglang==0.5.9
if [ "$scenario" = fleet ]; then
  export LLMOPS_DEMO_GATEWAY_WHEELHOUSE="$dir/gateway-wheelhouse"
  phase "Downloading the gateway (smg) and its dependencies for the hosts' Python 3.11" \
    bash "$fleet" wheelhouse "$LLMOPS_DEMO_GATEWAY_WHEELHOUSE" --only-binary=:all: --platform manylinux2014_x86_64 \
    --python-version 3.11 smg==1.13.0 setproctitle==1.3.8 grpcio==1.85.3 grpcio-health-checking==1.85.1 \
    protobuf==7.36.2 pyyaml==6.0.4 typing_extensions==4.16.0
fi
phase "Building the host root file system (cached after the first run)" bash "$fleet" rootfs
flock -u 7 && exec 7>&-

rc=0
# one inventory per mode: two modes can run at once on this state directory
inventory="$dir/demo-hosts-$scenario.yml"
# shellcheck disable=SC2317  # runs from the EXIT trap
cleanup() {
  local status=$?
  if [ "${LLMOPS_DEMO_KEEP:-0}" = 1 ]; then
    echo "== The hosts stay up (LLMOPS_DEMO_KEEP=1). Reach one: $(fleet_cmd) ssh ${nodes[0]} systemctl status sglang"
    echo "   Stop them: $(fleet_cmd) down ${nodes[*]}"
  else
    printf '== Stopping the demo hosts ... '
    local t0
    t0=$(date +%s.%N)
    bash "$fleet" down "${nodes[@]}" >>"$log" 2>&1 || true
    printf '%s s\n' "$(seconds_since "$t0")"
  fi
  echo "demo ($scenario) finished in $(seconds_since "$t_demo") s with exit code $status; the full log: $log"
}
trap cleanup EXIT

# shellcheck disable=SC2317  # runs through phase (or the EXIT trap)
# (set -e does not reach into a function that phase runs behind ||: every step returns on failure)
boot() {
  bash "$fleet" down "${nodes[@]}" || true
  bash "$fleet" up "${nodes[@]}" || return
  bash "$fleet" inventory --group sglang "$inventory" "${workers[@]}" || return
  [ "$scenario" != fleet ] || bash "$fleet" inventory --group sglang_gateway "$dir/demo-gateway-$scenario.yml" "$gateway"
}
phase "Booting ${#nodes[@]} systemd-nspawn host(s): ${nodes[*]}" boot

# playbook LABEL TITLE NAME ARGS...: run one playbook of the collection against the demo hosts; its time and exit code
# after, under LABEL.
playbook() {
  local label=$1 title=$2 name=$3 t0 status=0
  shift 3
  echo "== $title"
  printf '\n== %s\n' "$title" >>"$log"
  t0=$(date +%s.%N)
  ansible-playbook "$name" -i "$inventory" -i "$repo/demo/inventory.yml" "$@" || status=$?
  echo "== $label finished in $(seconds_since "$t0") s with exit code $status"
  return "$status"
}

if [ "$scenario" = fleet ]; then
  # the gateway and its workers: the hosts' inventories and demo/fleet.yml instead of demo/inventory.yml
  fleet_playbook() {
    local label=$1 title=$2 name=$3 t0 status=0
    shift 3
    echo "== $title"
    printf '\n== %s\n' "$title" >>"$log"
    t0=$(date +%s.%N)
    ansible-playbook "$name" -i "$inventory" -i "$dir/demo-gateway-$scenario.yml" -i "$repo/demo/fleet.yml" "$@" || status=$?
    echo "== $label finished in $(seconds_since "$t0") s with exit code $status"
    return "$status"
  }
  fleet_playbook deploy "ansible-playbook llmops.sglang.deploy: three SGLang workers (the stand-in), metrics on" \
    llmops.sglang.deploy || exit $?
  fleet_playbook gateway "ansible-playbook llmops.sglang.gateway: the SGLang model gateway in front of them" \
    llmops.sglang.gateway || exit $?
  load="$dir/demo-fleet-load.jsonl"
  rm -f "$load" "$load.stop"
  echo "== Load through the gateway: 6 streams of 64 tokens at a time, from the test network's hub namespace"
  PYTHONPATH="$dir/collections" ip netns exec llmops-hub "$venv/bin/python" "$repo/benchmarks/rolling_change.py" load \
    --url "http://$(cat "$dir/nodes/$gateway.addr"):30080" --out "$load" --stop-file "$load.stop" --concurrency 6 \
    --max-tokens 64 --max-load-seconds 1800 >>"$log" 2>&1 &
  load_pid=$!
  sleep 10
  fleet_playbook roll "ansible-playbook llmops.sglang.roll: a changed environment variable rolled across the workers" \
    llmops.sglang.roll -e llmops_demo_revision=2 || rc=$?
  sleep 5
  touch "$load.stop"
  wait "$load_pid" || true
  "$venv/bin/python" "$repo/benchmarks/rolling_change.py" summary "$load" || { [ "$rc" -ne 0 ] || rc=1; }
  exit "$rc"
fi

if [ "$scenario" = tune ]; then
  playbook tune "ansible-playbook llmops.sglang.tune (variants: demo/tune-variants.yml)" llmops.sglang.tune \
    -e llmops_demo=tune -e @"$repo/demo/tune-variants.yml" || rc=$?
  exit "$rc"
fi

if [ "$scenario" = guard ]; then
  # shellcheck disable=SC2317  # runs through phase
  guard_host() {
    ansible-playbook "$repo/demo/guard-host.yml" -i "$inventory" -i "$repo/demo/inventory.yml" -e llmops_demo=guard
  }
  phase "Giving ${nodes[0]} recorded GPUs (8x H100, an Xid 119 of GPU 4) and the kernel log's stand-in" guard_host
  playbook deploy "ansible-playbook llmops.sglang.deploy (guard): the server, and the runtime guard beside it" \
    llmops.sglang.deploy -e llmops_demo=guard || exit $?
  playbook faults "ansible-playbook demo/guard.yml: a hang, a crash loop, a stop while loading, an Xid; one line each" \
    "$repo/demo/guard.yml" -e llmops_demo=guard || exit $?
  refused=0
  playbook "deploy after the Xid" "ansible-playbook llmops.sglang.deploy again: the pre-flight reads the Xid since boot" \
    llmops.sglang.deploy -e llmops_demo=guard || refused=$?
  if [ "$refused" -eq 0 ]; then
    echo "(the deploy after the Xid started the server: its pre-flight should have refused the start)"
    exit 1
  fi
  echo "(expected: the start was refused, the server was not touched)"
  playbook summary "ansible-playbook demo/guard.yml --tags summary: what the guard did in all" \
    "$repo/demo/guard.yml" -e llmops_demo=guard --tags summary || rc=$?
  exit "$rc"
fi

title="ansible-playbook llmops.sglang.deploy ($scenario): install, configure, start, follow each start until it serves"
if [ "$scenario" = crash ]; then
  # the rows of the table are data: select the crashed hosts and their signature with JMESPath
  playbook deploy "$title" llmops.sglang.deploy -e llmops_demo=crash \
    -e "sglang_report_query=[?status=='crashed'].{host:host,signature:signature}" || rc=$?
  # ansible-playbook's 2 is the hosts failing, as they should; anything else (99: interrupted with Ctrl-C) is not
  [ "$rc" -eq 2 ] && echo "(expected: the crash demo's hosts fail; the table says where and why)"
  exit "$rc"
fi
playbook "first deploy" "$title" llmops.sglang.deploy -e llmops_demo=ready || rc=$?
if [ "$rc" -eq 0 ]; then
  playbook "second deploy" "ansible-playbook llmops.sglang.deploy again: nothing changed, so each host is one check (changed=0)" \
    llmops.sglang.deploy -e llmops_demo=ready || rc=$?
fi
if [ "$rc" -eq 0 ]; then
  playbook check "ansible-playbook llmops.sglang.check (read-only: driver, patch state and readiness)" \
    llmops.sglang.check -e llmops_demo=ready || rc=$?
fi
exit "$rc"
