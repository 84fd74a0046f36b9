#!/usr/bin/env bash
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The whole test suite of llmops.sglang, from a fresh clone on a fresh machine (root, Debian 12,
# network access to PyPI and the Debian archive, no GPU). CI runs exactly this (.ci/run).
#
#   bash tests/run-all.sh
#
# It installs the system packages it needs, creates its venvs under ${LLMOPS_CI_DIR:-/var/tmp/llmops-ci}
# (ansible-core 2.21 on Python 3.12 = main line; ansible-core 2.20 on Python 3.12 = paramiko line),
# copies the checkout to $LLMOPS_CI_DIR/src/ansible_collections/llmops/sglang (and to src-static/... for the static
# steps) and runs three lanes at once, each lane's steps in order:
#   S: ansible-test sanity (3.12, all tests; then compile/import on every other module Python found),
#      ansible-test units, ansible-lint, antsibull-docs lint-collection-docs;
#   A: molecule test --all (OpenSSH), molecule test -s default over paramiko (ansible-core 2.20);
#   B: pytest over tests/integration (tests/system too if present);
# and beside them, README's demo in a fresh stock Debian 12 chroot
# (tests/infra/stock-debian.sh, when time allows). Each step's output is printed when its lane is done.
# Every step runs even if an earlier one failed; the exit code is non-zero if any failed.
# On exit every test host, namespace, cgroup and process it started is removed (fleet.sh down --all).
#
# Tool state (ansible-test venvs, molecule) lives in $LLMOPS_CI_DIR/home, used as HOME for the steps.
# Environment: LLMOPS_CI_DIR (work dir), LLMOPS_FLEET_DIR (test-host state, default $LLMOPS_CI_DIR/fleet),
# LLMOPS_CI_SKIP="step step" (skip named steps), LLMOPS_PYTEST_WORKERS (pytest-xdist workers, default 3; --dist loadgroup: a file marked xdist_group runs on one worker, docs/testing.md),
# LLMOPS_PYTEST_ARGS (extra pytest arguments).
# Test hosts already up when it starts (e.g. a demo on a developer machine) are left running.

set -uo pipefail

# The whole script is one compound command, so bash parses it completely before running it:
# editing this file while a run is in progress cannot change that run.
{
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CI_DIR=${LLMOPS_CI_DIR:-/var/tmp/llmops-ci}
COLL_ROOT=$CI_DIR/src
COLL=$COLL_ROOT/ansible_collections/llmops/sglang
# the static steps (sanity, units, lints) run at the same time as the test-host steps, in a copy of their own: what
# pytest and molecule write into their copy (unpacked recordings, ansible-compat's .ansible/) cannot reach them
STATIC_ROOT=$CI_DIR/src-static
STATIC_COLL=$STATIC_ROOT/ansible_collections/llmops/sglang
VENV=$CI_DIR/venv-2.21
VENV20=$CI_DIR/venv-2.20
# its own test-host state directory: node names, namespaces and cgroups cannot collide with a
# developer's demo or molecule run in the default /var/tmp/llmops-fleet
export LLMOPS_FLEET_DIR=${LLMOPS_FLEET_DIR:-$CI_DIR/fleet}
export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 LANG=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1
export ANSIBLE_LINT_SKIP_VERSION_CHECK=1 ANSIBLE_FORCE_COLOR=0 PY_COLORS=0 NO_COLOR=1
T_START=$(date +%s.%N)
# the machine's CPU time so far (busy, all): the summary says how much of the run's CPU the machine was busy
cpu_ticks() { awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
read -r CPU_BUSY0 CPU_ALL0 < <(cpu_ticks)

declare -a STEP_NAMES=() STEP_RESULTS=() STEP_TIMES=()
mkdir -p "$CI_DIR"
FAILED=0

say() { printf '\n=== %s\n' "$*"; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

# Every step runs in a cgroup of its own (cgroup v2) under $STEP_CGROUPS, so whatever a step leaves running is found
# at the end, named with its step, however it was started (tests/infra/suite_check.py).
STEP_CGROUPS=
for cg_root in /sys/fs/cgroup/unified /sys/fs/cgroup; do
    if [[ -f $cg_root/cgroup.procs && -f $cg_root/cgroup.stat && -w $cg_root ]]; then
        STEP_CGROUPS=$cg_root/llmops-ci-$$
        break
    fi
done
# cg_enter NAME: move the calling (sub)shell into the step's cgroup; a no-op without cgroup v2
cg_enter() {
    [[ -n $STEP_CGROUPS ]] || return 0
    mkdir -p "$STEP_CGROUPS/$1" && echo "$BASHPID" >"$STEP_CGROUPS/$1/cgroup.procs"
}

# A step function that decides not to run writes why to $SKIP_FILE and returns SKIPPED: the step is reported as
# skipped, with that reason, in its own line, the summary and the last line; never as passed.
SKIPPED=77
SKIP_FILE=$CI_DIR/skip-reason
declare -a STEP_NOTES=()

# record_step NAME RESULT SECONDS [NOTE]
record_step() {
    STEP_NAMES+=("$1"); STEP_RESULTS+=("$2"); STEP_TIMES+=("$3"); STEP_NOTES+=("${4:-}")
}

# run_step NAME CMD...: run in the collection copy and in the step's cgroup, time it, record the result, never abort
run_step() {
    local name=$1 t0 rc reason
    shift
    if [[ " ${LLMOPS_CI_SKIP:-} " == *" $name "* ]]; then
        record_step "$name" skipped 0.0 "LLMOPS_CI_SKIP"
        say "$name: skipped (LLMOPS_CI_SKIP)"
        return 0
    fi
    say "$name: $*"
    rm -f "$SKIP_FILE"
    t0=$(date +%s.%N)
    (cg_enter "$name"; cd "$COLL" && "$@")
    rc=$?
    if ((rc == SKIPPED)) && [[ -s $SKIP_FILE ]]; then
        reason=$(head -n 1 "$SKIP_FILE")
        record_step "$name" skipped "$(elapsed "$t0")" "$reason"
        say "$name: skipped: $reason"
        return 0
    fi
    if ((rc == 0)); then
        record_step "$name" passed "$(elapsed "$t0")"
    else
        record_step "$name" "FAILED rc=$rc" "$(elapsed "$t0")"
        FAILED=1
    fi
    say "$name: ${STEP_RESULTS[-1]} in ${STEP_TIMES[-1]} s"
    return 0
}

# The steps run in LANES at the same time: each lane runs its steps one after the other in the background, each step
# in its own cgroup (in the lane's copy of the checkout, LANE_DIR, default $COLL) with its output in $LANES/<step>.log;
# when a lane is done, its steps' logs are printed in step order and the results recorded as run_step records them.
LANES=$CI_DIR/lanes
# lane_step NAME CMD...: one step of a lane (in the lane's subshell); writes "RESULT|SECONDS|NOTE" to $LANES/NAME.result
lane_step() {
    local name=$1 t0 rc
    shift
    if [[ " ${LLMOPS_CI_SKIP:-} " == *" $name "* ]]; then
        echo "skipped|0.0|LLMOPS_CI_SKIP" >"$LANES/$name.result"
        return 0
    fi
    t0=$(date +%s.%N)
    echo "+ $*" >"$LANES/$name.log"
    # shellcheck disable=SC2030  # the step's own SKIP_FILE, read by its step function in this subshell
    (SKIP_FILE=$LANES/$name.skip; cg_enter "$name"; cd "${LANE_DIR:-$COLL}" && "$@") >>"$LANES/$name.log" 2>&1
    rc=$?
    if ((rc == SKIPPED)) && [[ -s $LANES/$name.skip ]]; then
        echo "skipped|$(elapsed "$t0")|$(head -n 1 "$LANES/$name.skip")" >"$LANES/$name.result"
    elif ((rc == 0)); then
        echo "passed|$(elapsed "$t0")|" >"$LANES/$name.result"
    else
        echo "FAILED rc=$rc|$(elapsed "$t0")|" >"$LANES/$name.result"
    fi
}
# lane_record NAME: print a finished lane step's output and record its result
lane_record() {
    local name=$1 result secs note
    IFS='|' read -r result secs note <"$LANES/$name.result" 2>/dev/null || { result="FAILED rc=?"; secs=0.0; note="no result"; }
    say "$name (lane): ${result} in ${secs} s${note:+: $note}"
    [[ -f $LANES/$name.log ]] && cat "$LANES/$name.log"
    record_step "$name" "$result" "$secs" "$note"
    [[ $result == passed || $result == skipped ]] || FAILED=1
    return 0
}

# hosts_left_by STEP: test hosts up now that were not when the run began are recorded as left by STEP, then stopped
hosts_left_by() {
    local n left=()
    for n in $(fleet_nodes); do [[ " $PRE_NODES " == *" $n "* ]] || left+=("$n"); done
    ((${#left[@]})) || return 0
    for n in "${left[@]}"; do echo "test host $n, started by step $1" >>"$CI_DIR/leftovers.txt"; done
    bash "$REPO/tests/infra/fleet.sh" down "${left[@]}" >/dev/null 2>&1 || true
}

fleet_nodes() {
    local f
    for f in "$LLMOPS_FLEET_DIR"/nodes/*.pid; do [[ -f $f ]] && basename "${f%.pid}"; done
    return 0
}
# Test hosts that were already up before this run (someone's demo on a developer machine) are left
# alone; on a CI machine there are none and everything is torn down with "down --all".
PRE_NODES=$(fleet_nodes | tr '\n' ' ')
# shellcheck disable=SC2317  # runs from the EXIT trap
fleet_cleanup() {
    local new=() n
    if [[ -z ${PRE_NODES// /} ]]; then
        bash "$REPO/tests/infra/fleet.sh" down --all >/dev/null 2>&1 || true
        return 0
    fi
    for n in $(fleet_nodes); do [[ " $PRE_NODES " == *" $n "* ]] || new+=("$n"); done
    ((${#new[@]})) && { bash "$REPO/tests/infra/fleet.sh" down "${new[@]}" >/dev/null 2>&1 || true; }
    return 0
}

# shellcheck disable=SC2317  # runs from the EXIT trap
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    # the lanes first: a lane's subshell left running would start its next step after the cgroups below are swept
    local pids
    pids=$(jobs -p)
    # shellcheck disable=SC2086  # one job pid per word
    [[ -n $pids ]] && kill $pids 2>/dev/null
    fleet_cleanup
    # what a step left in its cgroup (named by the leftovers step when the run got that far) goes too
    if [[ -n $STEP_CGROUPS && -d $STEP_CGROUPS ]]; then
        python3 "$REPO/tests/infra/suite_check.py" kill "$CI_DIR/before.json" --cgroups "$STEP_CGROUPS" >/dev/null 2>&1
        find "$STEP_CGROUPS" -depth -type d -exec rmdir {} + 2>/dev/null
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [[ $(id -u) -ne 0 ]]; then
    echo "tests/run-all.sh boots systemd-nspawn test hosts and network namespaces: run it as root" >&2
    exit 1
fi

# what the machine has before the suite: the last step reports what is there after it that was not
rm -f "$CI_DIR/leftovers.txt" "$LLMOPS_FLEET_DIR/host-cpu.tsv"
python3 "$REPO/tests/infra/suite_check.py" snapshot "$CI_DIR/before.json" --fleet-dir "$LLMOPS_FLEET_DIR" \
    || { echo "run-all: cannot take the machine's snapshot (tests/infra/suite_check.py)" >&2; exit 1; }

# ------------------------------------------------------------------ setup (fatal on error)
setup_fail() { echo "run-all: setup failed: $*" >&2; exit 1; }

say "setup: system packages"
t0=$(date +%s.%N)
command -v git >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq --no-install-recommends git >/dev/null; } \
    || setup_fail "cannot install git"
bash "$REPO/tests/infra/fleet.sh" deps || setup_fail "apt-get install of the test-host tools failed"
# ansible-test's shellcheck sanity test skips silently without the tool
command -v shellcheck >/dev/null 2>&1 || { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends shellcheck >/dev/null; } \
    || setup_fail "cannot install shellcheck"
# The NVIDIA integration tests build local package repositories for their test hosts: flat apt repositories
# (dpkg-scanpackages, dpkg-deb: dpkg-dev), a stand-in nvidia.ko ELF file (objcopy: binutils), and an rpm repository
# (rpmbuild: rpm, createrepo_c: createrepo-c).
for tool_pkg in dpkg-scanpackages:dpkg-dev objcopy:binutils rpmbuild:rpm createrepo_c:createrepo-c; do
    command -v "${tool_pkg%%:*}" >/dev/null 2>&1 || { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${tool_pkg#*:}" >/dev/null; } \
        || setup_fail "cannot install ${tool_pkg#*:}"
done
record_step setup-apt passed "$(elapsed "$t0")"

say "setup: venvs (ansible-core 2.21 and 2.20 on Python >= 3.12; 2.19 on Debian 12's Python 3.11 without one)"
t0=$(date +%s.%N)
mkdir -p "$CI_DIR"
bash "$REPO/tests/infra/controller-venv.sh" "$VENV" "$REPO/tests/requirements-ci.txt" >/dev/null \
    || setup_fail "creating $VENV from tests/requirements-ci.txt"
bash "$REPO/tests/infra/controller-venv.sh" "$VENV20" "$REPO/tests/requirements-ci-2.20.txt" >/dev/null \
    || setup_fail "creating $VENV20 from tests/requirements-ci-2.20.txt"
"$VENV/bin/ansible" --version | head -n 1
"$VENV20/bin/ansible" --version | head -n 1
# the controller Python of the main line: ansible-test runs sanity and units on it
PYV=$("$VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# fleet.sh's pip download (wheelhouses for the test hosts) runs with the venv's pip (a stock Debian python3 has none)
export LLMOPS_FLEET_PYTHON=$VENV/bin/python
record_step setup-venvs passed "$(elapsed "$t0")"

# The tools keep state under $HOME (ansible-test's sanity venvs in ~/.ansible/test, molecule's
# ephemeral dirs, ssh config): give the run its own HOME so a developer's state (or another run
# on the same machine) cannot change the result. pyenv keeps working through PYENV_ROOT.
if command -v pyenv >/dev/null 2>&1; then
    PYENV_ROOT=${PYENV_ROOT:-$(pyenv root)}
    export PYENV_ROOT
fi
export HOME=$CI_DIR/home
mkdir -p "$HOME"
# The suite polls the hosts' results every 50 ms (ansible-core's default: 1 ms, burning controller CPU while a task
# waits). README's ansible.cfg says 10 ms, which answers a task sooner at the same CPU in a deploy; the suite keeps
# every CPU busy, where a task's result waits for a CPU anyway and only the spin's CPU counts. The pytest tier's
# ansible-playbook runs read it from ~/.ansible.cfg (a key without an environment variable), molecule's from
# extensions/molecule/config.yml
printf '# written by tests/run-all.sh: the suite polling\n[defaults]\ninternal_poll_interval = 0.05\n' \
    >"$HOME/.ansible.cfg"
# molecule's prerun (off since extensions/molecule/config.yml says prerun: false) installed the collection under test
# into ~/.ansible/collections; a copy left there by an earlier run would shadow this checkout for ansible-lint, which
# resolves the collection's modules there first, and for the molecule scenarios.
rm -rf "$HOME/.ansible/collections/ansible_collections/llmops/sglang"

say "setup: copy of the checkout at $COLL"
t0=$(date +%s.%N)
rm -rf "$COLL"
mkdir -p "$COLL"
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' f; do [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done \
    | tar --null -T - -cf -) | tar -C "$COLL" -xf - || setup_fail "copying the checkout to $COLL"
# ansible-test lists a collection's files with git when it is a git work tree
(cd "$COLL" && git init -q && git add -A) || setup_fail "git init in $COLL"
echo "$(cd "$COLL" && git ls-files | wc -l) files"
rm -rf "$STATIC_ROOT"
mkdir -p "$STATIC_COLL"
cp -a "$COLL/." "$STATIC_COLL/" || setup_fail "copying $COLL to $STATIC_COLL"
echo "the static steps' copy: $STATIC_COLL"

# ansible-test's pip bootstrap script, under the name the installed ansible-test asks for
pip_pin=$(grep -oE "pip='[0-9.]+'" "$("$VENV/bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_internal/python_requirements.py" | head -n 1 | cut -d"'" -f2)
[[ -n $pip_pin ]] || setup_fail "cannot read the pip pin from ansible_test/_internal/python_requirements.py"
mkdir -p "$HOME/.ansible/test/cache"
cp "$REPO/tests/ci/get_pip_25_2.py" "$HOME/.ansible/test/cache/get_pip_${pip_pin//./_}.py"
echo "pip bootstrap stand-in: ~/.ansible/test/cache/get_pip_${pip_pin//./_}.py (ansible-test pins pip $pip_pin)"
record_step setup-copy passed "$(elapsed "$t0")"

# Real interpreters first on PATH (pyenv shims exit 127 and ansible-test drops PYENV_VERSION).
PYPATH=
if command -v pyenv >/dev/null 2>&1; then
    for v in 3.9 3.10 3.11 3.12 3.13 3.14; do
        d=$(printf '%s\n' "$(pyenv root)/versions/$v".* | sort -V | tail -n 1)
        [[ -n $d && -x $d/bin/python$v ]] && PYPATH+="$d/bin:"
    done
fi
export PATH="$VENV/bin:$PYPATH$PATH"
export ANSIBLE_COLLECTIONS_PATH=$COLL_ROOT
OTHER_PYTHONS=()
for v in 3.9 3.10 3.11 3.12 3.13 3.14; do
    [[ $v == "$PYV" ]] && continue
    command -v "python$v" >/dev/null 2>&1 && OTHER_PYTHONS+=("$v")
done

# The test-host rootfs (mmdebstrap, ~20 s; cached) builds in the background while the static
# steps start; the lanes that boot test hosts wait for it.
say "setup: test-host root file system (in the background, log: $CI_DIR/rootfs.log)"
rm -f "$CI_DIR/rootfs.rc"
(
    cg_enter setup-rootfs
    t0=$(date +%s.%N)
    bash "$COLL/tests/infra/fleet.sh" rootfs >"$CI_DIR/rootfs.log" 2>&1
    rc=$?
    echo "$rc $(elapsed "$t0")" >"$CI_DIR/rootfs.rc"
) &
ROOTFS_PID=$!
wait_rootfs() {
    local rc secs
    wait "$ROOTFS_PID" 2>/dev/null
    read -r rc secs <"$CI_DIR/rootfs.rc" 2>/dev/null || { rc=1; secs=0.0; }
    cat "$CI_DIR/rootfs.log"
    if ((rc == 0)); then record_step setup-rootfs passed "$secs"; else record_step setup-rootfs "FAILED rc=$rc" "$secs"; FAILED=1; fi
    say "setup-rootfs: ${STEP_RESULTS[-1]} in $secs s (background)"
}

# ------------------------------------------------------------------ steps
# The step functions below run through run_step (shellcheck cannot see that they are called).
# shellcheck disable=SC2317
sanity_other_pythons() {
    local v rc=0
    for v in "${OTHER_PYTHONS[@]}"; do
        ansible-test sanity --venv --python "$v" --test compile --test import || rc=1
    done
    return "$rc"
}

# The scenarios in LLMOPS_MOLECULE_WORKERS (2) groups at once, each group one 'molecule test -s' after the other (every
# scenario boots and stops its own hosts, so two groups never share one). Molecule's own --workers is experimental
# and loses the create playbook's instance config (its hosts resolve to their names). Each group has a HOME of its
# own (molecule's state and ephemeral directories); a copy of the collection an older molecule prerun left there would
# shadow the checkout (ANSIBLE_COLLECTIONS_PATH), so it is removed.
# Minutes each scenario took in the last full run (fresh clone of 75a3a28, 2026-12-03 08:26 UTC; each prints '=== molecule
# scenario S: ... in N s'); the longest goes first onto the group with the fewest minutes so far, so the groups end
# together (by the old figures they ended 2360 s and 1600 s; by these, 1922 s and 2038 s). A scenario not listed counts 5.
MOLECULE_MINUTES="gateway_roll:15 sglang_service:13 gateway_pd:10 tune:8 guard:8 sglang_smoke:5 preflight:4 sglang_check:2 default:2"

# shellcheck disable=SC2317  # runs through run_step (molecule_all)
molecule_groups() {
    local n=$1 s w i best found sums=() groups=() order=()
    for s in extensions/molecule/*/molecule.yml; do
        s=$(basename "$(dirname "$s")"); found=5
        for w in $MOLECULE_MINUTES; do [[ ${w%%:*} == "$s" ]] && found=${w##*:}; done
        order+=("$found $s")
    done
    for ((i = 0; i < n; i++)); do sums[i]=0; groups[i]=; done
    while read -r w s; do
        best=0
        for ((i = 1; i < n; i++)); do ((sums[i] < sums[best])) && best=$i; done
        sums[best]=$((sums[best] + w)); groups[best]+="$s "
    done < <(printf '%s\n' "${order[@]}" | sort -k1,1nr -k2,2)
    printf '%s\n' "${groups[@]}"
}

# shellcheck disable=SC2317  # runs through run_step
molecule_all() {
    local n=${LLMOPS_MOLECULE_WORKERS:-2} groups=() i s rc=0 pids=()
    mapfile -t groups < <(molecule_groups "$n")
    for i in "${!groups[@]}"; do
        (
            grc=0
            export HOME=$CI_DIR/home-molecule-$i
            rm -rf "$HOME/.ansible/collections/ansible_collections/llmops/sglang"
            mkdir -p "$HOME"
            for s in ${groups[$i]}; do
                echo "=== molecule test -s $s (group $((i + 1)) of $n: ${groups[$i]% })"
                t0=$(date +%s)
                if timeout -k 30 2400 molecule test -s "$s"; then
                    echo "=== molecule scenario $s: passed in $(($(date +%s) - t0)) s"
                else
                    echo "=== molecule scenario $s: FAILED in $(($(date +%s) - t0)) s"; grc=1
                fi
            done
            exit "$grc"
        ) >"$LANES/molecule-group-$i.log" 2>&1 &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || rc=1
        cat "$LANES/molecule-group-$i.log"
    done
    return "$rc"
}

# README's demo command on a stock Debian 12 (no pyenv, no pip, Python 3.11): a root file system built afresh with
# mmdebstrap, the demo run in it with chroot (tests/infra/stock-debian.sh). About 3.5 min on a quiet 2-core machine,
# 17 min under load (capped at 20), so it starts only when at most STOCK_BUDGET seconds of the run were spent when the
# lanes A and B start (after the units): the run then still ends within CI's 90 min.
STOCK_BUDGET=${LLMOPS_CI_STOCK_BUDGET:-2700}
# The ready demo runs once per suite, here: test_demo.py's ready test (deselected from the pytest lane) holds its
# assertions on the run this step saves (LLMOPS_DEMO_READY_RUN), and runs the demo itself when the step has no time
# for the stock Debian.
READY_TEST=tests/integration/test_demo.py::test_demo_ready_then_unchanged
# shellcheck disable=SC2317  # runs through run_step
ready_test() {
    PYTHONPATH=$COLL_ROOT python -m pytest -p no:cacheprovider -q -rfEs "$READY_TEST"
}
# shellcheck disable=SC2317  # runs through run_step
stock_debian() {
    local spent saved=$CI_DIR/demo-ready-run
    spent=$(elapsed "$T_START")
    if awk -v s="$spent" -v b="$STOCK_BUDGET" 'BEGIN{exit !(s > b)}'; then
        echo "${spent} s spent already (the stock Debian runs when at most $STOCK_BUDGET s were): the ready demo runs on this machine"
        ready_test || return
        # shellcheck disable=SC2031  # set by lane_step for this step
        echo "${spent} s spent already (it runs when at most $STOCK_BUDGET s were; the ready demo passed on this machine); run it with 'bash tests/infra/stock-debian.sh'" \
            >"$SKIP_FILE"
        return "$SKIPPED"
    fi
    rm -rf "$CI_DIR/stock-debian" "$saved"
    LLMOPS_STOCK_DIR="$CI_DIR/stock-debian" LLMOPS_STOCK_SAVE=$saved timeout -k 30 1200 bash tests/infra/stock-debian.sh
    local rc=$?
    rm -rf "$CI_DIR/stock-debian"
    echo "== the ready test over that run ($saved)"
    LLMOPS_DEMO_READY_RUN=$saved ready_test || rc=1
    return "$rc"
}

# shellcheck disable=SC2317  # runs through run_step
molecule_paramiko() {
    # a HOME of its own, as each molecule group has (a copy of the collection an older molecule prerun left in
    # ~/.ansible/collections would shadow the checkout, so it is removed)
    local home=$CI_DIR/home-molecule-paramiko
    rm -rf "$home/.ansible/collections/ansible_collections/llmops/sglang"
    mkdir -p "$home"
    HOME=$home PATH="$VENV20/bin:$PATH" LLMOPS_FLEET_CONNECTION=paramiko timeout -k 30 600 "$VENV20/bin/molecule" test -s default
}

# tests/unit ran through ansible-test (each test in its own fork, held by the per-test process check of
# tests/conftest.py); plain pytest runs the integration tier with --dist loadgroup (each file whose module-scoped
# fixture boots a host or builds a repository runs on one worker, so that set-up runs once: tests/conftest.py), and
# only collects tests/unit to prove that the collection also imports with PYTHONPATH alone (style.md: "check that once
# in CI").
PYTEST_DIRS=(tests/integration)
# the ready demo's test runs in the stock-debian step (below), unless that step is skipped by name
READY_ELSEWHERE=()
[[ " ${LLMOPS_CI_SKIP:-} " == *" stock-debian "* ]] || READY_ELSEWHERE=(--deselect "$READY_TEST")
[[ -d $COLL/tests/system ]] && PYTEST_DIRS+=(tests/system)
# shellcheck disable=SC2317  # runs in a lane
pytest_plain() {
    PYTHONPATH=$COLL_ROOT python -m pytest -p no:cacheprovider -q --collect-only tests/unit >"$CI_DIR/pytest-collect.log" 2>&1 \
        || { tail -n 20 "$CI_DIR/pytest-collect.log"; return 1; }
    tail -n 1 "$CI_DIR/pytest-collect.log"
    # shellcheck disable=SC2086
    PYTHONPATH=$COLL_ROOT timeout -k 30 3000 python -m pytest -p no:cacheprovider -q -rfEs \
        --continue-on-collection-errors --durations=25 --cpu-top 25 -n "${LLMOPS_PYTEST_WORKERS:-3}" --dist loadgroup ${LLMOPS_PYTEST_ARGS:-} \
        "${READY_ELSEWHERE[@]}" "${PYTEST_DIRS[@]}"
}

# the units run offline: the SGLang releases they read come from this cache (HOME/.cache/llmops-sglang); the
# integration tests read it too
run_step wheels "$VENV/bin/python" tests/sglang_wheels.py
# Three lanes at once, each step in its own cgroup with its output in $LANES/<step>.log, printed (and recorded) when its
# lane is done: the static steps (sanity, the lints: mostly one core's work, in their own copy of the checkout) as
# lane S, from the start; the host-bound steps (they mostly wait on test hosts) as lane A, molecule's scenarios (two at
# a time) then its paramiko run, and lane B, pytest's integration tier, both once the units are done. The stock Debian
# demo starts as soon as lane A or B is done. Time: about the units plus the longest lane, not the sum; the machine's
# two cores work from the start.
rm -rf "$LANES"
mkdir -p "$LANES"
STATIC_STEPS=(sanity)
((${#OTHER_PYTHONS[@]})) && STATIC_STEPS+=("sanity-py$(IFS=,; echo "${OTHER_PYTHONS[*]}")")
STATIC_STEPS+=(ansible-lint antsibull-docs)
say "lanes: ${STATIC_STEPS[*]} | units, then: molecule, molecule-paramiko | pytest | stock-debian (at the same time; each lane step's output follows when its lane is done)"
(
    export ANSIBLE_COLLECTIONS_PATH=$STATIC_ROOT
    LANE_DIR=$STATIC_COLL
    lane_step sanity ansible-test sanity --venv --python "$PYV"
    ((${#OTHER_PYTHONS[@]})) && lane_step "${STATIC_STEPS[1]}" sanity_other_pythons
    lane_step ansible-lint ansible-lint
    lane_step antsibull-docs antsibull-docs lint-collection-docs --plugin-docs .
) &
LANE_S=$!
# The units beside lane S and before the test hosts load the machine: some hold timings of real servers and processes
# (a drain that sees a server busy for 0.4 s failed at load 11-20 when they ran beside the test-host lanes).
run_step units ansible-test units --venv --python "$PYV"
# the test hosts boot from the root file system (built in the background since the set-up)
wait_rootfs
(lane_step molecule molecule_all; lane_step molecule-paramiko molecule_paramiko) &
LANE_A=$!
(lane_step pytest pytest_plain) &
LANE_B=$!
# stock-debian starts with them: it mostly waits (mmdebstrap's downloads, the demo's paced first host; about 130 CPU-s
# in 260 s), so beside the CPU-bound lanes it costs them about a minute; started when the first of them was done, it
# ran alone at the end for its whole 260 s (the machine a quarter busy)
(lane_step stock-debian stock_debian) &
LANE_C=$!
wait "$LANE_S"
for step in "${STATIC_STEPS[@]}"; do lane_record "$step"; done
wait "$LANE_A" "$LANE_B" "$LANE_C"
for step in molecule molecule-paramiko pytest stock-debian; do lane_record "$step"; done
# pytest's own count goes into the summary beside its step
for i in "${!STEP_NAMES[@]}"; do
    [[ ${STEP_NAMES[$i]} == pytest && ${STEP_RESULTS[$i]} != skipped ]] || continue
    STEP_NOTES[i]=$(grep -E '^=*[ ]*[0-9]+ (passed|failed)|no tests ran' "$LANES/pytest.log" 2>/dev/null | tail -n 1 | tr -d '=' | sed 's/^ *//; s/ *$//')
done
# the scenarios' destroy stops their hosts, the tests' fixtures theirs: a host still up is a leftover of those steps
# (named at the end), stopped now
hosts_left_by "molecule or pytest"

# ------------------------------------------------------------------ what was left, the summary
# The machine after the suite: no process a step started, no new listener, network namespace, mount or test host.
say "leftovers: what the suite left on the machine"
t0=$(date +%s.%N)
if "$VENV/bin/python" "$REPO/tests/infra/suite_check.py" check "$CI_DIR/before.json" --cgroups "$STEP_CGROUPS" \
        --fleet-dir "$LLMOPS_FLEET_DIR" --also "$CI_DIR/leftovers.txt" \
        --scope "$CI_DIR" --scope "$LLMOPS_FLEET_DIR" --scope /run/netns --scope /tmp --scope /var/tmp/llmops-fleet; then
    record_step leftovers passed "$(elapsed "$t0")"
else
    record_step leftovers FAILED "$(elapsed "$t0")" "see 'left running:' above"
    FAILED=1
fi

# step_cpu NAME: the CPU seconds (user + system) of everything the step ran on the controller side, from its cgroup;
# '-' without one. The test hosts' processes run in their machines' cgroups, not the step's: the machine's busy share
# on the total line is what says whether the run is bound by the CPU.
# It sets STEP_CPU (not printed: a $(...) subshell would lose the running CPU_TOTAL).
CPU_TOTAL=0
step_cpu() {
    local usec=
    STEP_CPU=-
    [[ -n $STEP_CGROUPS ]] && usec=$(awk '$1 == "usage_usec" {print $2}' "$STEP_CGROUPS/$1/cpu.stat" 2>/dev/null)
    [[ -n $usec ]] || return 0
    CPU_TOTAL=$((CPU_TOTAL + usec))
    STEP_CPU=$(awk -v u="$usec" 'BEGIN{printf "%.1f", u / 1e6}')
}

say "summary"
n_pass=0 n_fail=0 n_skip=0
printf '%-28s %-14s %8s %8s  %s\n' STEP RESULT SECONDS CPU-S NOTE
for i in "${!STEP_NAMES[@]}"; do
    step_cpu "${STEP_NAMES[$i]}"
    printf '%-28s %-14s %8s %8s  %s\n' "${STEP_NAMES[$i]}" "${STEP_RESULTS[$i]}" "${STEP_TIMES[$i]}" "$STEP_CPU" "${STEP_NOTES[$i]}"
    case ${STEP_RESULTS[$i]} in
        passed) n_pass=$((n_pass + 1)) ;;
        skipped) n_skip=$((n_skip + 1)) ;;
        *) n_fail=$((n_fail + 1)) ;;
    esac
done
read -r CPU_BUSY1 CPU_ALL1 < <(cpu_ticks)
printf '%-28s %-14s %8s %8s  %s\n' total "" "$(elapsed "$T_START")" "$(awk -v u="$CPU_TOTAL" 'BEGIN{printf "%.1f", u / 1e6}')" \
    "$(awk -v b=$((CPU_BUSY1 - CPU_BUSY0)) -v a=$((CPU_ALL1 - CPU_ALL0)) -v hz="$(getconf CLK_TCK)" -v n="$(nproc)" \
        'BEGIN{printf "CPU-S: the steps on the controller side; the machine was busy %.0f CPU-s of %.0f (%.0f %%, %d cores; the test hosts count there)", b / hz, a / hz, a ? 100 * b / a : 0, n}')"
# the test hosts' CPU (fleet.sh down writes each host's from its cgroup): by host, the biggest first
if [[ -s $LLMOPS_FLEET_DIR/host-cpu.tsv ]]; then
    awk -F '\t' '{cpu[$1] += $2 / 1e6; all += $2 / 1e6; n[$1]++} END {
            printf "test hosts: %d, %.1f CPU-s in all (fleet.sh down records each); the biggest:\n", length(cpu), all
            for (h in cpu) printf "%10.1f  %s (%d boot%s)\n", cpu[h], h, n[h], (n[h] > 1 ? "s" : "")
        }' "$LLMOPS_FLEET_DIR/host-cpu.tsv" | { IFS= read -r head; echo "$head"; sort -rn | head -n 20; }
fi
echo "steps: $n_pass passed, $n_fail failed, $n_skip skipped"
exit "$FAILED"
}
