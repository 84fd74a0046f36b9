#!/usr/bin/env bash
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# fleet.sh - test hosts for llmops.sglang: real systemd hosts reached over real SSH.
#
# Every node is a systemd-nspawn container booted (systemd as PID 1) from ONE cached
# mmdebstrap Debian bookworm root file system with --volatile=overlay (each boot starts
# clean, nothing is copied), in its own network namespace (eth0 = 10.213.0.1X on a bridge
# in the hub namespace "llmops-hub") and in its own cgroup. The root namespace gets no
# 10.213.x address: Ansible reaches the nodes through
#   ProxyCommand="ip netns exec llmops-hub nc %h %p".
# The nodes have no route to the outside: fetch packages on the controller
# ("fleet.sh wheelhouse") and copy them over.
#
# Usage:
#   fleet.sh deps                       install the apt packages this needs (if missing)
#   fleet.sh rootfs                     build/refresh the cached root file system
#   fleet.sh up [--persist] NAME...     boot nodes (builds the rootfs first if needed); --persist: see below
#   fleet.sh down NAME...|--all         stop nodes, remove namespaces/cgroups/ssh masters (never fails)
#   fleet.sh inventory [--group G] FILE NAME...   write an Ansible inventory (.yml/.yaml = YAML, else INI)
#   fleet.sh wheelhouse DIR [PIP-ARGS] SPEC...    pip download --no-deps -d DIR ... on the controller
#   fleet.sh ssh NAME [COMMAND...]      open an SSH session on a node (debugging)
#   fleet.sh status                     list nodes
#
# Environment:
#   LLMOPS_FLEET_DIR        state directory (default /var/tmp/llmops-fleet)
#   LLMOPS_FLEET_SUITE      Debian suite of the rootfs (default bookworm)
#   LLMOPS_FLEET_BOOT_TIMEOUT  seconds to wait for sshd + systemd per "up" (default 90)
#   LLMOPS_FLEET_STOP_GRACE    seconds "down" lets a node power off cleanly before SIGKILL (default 15; 0: kill at
#                              once, for hosts that are thrown away: molecule's destroy)
#   LLMOPS_FLEET_PYTHON     Python used by "wheelhouse" (default python3)
#   LLMOPS_STANDIN_SRC      checkout root holding tests/standin and tests/fixtures (default: this checkout)
#   LLMOPS_FLEET_PERSIST    1 = "up" boots every node as with --persist
#
# Persistent nodes (up --persist, for reboot tests): instead of --volatile=overlay the node gets
# --overlay=ROOTFS:DIR/nodes/NAME.upper:/ (an upper directory on disk, emptied by "up" and removed by
# "down"), and its launcher boots systemd-nspawn again whenever it exits with status 133 (the container
# rebooted; what systemd-nspawn@.service does with RestartForceExitStatus=133), in the same network
# namespace, cgroup and address. So "systemctl reboot" in the node is a real reboot (new boot_id, all
# units started again) that keeps what was installed. nodes/NAME.pid follows the current nspawn.

set -euo pipefail

DIR=${LLMOPS_FLEET_DIR:-/var/tmp/llmops-fleet}
SUITE=${LLMOPS_FLEET_SUITE:-bookworm}
BOOT_TIMEOUT=${LLMOPS_FLEET_BOOT_TIMEOUT:-90}
STOP_GRACE=${LLMOPS_FLEET_STOP_GRACE:-15}
HUB=llmops-hub
HUB_ADDR=10.213.0.1
NET_PREFIX=10.213.0
# Namespaces and cgroups are machine-wide: nodes of the default state directory use
# llmops-n-<name> and .../llmops-fleet/<name>; another LLMOPS_FLEET_DIR gets its own prefix, so
# two state directories (a developer's demo and a CI run) can use the same node names.
if [[ $(realpath -m "$DIR") == /var/tmp/llmops-fleet ]]; then
    NS_PREFIX=llmops-n-
    CG_NAME=llmops-fleet
else
    DIR_TAG=$(realpath -m "$DIR" | sha256sum | cut -c1-6)
    NS_PREFIX=llmops-x$DIR_TAG-
    CG_NAME=llmops-fleet-$DIR_TAG
fi
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_ROOT=${LLMOPS_STANDIN_SRC:-$(cd "$SCRIPT_DIR/../.." && pwd)}
ROOTFS=$DIR/rootfs
KEY=$DIR/ssh/id_ed25519
PACKAGES=systemd,systemd-sysv,dbus,python3,python3-venv,python3-pip,openssh-server,iproute2,libpam-systemd,ca-certificates,procps,libnss-myhostname
APT_PACKAGES=(openssh-server openssh-client mmdebstrap systemd-container netcat-openbsd iproute2 ca-certificates)
ROOTFS_RECIPE_VERSION=4   # bump when the customize steps below change

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

