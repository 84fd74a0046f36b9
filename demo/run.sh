#!/usr/bin/env bash
# The main job on an embedded default: boot a demo fleet of real systemd hosts (systemd-nspawn,
# one network namespace and sshd each), then run the unchanged llmops.sglang.deploy playbook
# against them over real SSH.
#
#   bash demo/run.sh          # every host replays a real recorded startup that becomes ready (the first one
#                             # paced so its stages can be followed), then a second deploy of the same hosts shows
#                             # the no-change path (changed=0), then the read-only check
#   bash demo/run.sh crash    # the first host replays a real recorded CUDA OOM, the second runs the real
#                             # `python -m sglang.launch_server` (it fails: no GPU stack), the third an NCCL crash
#   bash demo/run.sh tune     # the seeds' tuning experiment with llmops.sglang.tune on the first host: baseline, SM120
#                             # fusion (regression, rolled back), NCCL_ALGO=Tree (crash, rolled back), one table
#
# Needs root on a Debian 12 / Ubuntu 24.04 machine with network access to PyPI and the Debian archive; no GPU.
# LLMOPS_DEMO_KEEP=1 leaves the hosts up (fleet.sh ssh node1 ...; tests/infra/fleet.sh down node1 node2 node3),
# LLMOPS_DEMO_NODES="a b c" names the hosts, LLMOPS_FLEET_DIR moves the state (default /var/tmp/llmops-fleet),
# LLMOPS_CONTROLLER_PYTHON picks the controller's interpreter (default: the newest Python >= 3.12, else python3).
set -euo pipefail

scenario=${1:-ready}
case "$scenario" in
  ready | crash) ;;
  tune) ;;
  *) echo "demo/run.sh: unknown mode '$scenario'; usage: $0 [ready|crash|tune]" >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fleet="$repo/tests/infra/fleet.sh"
dir=${LLMOPS_FLEET_DIR:-/var/tmp/llmops-fleet}
export LLMOPS_FLEET_DIR=$dir
# shellcheck disable=SC2206  # host names are words
nodes=(${LLMOPS_DEMO_NODES:-node1 node2 node3})
# the tune demo runs on the first host alone
[ "$scenario" = tune ] && nodes=("${nodes[0]}")

step() { printf '\n== %s\n' "$*"; }
seconds_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

if [ "$(id -u)" -ne 0 ]; then
  echo "demo/run.sh boots systemd-nspawn hosts and network namespaces: run it as root" >&2
  exit 1
fi

step "Installing host tools (openssh, mmdebstrap, systemd-container, ...)"
bash "$fleet" deps

step "Preparing the controller venv (ansible-core 2.21 on Python >= 3.12; 2.19 on Debian 12's Python 3.11)"
venv=$(bash "$repo/tests/infra/controller-venv.sh" "$dir/controller-venv" "$repo/tests/requirements-demo.txt")
export PATH="$venv/bin:$PATH"
# fleet.sh's pip download runs with the venv's pip (a stock Debian python3 has none)
export LLMOPS_FLEET_PYTHON="$venv/bin/python"
"$venv/bin/ansible" --version | sed -n 1p  # sed reads it all: head would break the pipe (set -o pipefail)

mkdir -p "$dir/collections/ansible_collections/llmops"
ln -sfn "$repo" "$dir/collections/ansible_collections/llmops/sglang"
export ANSIBLE_COLLECTIONS_PATH="$dir/collections"
export ANSIBLE_HOST_KEY_CHECKING=False
export ANSIBLE_SSH_CONTROL_PATH_DIR="$dir/cp"
export ANSIBLE_PIPELINING=True
export ANSIBLE_SSH_RETRIES=3
export ANSIBLE_FORKS=10
export ANSIBLE_STDOUT_CALLBACK=ansible.builtin.default
export ANSIBLE_CALLBACK_RESULT_FORMAT=yaml

step "Downloading the SGLang release for the hosts' wheelhouse (they have no route to PyPI)"
export LLMOPS_DEMO_WHEELHOUSE="$dir/wheelhouse"
bash "$fleet" wheelhouse "$LLMOPS_DEMO_WHEELHOUSE" sglang==0.5.9

step "Building the host root file system (cached after the first run)"
bash "$fleet" rootfs

# shellcheck disable=SC2317  # runs from the EXIT trap
cleanup() {
  if [ "${LLMOPS_DEMO_KEEP:-0}" != 1 ]; then
    step "Stopping the demo hosts"
    bash "$fleet" down "${nodes[@]}" || true
  fi
}
trap cleanup EXIT

step "Booting ${#nodes[@]} systemd-nspawn hosts"
bash "$fleet" down "${nodes[@]}" >/dev/null 2>&1 || true
bash "$fleet" up "${nodes[@]}"
bash "$fleet" inventory --group sglang "$dir/demo-hosts.yml" "${nodes[@]}"

if [ "$scenario" = tune ]; then
  step "ansible-playbook llmops.sglang.tune (variants: demo/tune-variants.yml)"
  start=$(date +%s)
  set +e
  ansible-playbook llmops.sglang.tune \
    -i "$dir/demo-hosts.yml" -i "$repo/demo/inventory.yml" \
    -e llmops_demo=tune -e @"$repo/demo/tune-variants.yml"
  rc=$?
  set -e
  echo
  echo "tune playbook finished in $(( $(date +%s) - start ))s with exit code $rc"
  exit $rc
fi

deploy() {
  ansible-playbook llmops.sglang.deploy -i "$dir/demo-hosts.yml" -i "$repo/demo/inventory.yml" -e llmops_demo="$scenario" "$@"
}

step "ansible-playbook llmops.sglang.deploy ($scenario): install, configure, start, follow each start until it serves"
start=$(date +%s.%N)
set +e
if [ "$scenario" = crash ]; then
  # the rows of the table are data: select the crashed hosts and their signature with JMESPath
  deploy -e "sglang_report_query=[?status=='crashed'].{host:host,signature:signature}"
else
  deploy
fi
rc=$?
set -e
echo
echo "deploy playbook finished in $(seconds_since "$start")s with exit code $rc"
if [ "$scenario" = crash ] && [ "$rc" -ne 0 ]; then
  echo "(expected: the crash demo's hosts fail, and the table above says where and why)"
fi
if [ "$rc" -eq 0 ]; then
  step "ansible-playbook llmops.sglang.deploy again: nothing changed, so each host is one check (changed=0)"
  start=$(date +%s.%N)
  deploy
  echo
  echo "second deploy finished in $(seconds_since "$start")s"
  step "ansible-playbook llmops.sglang.check (read-only: driver, patch state and readiness)"
  ansible-playbook llmops.sglang.check \
    -i "$dir/demo-hosts.yml" -i "$repo/demo/inventory.yml" -e llmops_demo="$scenario"
fi
exit $rc
