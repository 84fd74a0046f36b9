#!/usr/bin/env bash
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Proof that README's commands work on a stock Debian 12 with nothing but root and the network: builds a fresh
# Debian 12 root file system as a standard installation has it (mmdebstrap --variant=standard: Debian's python3 3.11,
# no pip, no venv module, no pyenv, no Python >= 3.12), copies this checkout into it and runs the command in it
# with chroot, in PID and mount namespaces of its own (/sys and /dev bind-mounted; the network is the machine's).
#
#   bash tests/infra/stock-debian.sh                          # bash demo/run.sh
#   bash tests/infra/stock-debian.sh bash demo/run.sh crash
#   bash tests/infra/stock-debian.sh bash tests/run-all.sh    # the whole suite (about an hour on 2 busy cores)
#
# Root only. State: ${LLMOPS_STOCK_DIR:-/var/tmp/llmops-stock-debian} (the rootfs is built once, ~1-3 min; the
# checkout is copied again every run). LLMOPS_STOCK_SAVE=DIR keeps the run for a test to read afterwards: what it
# printed (screen.txt, stdout and stderr as they interleave), its exit code (rc), its state directory (fleet-dir.txt),
# the demo's full logs (demo-*.log) and the network namespaces right after it (netns-after.txt);
# tests/integration/test_demo.py reads it (LLMOPS_DEMO_READY_RUN). The hosts it boots use the state directory /var/tmp/llmops-fleet-stock inside
# the chroot: their namespaces and cgroups get that directory's own prefixes, apart from any other fleet.
# tests/run-all.sh (so CI) runs the demo this way in a fresh state directory when the steps before it took at most
# 30 minutes (10-17 min here: it installs everything from scratch); tests/integration/test_demo.py also runs the demo
# on this machine's Debian Python 3.11 (ansible-core 2.19).
set -euo pipefail

[ "$(id -u)" -eq 0 ] || { echo "stock-debian.sh: run it as root (mmdebstrap, chroot, mounts)" >&2; exit 1; }
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
state=${LLMOPS_STOCK_DIR:-/var/tmp/llmops-stock-debian}
root=$state/rootfs
(($# > 0)) || set -- bash demo/run.sh

command -v mmdebstrap >/dev/null || bash "$repo/tests/infra/fleet.sh" deps
if [ ! -f "$root/.complete" ]; then
  rm -rf "$root"
  mkdir -p "$state"
  mmdebstrap --variant=standard --include=ca-certificates,git bookworm "$root" http://deb.debian.org/debian \
    "deb http://deb.debian.org/debian-security bookworm-security main"
  touch "$root/.complete"
fi

# what "stock" means here, checked, not assumed
chroot "$root" /usr/bin/python3 -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version'
if chroot "$root" sh -c 'command -v python3.12 || command -v pyenv || python3 -c "import pip" 2>/dev/null'; then
  echo "stock-debian.sh: $root is not a stock Debian 12 (python3.12, pyenv or pip found)" >&2
  exit 1
fi

cp -L /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's own trust for its network (a TLS-intercepting proxy's CA, pip's cert setting), as any machine on
# that network would be set up; nothing else of the machine goes in.
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1
fi
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$root/etc/pip.conf"

rm -rf "$root/root/llmops.sglang" "$root/root/llmops-run"
mkdir -p "$root/root/llmops.sglang"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -C "$root/root/llmops.sglang" -xf -

# an installed system gets its machine ID on first boot; systemd-nspawn needs the host's
[ -s "$root/etc/machine-id" ] || tr -d '-' </proc/sys/kernel/random/uuid >"$root/etc/machine-id"

echo "stock-debian.sh: running '$*' in $root (Debian $(cat "$root/etc/debian_version"), $(chroot "$root" python3 --version))"
# Its own PID and mount namespaces: fleet.sh finds processes through /proc (ssh masters of a host's address, a
# host's leftovers), so the chroot must see only its own; its mounts (/proc, /sys, /dev, a /run for its network
# namespaces) end with it, and so does every process it started.
set +e
# shellcheck disable=SC2016  # the inner script gets its values as arguments
unshare --pid --fork --mount --propagation private -- bash -c '
  root=$1 save=$2; shift 2
  mount --bind "$root" "$root"  # / of the chroot is a mount point of its own (fleet.sh makes it a slave mount)
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs tmpfs "$root/run"
  exec chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    TERM=dumb LLMOPS_DEMO_KEEP=0 LLMOPS_FLEET_DIR=/var/tmp/llmops-fleet-stock SAVE=$save bash -c "
      cd /root/llmops.sglang || exit 1
      if [ -n \"\$SAVE\" ]; then
        mkdir -p /root/llmops-run
        \"\$@\" 2>&1 | tee /root/llmops-run/screen.txt; rc=\${PIPESTATUS[0]}
        echo \$rc >/root/llmops-run/rc
        ip netns list >/root/llmops-run/netns-after.txt 2>&1
        echo \"\$LLMOPS_FLEET_DIR\" >/root/llmops-run/fleet-dir.txt
        cp \"\$LLMOPS_FLEET_DIR\"/demo-*.log /root/llmops-run/ 2>/dev/null
      else
        \"\$@\"; rc=\$?
      fi
      bash tests/infra/fleet.sh down --all >/dev/null 2>&1
      exit \$rc" stock-debian "$@"
' stock-debian "$root" "${LLMOPS_STOCK_SAVE:+1}" "$@"
rc=$?
set -e
if [ -n "${LLMOPS_STOCK_SAVE:-}" ]; then
  rm -rf "$LLMOPS_STOCK_SAVE"
  mkdir -p "$(dirname "$LLMOPS_STOCK_SAVE")"
  if [ -d "$root/root/llmops-run" ]; then cp -a "$root/root/llmops-run" "$LLMOPS_STOCK_SAVE"; fi
fi
echo "stock-debian.sh: '$*' exited with $rc"
exit "$rc"