log() { printf 'fleet: %s\n' "$*" >&2; }
die() { printf 'fleet: ERROR: %s\n' "$*" >&2; exit 1; }

need_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces, cgroups and systemd-nspawn need it); try: sudo $0 $*"
}

lock() {
    mkdir -p "$DIR"
    exec 9>"$DIR/.lock"
    flock 9
}
unlock() { flock -u 9 2>/dev/null || true; }

valid_name() {
    [[ $1 =~ ^[a-zA-Z][a-zA-Z0-9-]{0,30}$ ]] || die "invalid node name '$1': use letters, digits and '-', start with a letter, at most 31 characters"
}

# ---------------------------------------------------------------- deps
cmd_deps() {
    need_root deps
    local missing=() p
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if ((${#missing[@]} == 0)); then
        log "deps: all present (${APT_PACKAGES[*]})"
        return 0
    fi
    log "deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# ---------------------------------------------------------------- rootfs
apt_sources() {
    # The host's Debian sources, one deb822 or one-line format file, fed to mmdebstrap on stdin.
    if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
        grep -v '^[[:space:]]*#' /etc/apt/sources.list.d/debian.sources
    elif [[ -f /etc/apt/sources.list ]] && grep -q '^deb .*debian' /etc/apt/sources.list; then
        grep '^deb .*debian' /etc/apt/sources.list
    else
        printf 'deb http://deb.debian.org/debian %s main\ndeb http://deb.debian.org/debian-security %s-security main\n' "$SUITE" "$SUITE"
    fi
}

ensure_key() {
    if [[ ! -f $KEY ]]; then
        mkdir -p "$DIR/ssh"
        chmod 700 "$DIR/ssh"
        ssh-keygen -q -t ed25519 -N '' -C llmops-fleet -f "$KEY"
        log "generated fleet ssh key $KEY"
    fi
}

standin_sources() {
    # Prints "src<TAB>dest-relative" for every file that goes to /opt/llmops-standin.
    local f case_dir
    f=$SRC_ROOT/tests/standin/sglang_standin.py
    [[ -f $f ]] || die "stand-in not found at $f (set LLMOPS_STANDIN_SRC to the checkout root)"
    printf '%s\t%s\n' "$f" sglang_standin.py
    # its helpers and recorded performance profiles (standin_profile.py, nvidia_smi_standin.py, profiles/*.json)
    for f in "$SRC_ROOT"/tests/standin/*.py "$SRC_ROOT"/tests/standin/profiles/*.json; do
        [[ -f $f && $f != */sglang_standin.py ]] && printf '%s\t%s\n' "$f" "${f#"$SRC_ROOT"/tests/standin/}"
    done
    if [[ -d $SRC_ROOT/tests/fixtures/sglang-logs ]]; then
        for case_dir in "$SRC_ROOT"/tests/fixtures/sglang-logs/*/; do
            [[ -f $case_dir/server.log || -f $case_dir/server.log.gz ]] || continue
            for f in "$case_dir"*; do
                # server.log is only the tests' unpacked copy of server.log.gz (tests/sglang_corpus.py)
                [[ $f == */server.log && -f $case_dir/server.log.gz ]] && continue
                [[ -f $f ]] && printf '%s\t%s\n' "$f" "recordings/$(basename "$case_dir")/$(basename "$f")"
            done
        done
    else
        log "WARNING: $SRC_ROOT/tests/fixtures/sglang-logs does not exist: nodes get the stand-in without recordings"
    fi
}

content_stamp() {
    {
        echo "recipe $ROOTFS_RECIPE_VERSION"
        cat "$KEY.pub"
        standin_sources | while IFS=$'\t' read -r src dest; do
            printf '%s %s\n' "$dest" "$(sha256sum < "$src" | cut -d' ' -f1)"
        done
    } | sha256sum | cut -d' ' -f1
}

base_stamp() {
    { echo "recipe $ROOTFS_RECIPE_VERSION suite $SUITE packages $PACKAGES arch $(dpkg --print-architecture)"; apt_sources; } | sha256sum | cut -d' ' -f1
}

