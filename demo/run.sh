#!/usr/bin/env bash
# The main job on an embedded default: boot a demo fleet of real systemd hosts (systemd-nspawn,
# one network namespace and sshd each), then run the unchanged llmops.sglang.deploy playbook
# against them over real SSH.
#
#   bash demo/run.sh          # every host replays a real recorded startup that became ready
#   bash demo/run.sh crash    # node1 replays a real recorded crash, node2 runs the real
#                             # `python -m sglang.launch_server` (it fails: no GPU stack)
#   bash demo/run.sh tune     # the seeds' tuning experiment with llmops.sglang.tune on node1: baseline, SM120 fusion
#                             # (regression, rolled back), NCCL_ALGO=Tree (crash, rolled back), one table
#
# Needs root on a Debian/Ubuntu machine; no GPU. Set LLMOPS_DEMO_KEEP=1 to leave the hosts up.
set -euo pipefail

scenario=${1:-ready}
case "$scenario" in
  ready | crash) ;;
  tune) nodes_override=(node1) ;;
  *) echo "usage: $0 [ready|crash|tune]" >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fleet="$repo/tests/infra/fleet.sh"
dir=${LLMOPS_FLEET_DIR:-/var/tmp/llmops-fleet}
export LLMOPS_FLEET_DIR=$dir
nodes=(node1 node2 node3)
[ -n "${nodes_override+x}" ] && nodes=("${nodes_override[@]}")

step() { printf '\n== %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
  echo "demo/run.sh boots systemd-nspawn hosts and network namespaces: run it as root" >&2
  exit 1
fi

step "Installing host tools (openssh, mmdebstrap, systemd-container, ...)"
bash "$fleet" deps

step "Preparing the controller venv (ansible-core 2.21 on Python >= 3.12)"
venv=$(bash "$repo/tests/infra/controller-venv.sh" "$dir/venv-2.21" "$repo/tests/requirements-demo.txt")
export PATH="$venv/bin:$PATH"

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

step "ansible-playbook llmops.sglang.deploy ($scenario)"
start=$(date +%s)
set +e
ansible-playbook llmops.sglang.deploy \
  -i "$dir/demo-hosts.yml" -i "$repo/demo/inventory.yml" \
  -e llmops_demo="$scenario"
rc=$?
set -e
echo
echo "deploy playbook finished in $(( $(date +%s) - start ))s with exit code $rc"
if [ "$rc" -eq 0 ]; then
  step "ansible-playbook llmops.sglang.check (read-only: patch state and readiness)"
  ansible-playbook llmops.sglang.check \
    -i "$dir/demo-hosts.yml" -i "$repo/demo/inventory.yml" -e llmops_demo="$scenario"
fi
exit $rc
