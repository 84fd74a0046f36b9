# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/infra/fleet.sh itself, on a real test host: a host booted again over its own leftovers comes up (fleet.sh runs
with errexit, and stopping the leftovers records the CPU of a node whose cgroup is gone), and each stopped host's CPU
over its life is recorded once in host-cpu.tsv (tests/run-all.sh prints the biggest)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: nvidia_fleet_host (conftest does it under pytest)
import nvidia_fleet_host as th  # noqa: E402  pylint: disable=wrong-import-position


def recorded(name):
    """host-cpu.tsv's lines for NAME: (CPU seconds, epoch seconds) each."""
    path = Path(th.fleet_dir()) / 'host-cpu.tsv'
    lines = path.read_text(encoding='utf-8').splitlines() if path.exists() else []
    return [(int(usec) / 1e6, int(when)) for host, usec, when in (line.split('\t') for line in lines) if host == name]


def test_a_host_booted_over_its_leftovers_comes_up_and_each_stop_records_its_cpu(tmp_path):
    name = 'fleetcpu%d' % (os.getpid() % 100000)
    nodes = Path(th.fleet_dir()) / 'nodes'
    nodes.mkdir(parents=True, exist_ok=True)
    # what a host killed with its controller leaves: its pid file, no process, no cgroup
    (nodes / (name + '.pid')).write_text('999999\n', encoding='utf-8')
    try:
        node = th.boot(name, tmp_path)
        assert node['leader']
    finally:
        th.down(name)
    lines = recorded(name)
    # the leftovers' stop found no cgroup (nothing recorded), the real host's stop recorded what its boot used
    assert len(lines) == 1, lines
    assert 0.05 < lines[0][0] < 60


def test_stopping_a_host_cuts_only_connections_through_its_own_hub(tmp_path):
    """fleet.sh down NAME ends the SSH proxies ('nc ADDR 22') to NAME's address that run in this machine's hub, and
    leaves one to the same address in another network namespace: a stock Debian chroot's fleet (its own /run, its own
    hub, the same addresses; CI run ci-c lost its demo host's connection mid-install to a pytest host's stop)."""
    # (not named llmops-*: fleet.sh keeps its hub while any such namespace is left)
    name, other = 'fleetnc%d' % (os.getpid() % 100000), 'fleettest-otherhub-%d' % os.getpid()
    node = th.boot(name, tmp_path)
    addr = (Path(th.fleet_dir()) / 'nodes' / (name + '.addr')).read_text(encoding='utf-8').strip()
    procs = []
    try:
        subprocess.run(['ip', 'netns', 'add', other], check=True)
        subprocess.run(['ip', '-n', other, 'link', 'set', 'lo', 'up'], check=True)
        subprocess.run(['ip', '-n', other, 'addr', 'add', addr + '/32', 'dev', 'lo'], check=True)
        # the other fleet's "node": something listening on ADDR:22 there, and a proxy connected to it
        procs.append(subprocess.Popen(['ip', 'netns', 'exec', other, 'nc', '-l', addr, '22'], stdout=subprocess.DEVNULL))
        time.sleep(0.5)
        theirs = subprocess.Popen(['ip', 'netns', 'exec', other, 'nc', addr, '22'], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        # ours: a proxy through this machine's hub to the real host's sshd (it waits for our SSH banner)
        ours = subprocess.Popen(['ip', 'netns', 'exec', 'llmops-hub', 'nc', addr, '22'], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
        procs += [theirs, ours]
        time.sleep(1)
        assert theirs.poll() is None and ours.poll() is None
        th.down(name)
        for dummy in range(50):
            if ours.poll() is not None:
                break
            time.sleep(0.1)
        assert (ours.poll() is not None, theirs.poll()) == (True, None)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        subprocess.run(['ip', 'netns', 'del', other], check=False)
        th.down(name)  # last: the hub goes with the last host on it (CI run ci-d: this test ran last and left it)
    assert not Path('/run/netns/' + other).exists()