build_base() {
    local stamp=$1 t0 tmp
    t0=$(date +%s.%N)
    tmp=$DIR/rootfs.new
    rm -rf "$tmp"
    log "rootfs: mmdebstrap $SUITE minbase into $tmp (packages: $PACKAGES)"
    # customize: no /etc/hostname (nspawn --hostname wins), no apt timers (no network anyway),
    # no getty on the read-only console, empty machine-id so every boot gets its own.
    # shellcheck disable=SC2016  # "$1" in the hooks is the rootfs path mmdebstrap passes, not ours
    apt_sources | mmdebstrap --quiet --variant=minbase --include="$PACKAGES" \
        --customize-hook='rm -f "$1/etc/hostname"' \
        --customize-hook='chroot "$1" systemctl mask apt-daily.timer apt-daily-upgrade.timer console-getty.service getty@tty1.service >/dev/null 2>&1 || true' \
        --customize-hook='truncate -s 0 "$1/etc/machine-id"; rm -f "$1/var/lib/dbus/machine-id"' \
        --customize-hook='printf "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n" > "$1/etc/hosts"' \
        --customize-hook='sed -i "s/^hosts:.*/hosts:          files myhostname dns/" "$1/etc/nsswitch.conf"' \
        --customize-hook='mkdir -p "$1/etc/ssh/sshd_config.d" && printf "PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\nMaxStartups 100:30:200\n" > "$1/etc/ssh/sshd_config.d/llmops-fleet.conf"' \
        "$SUITE" "$tmp" - \
        || { rm -rf "$tmp"; die "mmdebstrap failed building the $SUITE rootfs (see its output above); check that the host's apt sources are reachable: apt-get update"; }
    rm -rf "$ROOTFS"
    mv "$tmp" "$ROOTFS"
    echo "$stamp" > "$DIR/rootfs.stamp"
    rm -f "$DIR/rootfs.content-stamp"
    log "rootfs: built in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
}

sync_content() {
    local stamp=$1 dest=$ROOTFS/opt/llmops-standin
    rm -rf "$dest.new"
    mkdir -p "$dest.new/recordings"
    standin_sources | while IFS=$'\t' read -r src rel; do
        install -D -m 0644 "$src" "$dest.new/$rel"
    done
    rm -rf "$dest"
    mv "$dest.new" "$dest"
    install -d -m 0700 "$ROOTFS/root/.ssh"
    install -m 0600 "$KEY.pub" "$ROOTFS/root/.ssh/authorized_keys"
    echo "$stamp" > "$DIR/rootfs.content-stamp"
    log "rootfs: installed stand-in + $(find "$dest/recordings" -mindepth 1 -maxdepth 1 -type d | wc -l) recordings at /opt/llmops-standin, root's authorized_keys"
}

ensure_rootfs() {
    local bs cs
    ensure_key
    bs=$(base_stamp)
    if [[ ! -x $ROOTFS/lib/systemd/systemd || $(cat "$DIR/rootfs.stamp" 2>/dev/null) != "$bs" ]]; then
        if compgen -G "$DIR/nodes/*.pid" >/dev/null; then
            die "the rootfs must be rebuilt but nodes are running on it; run: $0 down --all"
        fi
        build_base "$bs"
    fi
    cs=$(content_stamp)
    if [[ $(cat "$DIR/rootfs.content-stamp" 2>/dev/null) != "$cs" ]]; then
        sync_content "$cs"
    fi
}

cmd_rootfs() {
    need_root rootfs
    lock
    ensure_rootfs
    unlock
    log "rootfs: ready at $ROOTFS"
}

# ---------------------------------------------------------------- cgroups
cg_roots() {
    # one cgroup per node in every hierarchy nspawn uses (hybrid: name=systemd + unified; pure v2: the root)
    local h
    if [[ -f /sys/fs/cgroup/cgroup.procs ]]; then
        echo "/sys/fs/cgroup/$CG_NAME"
        return
    fi
    for h in systemd unified; do
        [[ -d /sys/fs/cgroup/$h ]] && echo "/sys/fs/cgroup/$h/$CG_NAME"
    done
    return 0
}

cg_procs() {
    # all PIDs in the node's cgroups
    local root
    for root in $(cg_roots); do
        [[ -d $root/$1 ]] && find "$root/$1" -name cgroup.procs -exec cat {} + 2>/dev/null
    done | sort -un
}

cg_remove() {
    local root
    for root in $(cg_roots); do
        [[ -d $root/$1 ]] && find "$root/$1" -depth -type d -exec rmdir {} \; 2>/dev/null
        rmdir "$root" 2>/dev/null || true
    done
    return 0
}

# ---------------------------------------------------------------- network
ensure_hub() {
    if ! ip netns list | grep -qw "^$HUB"; then
        ip netns add "$HUB"
    fi
    ip -n "$HUB" link set lo up
    if ! ip -n "$HUB" link show br0 >/dev/null 2>&1; then
        ip -n "$HUB" link add br0 type bridge
        ip -n "$HUB" addr add "$HUB_ADDR/24" dev br0
    fi
    ip -n "$HUB" link set br0 up
}

node_ns() { echo "$NS_PREFIX$1"; }

alloc_index() {
    # lowest free host index 1..200 -> address 10.213.0.(10+i)
    local i used=" "
    local f
    for f in "$DIR"/nodes/*.idx; do
        [[ -f $f ]] && used+="$(cat "$f") "
    done
    # also indexes taken by nodes of another state directory on the same hub bridge
    for f in $(ip -n "$HUB" -o link show 2>/dev/null | grep -oE 'llmops-v[0-9]+' || true); do
        used+="${f#llmops-v} "
    done
    for ((i = 1; i <= 200; i++)); do
        [[ $used == *" $i "* ]] || { echo "$i"; return; }
    done
    die "no free node address left in $NET_PREFIX.0/24"
}

# ---------------------------------------------------------------- up
ssh_opts() {
    printf '%s\n' -i "$KEY" -o "ProxyCommand=ip netns exec $HUB nc %h %p" -o StrictHostKeyChecking=no \
        -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o BatchMode=yes -o ConnectTimeout=5 \
        -o ServerAliveInterval=2 -o ServerAliveCountMax=3 -o ControlMaster=no -o ControlPath=none
}

node_ssh() {
    local name=$1
    shift
    local addr opts
    addr=$(cat "$DIR/nodes/$name.addr" 2>/dev/null) || die "node '$name' is not up (no $DIR/nodes/$name.addr)"
    mapfile -t opts < <(ssh_opts)
    # shellcheck disable=SC2029  # the command is meant to run on the test host
    ssh "${opts[@]}" "root@$addr" "$@"
}

boot_one() {
    local name=$1 persist=${2:-0} idx ns addr veth root
    idx=$(alloc_index)
    ns=$(node_ns "$name")
    addr="$NET_PREFIX.$((10 + idx))"
    veth="llmops-v$idx"
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" netns "$HUB"
    ip -n "$HUB" link set "$veth" master br0 up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" route add default via "$HUB_ADDR" 2>/dev/null || true
    for root in $(cg_roots); do mkdir -p "$root/$name"; done
    echo "$idx" > "$DIR/nodes/$name.idx"
    echo "$addr" > "$DIR/nodes/$name.addr"
    : > "$DIR/nodes/$name.log"
    if ((persist)); then
        launch_persistent "$name" "$ns"
        wait_launched "$name"
        return 0
    fi
    # The launcher moves itself into the node's own cgroup(s) first: nspawn --keep-unit puts the
    # container's payload/ under the caller's cgroup, so nodes started from one cgroup would share
    # /payload/system.slice/*.service and kill each other's units.
    # shellcheck disable=SC2016
    setsid sh -c 'name=$1; pidfile=$2; shift 2
        for cg in $LLMOPS_CG_ROOTS; do echo $$ > "$cg/$name/cgroup.procs"; done
        echo $$ > "$pidfile"
        exec "$@"' fleet-launch "$name" "$DIR/nodes/$name.pid" \
        systemd-nspawn --quiet -D "$ROOTFS" --volatile=overlay --boot \
        --machine="$name" --hostname="$name" --register=no --keep-unit \
        --network-namespace-path="/run/netns/$ns" --console=read-only \
        --setenv=LLMOPS_FLEET_NODE="$name" \
        >>"$DIR/nodes/$name.log" 2>&1 </dev/null 8>&- 9>&- &
    wait_launched "$name"
}

wait_launched() {
    local name=$1
    local i
    for ((i = 0; i < 50; i++)); do
        [[ -s $DIR/nodes/$name.pid ]] && break
        sleep 0.02
    done
    [[ -s $DIR/nodes/$name.pid ]] || die "node $name: systemd-nspawn did not start (log: $DIR/nodes/$name.log)"
}

launch_persistent() {
    # A node whose changes survive its reboots (up --persist): a persistent overlay upper directory
    # instead of --volatile=overlay's tmpfs, and a launcher that boots systemd-nspawn again when it
    # exits with 133 (the container rebooted), as systemd-nspawn@.service does with
    # RestartForceExitStatus=133. The launcher stays in the node's cgroup and keeps its PID in
    # NAME.launcher; each nspawn writes its own PID to NAME.pid (a subshell that execs it), so
    # "down" and "status" always see the current one.
    local name=$1 ns=$2 upper=$DIR/nodes/$1.upper
    rm -rf "$upper" "$DIR/nodes/.#$name.upper"*
    mkdir -m 0755 "$upper"
    # shellcheck disable=SC2016
    setsid bash -c 'name=$1; pidfile=$2; shift 2
        for cg in $LLMOPS_CG_ROOTS; do echo $$ > "$cg/$name/cgroup.procs"; done
        echo $$ > "${pidfile%.pid}.launcher"
        while :; do
            rc=0
            (echo "$BASHPID" > "$pidfile"; exec "$@") || rc=$?
            [[ $rc -eq 133 ]] || exit "$rc"
            echo "fleet: $name rebooted (systemd-nspawn exit status 133): booting it again"
        done' fleet-launch-persist "$name" "$DIR/nodes/$name.pid" \
        systemd-nspawn --quiet -D "$ROOTFS" --overlay="$ROOTFS:$upper:/" --boot \
        --machine="$name" --hostname="$name" --register=no --keep-unit \
        --network-namespace-path="/run/netns/$ns" --console=read-only \
        --setenv=LLMOPS_FLEET_NODE="$name" \
        >>"$DIR/nodes/$name.log" 2>&1 </dev/null 8>&- 9>&- &
}

ssh_banner() {
    # prints the SSH identification string of ADDR:22 seen from the hub, or nothing
    timeout 3 ip netns exec "$HUB" nc -w 2 "$1" 22 </dev/null 2>/dev/null | head -c 8 || true
}

wait_nodes() {
    local deadline=$((SECONDS + BOOT_TIMEOUT)) name pending state out
    local -A phase=()
    for name in "$@"; do phase[$name]=ssh; done
    while :; do
        pending=0
        for name in "$@"; do
            case ${phase[$name]} in
            ready) continue ;;
            ssh)
                if ! kill -0 "$(cat "$DIR/nodes/$name.pid")" 2>/dev/null; then
                    boot_failure "$name" "systemd-nspawn exited during boot"
                fi
                if [[ $(ssh_banner "$(cat "$DIR/nodes/$name.addr")") == SSH-2.0* ]]; then
                    phase[$name]=systemd
                fi
                ;;
            systemd)
                out=$(node_ssh "$name" systemctl is-system-running 2>/dev/null) || true
                state=${out%%$'\n'*}
                case $state in
                running) phase[$name]=ready ;;
                degraded)
                    log "WARNING: node $name: systemd is 'degraded'; failed units: $(node_ssh "$name" systemctl --failed --no-legend --plain 2>/dev/null | awk '{print $1}' | tr '\n' ' ')"
                    phase[$name]=ready
                    ;;
                esac
                ;;
            esac
            [[ ${phase[$name]} == ready ]] || pending=$((pending + 1))
        done
        ((pending == 0)) && return 0
        if ((SECONDS >= deadline)); then
            for name in "$@"; do
                [[ ${phase[$name]} == ready ]] || boot_failure "$name" "not ready after ${BOOT_TIMEOUT}s (waiting for: ${phase[$name]})"
            done
        fi
        sleep 0.1
    done
}

boot_failure() {
    local name=$1 why=$2
    {
        printf 'fleet: ERROR: node %s (%s): %s\n' "$name" "$(cat "$DIR/nodes/$name.addr" 2>/dev/null)" "$why"
        printf 'fleet: last 30 lines of its boot log %s:\n' "$DIR/nodes/$name.log"
        tail -n 30 "$DIR/nodes/$name.log" 2>/dev/null | sed 's/^/    | /'
        printf 'fleet: try: %s down %s; check "dmesg | tail", free memory, and that no other process uses netns %s\n' "$0" "$name" "$(node_ns "$name")"
    } >&2
    exit 1
}

# systemd in each host takes about 8 inotify instances of root's (journald, logind, udev, PID 1 itself); the kernel's
# default of 128 per user lets about 15 hosts run on a machine, and the 16th fails to boot with "Failed to allocate
# manager object: Too many open files". Raised for as long as the machine runs (not written to /etc/sysctl.d).
INOTIFY_INSTANCES=1024
ensure_inotify() {
    local now
    now=$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null || echo "$INOTIFY_INSTANCES")
    if ((now < INOTIFY_INSTANCES)); then
        log "raising fs.inotify.max_user_instances from $now to $INOTIFY_INSTANCES (each test host's systemd takes about 8)"
        echo "$INOTIFY_INSTANCES" >/proc/sys/fs/inotify/max_user_instances ||
            log "could not raise fs.inotify.max_user_instances: with more than about $((now / 8)) hosts up, a boot fails with 'Too many open files'"
    fi
}

cmd_up() {
    need_root up
    ensure_inotify
    local persist=0
    [[ ${LLMOPS_FLEET_PERSIST:-} == 1 ]] && persist=1
    if [[ ${1:-} == --persist ]]; then
        persist=1
        shift
    fi
    (($# > 0)) || die "usage: fleet.sh up [--persist] NAME..."
    local name t0 note
    t0=$(date +%s.%N)
    if ((persist)) && [[ $DIR == *:* ]]; then
        die "up --persist: the state directory '$DIR' must not contain ':' (it goes into systemd-nspawn --overlay=)"
    fi
    for name in "$@"; do valid_name "$name"; done
    lock
    ensure_rootfs
    mkdir -p "$DIR/nodes"
    for name in "$@"; do
        if [[ -f $DIR/nodes/$name.pid || -e /run/netns/$(node_ns "$name") ]]; then
            log "node $name: leftover state found, stopping it first"
            down_nodes "$name"
        fi
    done
    LLMOPS_CG_ROOTS=$(cg_roots | tr '\n' ' ')
    export LLMOPS_CG_ROOTS
    # addresses and veth names are allocated against the shared hub: one allocation at a time
    # across all state directories (and "down" removes an idle hub under the same lock)
    exec 8>/run/llmops-fleet-hub.lock
    flock 8
    ensure_hub
    for name in "$@"; do boot_one "$name" "$persist"; done
    flock -u 8
    exec 8>&-
    unlock
    wait_nodes "$@"
    for name in "$@"; do
        note=
        ((persist)) && note=" (persistent: $DIR/nodes/$name.upper; a reboot boots it again)"
        log "node $name up: $(cat "$DIR/nodes/$name.addr") pid $(cat "$DIR/nodes/$name.pid")$note"
    done
    log "up: $# node(s) in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
}

# ---------------------------------------------------------------- down
kill_ssh_masters() {
    # ssh ControlMaster processes (Ansible's/molecule's) still connected to ADDR would make the next
    # run reuse a dead connection. Every connection to a node goes through our ProxyCommand
    # "ip netns exec llmops-hub nc ADDR 22" (which execs into "nc ADDR 22"): stop those by PID, and
    # their parent when it is an ssh ControlMaster ("ssh: <ControlPath> [mux]"), whatever the
    # ControlPath looks like (ansible-core hashes it by default).
    # Only this machine's: a stock Debian chroot (tests/infra/stock-debian.sh, its own /run and PID namespace) has a hub
    # of its own with the same addresses, and its processes are in this /proc too (CI run ci-c: a pytest host's "down"
    # cut the chroot demo's connection to its node1 during its pip install). So a proxy counts only when it runs in this
    # hub's network namespace, a master only in this PID namespace.
    local addr=$1 p cmd parent pcmd hub_net my_pids
    hub_net=$(stat -L -c 'net:[%i]' "/run/netns/$HUB" 2>/dev/null || true)
    my_pids=$(readlink /proc/self/ns/pid)
    for p in /proc/[0-9]*; do
        cmd=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
        if [[ $cmd == "nc $addr 22 " || $cmd == "nc -w "*" $addr 22 " ]]; then
            if [[ -n $hub_net ]]; then
                [[ $(readlink "$p/ns/net" 2>/dev/null) == "$hub_net" ]] || continue
            else
                [[ $(readlink "$p/ns/pid" 2>/dev/null) == "$my_pids" ]] || continue
            fi
            parent=$(awk '/^PPid:/{print $2}' "$p/status" 2>/dev/null || true)
            pcmd=$({ tr '\0' ' ' <"/proc/$parent/cmdline"; } 2>/dev/null || true)
            kill -TERM "${p#/proc/}" 2>/dev/null || true
            [[ $pcmd == "ssh: "*"[mux]"* ]] && kill -TERM "$parent" 2>/dev/null
        elif [[ $cmd == "ssh: "*"/$addr-"*"[mux]"* ]]; then
            [[ $(readlink "$p/ns/pid" 2>/dev/null) == "$my_pids" ]] || continue
            kill -TERM "${p#/proc/}" 2>/dev/null || true
        fi
    done
    find "$DIR/cp" -type s -name "*$addr-*" -delete 2>/dev/null || true
    return 0
}

down_nodes() {
    # stop all named nodes in parallel; never fails
    local name pid deadline
    local -a pids=()
    for name in "$@"; do
        stop_launcher "$name"
        pid=$(cat "$DIR/nodes/$name.pid" 2>/dev/null || true)
        if [[ -n $pid ]] && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == systemd-nspawn ]]; then
            if ((STOP_GRACE > 0)); then kill -TERM "$pid" 2>/dev/null || true; else kill -KILL "$pid" 2>/dev/null || true; fi
            pids+=("$pid")
        fi
    done
    deadline=$((SECONDS + STOP_GRACE))
    for pid in "${pids[@]}"; do
        while [[ -d /proc/$pid ]] && ((SECONDS < deadline)); do sleep 0.05; done
        if [[ -d /proc/$pid ]]; then kill -KILL "$pid" 2>/dev/null || true; fi
    done
    for name in "$@"; do
        # anything left in the node's cgroups is a container process (nspawn was killed hard)
        for pid in $(cg_procs "$name"); do kill -KILL "$pid" 2>/dev/null || true; done
        local addr
        addr=$(cat "$DIR/nodes/$name.addr" 2>/dev/null || true)
        ip netns del "$(node_ns "$name")" 2>/dev/null || true
        [[ -n $addr ]] && kill_ssh_masters "$addr"
        local i
        for ((i = 0; i < 40; i++)); do
            [[ -z $(cg_procs "$name") ]] && break
            sleep 0.05
        done
        record_host_cpu "$name"
        cg_remove "$name"
        rm -f "$DIR/nodes/$name".{pid,addr,idx}
        if [[ -e $DIR/nodes/$name.launcher || -e $DIR/nodes/$name.upper ]]; then
            rm -rf "$DIR/nodes/$name.launcher" "$DIR/nodes/$name.upper" "$DIR/nodes/.#$name.upper"*
        fi
    done
    return 0
}

record_host_cpu() {
    # what the node's processes used of the CPU over its life (user + system, from its cgroup), one line per node in
    # $DIR/host-cpu.tsv: the suite is bound by the CPU, and the test hosts use about as much of it as the controller
    # (tests/run-all.sh prints the biggest users by host name)
    # (never fails: fleet.sh runs with errexit, and "up" stops a node's leftovers, whose cgroup may be gone, this way)
    local root usec
    for root in $(cg_roots); do
        [[ -r $root/$1/cpu.stat ]] || continue
        usec=$(awk '$1 == "usage_usec" {print $2}' "$root/$1/cpu.stat" 2>/dev/null || true)
        [[ -n $usec ]] || continue
        printf '%s\t%s\t%s\n' "$1" "$usec" "$(date +%s)" >>"$DIR/host-cpu.tsv"
        return 0
    done
    return 0
}

stop_launcher() {
    # A persistent node's launcher (up --persist) boots nspawn again after a reboot: stop it before
    # its nspawn, so the poweroff that "down" asks for is not taken for a reboot.
    local launcher cmd i
    launcher=$(cat "$DIR/nodes/$1.launcher" 2>/dev/null || true)
    [[ -n $launcher ]] || return 0
    cmd=$({ tr '\0' ' ' <"/proc/$launcher/cmdline"; } 2>/dev/null || true)
    [[ $cmd == *" fleet-launch-persist $1 "* ]] || return 0
    kill -TERM "$launcher" 2>/dev/null || true
    for ((i = 0; i < 40; i++)); do
        [[ -d /proc/$launcher ]] || break
        sleep 0.05
    done
    return 0
}

cmd_down() {
    (($# > 0)) || { log "usage: fleet.sh down NAME...|--all"; return 0; }
    [[ $(id -u) -eq 0 ]] || { log "down: not root, nothing done"; return 0; }
    local t0 names=() f ns all=0
    t0=$(date +%s.%N)
    if [[ $1 == --all ]]; then
        all=1
        for f in "$DIR"/nodes/*.pid "$DIR"/nodes/*.addr; do
            [[ -f $f ]] && names+=("$(basename "${f%.*}")")
        done
        mapfile -t names < <(printf '%s\n' "${names[@]}" | grep -v '^$' | sort -u || true)
        # leftovers (a namespace or cgroup without a node in this state directory) are removed only
        # when nothing runs in them: they may belong to nodes of another LLMOPS_FLEET_DIR
        local stray=()
        for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$NS_PREFIX" || true); do
            stray+=("${ns#"$NS_PREFIX"}")
        done
        for f in $(cg_roots); do
            [[ -d $f ]] && for ns in "$f"/*/; do [[ -d $ns ]] && stray+=("$(basename "$ns")"); done
        done
        for ns in $(printf '%s\n' "${stray[@]}" | grep -v '^$' | sort -u || true); do
            [[ " ${names[*]} " == *" $ns "* ]] && continue
            if [[ -z $(cg_procs "$ns") ]]; then
                names+=("$ns")
            else
                log "down --all: leaving node $ns alone (running, not in $DIR)"
            fi
        done
    else
        names=("$@")
    fi
    mkdir -p "$DIR" 2>/dev/null || true
    (
        exec 9>"$DIR/.lock" && flock -w 60 9
        if ((${#names[@]})); then down_nodes "${names[@]}"; fi
        # the hub goes with the last host on it, of any state directory (nothing is left behind after a demo)
        exec 8>/run/llmops-fleet-hub.lock && flock -w 60 8
        if ! ip netns list 2>/dev/null | grep -v "^$HUB" | grep -q '^llmops-'; then
            ip netns del "$HUB" 2>/dev/null || true
        fi
        if ((all)); then
            find "$DIR/cp" -type s -delete 2>/dev/null || true
        fi
    ) || true
    log "down: ${#names[@]} node(s) in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
    return 0
}

# ---------------------------------------------------------------- inventory
cmd_inventory() {
    local group=fleet
    if [[ ${1:-} == --group ]]; then
        group=$2
        shift 2
    fi
    (($# >= 2)) || die "usage: fleet.sh inventory [--group GROUP] FILE NAME..."
    local file=$1 name addr
    shift
    local common="-o ProxyCommand=\"ip netns exec $HUB nc %h %p\" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o ServerAliveInterval=2 -o ServerAliveCountMax=3"
    local conn="{{ llmops_fleet_connection | default(lookup('ansible.builtin.env', 'LLMOPS_FLEET_CONNECTION', default='ssh'), true) }}"
    mkdir -p "$(dirname "$file")"
    local tmp
    tmp=$(mktemp "$file.XXXXXX")
    if [[ $file == *.yml || $file == *.yaml ]]; then
        {
            echo "# written by tests/infra/fleet.sh: systemd-nspawn test hosts reached over SSH through netns $HUB"
            echo "all:"
            echo "  children:"
            echo "    $group:"
            echo "      hosts:"
            for name in "$@"; do
                addr=$(cat "$DIR/nodes/$name.addr" 2>/dev/null) || die "node '$name' is not up (no $DIR/nodes/$name.addr); run: fleet.sh up $name"
                echo "        $name:"
                echo "          ansible_host: $addr"
                echo "          ansible_paramiko_proxy_command: ip netns exec $HUB nc $addr 22"
            done
            echo "      vars:"
            echo "        ansible_connection: \"$conn\""
            echo "        ansible_user: root"
            echo "        ansible_port: 22"
            echo "        ansible_ssh_private_key_file: $KEY"
            echo "        ansible_python_interpreter: /usr/bin/python3"
            echo "        ansible_ssh_common_args: '$common'"
            echo "        ansible_ssh_pipelining: true"
            echo "        ansible_control_path_dir: $DIR/cp"
            echo "        ansible_paramiko_host_key_checking: false"
            echo "        ansible_paramiko_look_for_keys: false"
        } > "$tmp"
    else
        {
            echo "# written by tests/infra/fleet.sh: systemd-nspawn test hosts reached over SSH through netns $HUB"
            echo "[$group]"
            for name in "$@"; do
                addr=$(cat "$DIR/nodes/$name.addr" 2>/dev/null) || die "node '$name' is not up (no $DIR/nodes/$name.addr); run: fleet.sh up $name"
                echo "$name ansible_host=$addr ansible_paramiko_proxy_command=\"ip netns exec $HUB nc $addr 22\""
            done
            echo
            echo "[$group:vars]"
            echo "ansible_connection=\"$conn\""
            echo "ansible_user=root"
            echo "ansible_port=22"
            echo "ansible_ssh_private_key_file=$KEY"
            echo "ansible_python_interpreter=/usr/bin/python3"
            echo "ansible_ssh_common_args='$common'"
            echo "ansible_ssh_pipelining=true"
            echo "ansible_control_path_dir=$DIR/cp"
            echo "ansible_paramiko_host_key_checking=false"
            echo "ansible_paramiko_look_for_keys=false"
        } > "$tmp"
    fi
    mv "$tmp" "$file"
    mkdir -p "$DIR/cp"
    log "inventory: wrote $file ($# host(s), group $group)"
}

# ---------------------------------------------------------------- wheelhouse
cmd_wheelhouse() {
    (($# >= 2)) || die "usage: fleet.sh wheelhouse DIR [PIP-DOWNLOAD-OPTIONS] SPEC..."
    local dest=$1
    shift
    mkdir -p "$dest"
    local out
    # pip's output only matters when it fails (some machines' pip configs add a warning per index)
    if ! out=$("${LLMOPS_FLEET_PYTHON:-python3}" -m pip download -q --disable-pip-version-check --no-deps -d "$dest" "$@" 2>&1); then
        printf '%s\n' "$out" >&2
        die "pip download of '$*' into $dest failed (see pip's output above); check the spec and that PyPI is reachable from the controller"
    fi
    log "wheelhouse: $dest has $(find "$dest" -maxdepth 1 -name '*.whl' | wc -l) wheel(s)"
}

cmd_status() {
    local f name pid
    for f in "$DIR"/nodes/*.addr; do
        [[ -f $f ]] || continue
        name=$(basename "${f%.addr}")
        pid=$(cat "$DIR/nodes/$name.pid" 2>/dev/null || echo -)
        if [[ $pid != - && -d /proc/$pid ]]; then
            printf '%-20s %-15s pid %-8s running%s\n' "$name" "$(cat "$f")" "$pid" "$([[ -d $DIR/nodes/$name.upper ]] && echo ' persistent')"
        else
            printf '%-20s %-15s pid %-8s DEAD\n' "$name" "$(cat "$f")" "$pid"
        fi
    done
}

main() {
    local cmd=${1:-}
    shift || true
    case $cmd in
    deps) cmd_deps "$@" ;;
    rootfs) cmd_rootfs "$@" ;;
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    inventory) cmd_inventory "$@" ;;
    wheelhouse) cmd_wheelhouse "$@" ;;
    ssh)
        (($# >= 1)) || die "usage: fleet.sh ssh NAME [COMMAND...]"
        node_ssh "$@"
        ;;
    status) cmd_status ;;
    *)
        sed -n '6,43p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        [[ $cmd == -h || $cmd == --help || $cmd == help ]] && exit 0
        exit 2
        ;;
    esac
}

main "$@"
