# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/infra/suite_check.py, the last step of tests/run-all.sh, against a real step cgroup holding a real daemon that
listens on a real port: it names the process and the listener with the step that started them, kills them, and passes
once nothing is left."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
CHECK = TESTS / 'infra' / 'suite_check.py'
sys.path.insert(0, str(TESTS))
from procs import own_cgroup  # noqa: E402  pylint: disable=wrong-import-position

# a daemon as a leaked stand-in server: re-parented, listening, its own session
LISTENER = ('import os, socket, sys, time\n'
            'if os.fork():\n    os._exit(0)\n'
            'os.setsid()\n'
            's = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()\n'
            'print(os.getpid(), s.getsockname()[1], flush=True)\n'
            'os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n'
            'time.sleep(60)\n')


def cgroup_root():
    for root in ('/sys/fs/cgroup/unified', '/sys/fs/cgroup'):
        if os.path.isfile(os.path.join(root, 'cgroup.procs')) and os.path.isfile(os.path.join(root, 'cgroup.stat')) \
                and os.access(root, os.W_OK):
            return root
    return None


def run_check(*args):
    done = subprocess.run([sys.executable, str(CHECK)] + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, check=False, timeout=60)
    return done.returncode, done.stdout.decode()


@pytest.fixture
def steps(tmp_path):
    root = cgroup_root()
    if root is None or own_cgroup() is None:
        pytest.skip('no writable cgroup v2 hierarchy on this machine')
    path = Path(root) / ('llmops-check-test-%d' % os.getpid())
    (path / 'fake-step').mkdir(parents=True)
    yield path
    run_check('kill', tmp_path / 'none.json', '--cgroups', path)
    for directory in sorted(path.rglob('*'), key=lambda p: -len(str(p))) + [path]:
        if directory.is_dir():
            directory.rmdir()


def test_a_step_that_left_a_listening_daemon_is_named_and_the_daemon_killed(tmp_path, steps):
    before = tmp_path / 'before.json'
    assert run_check('snapshot', before, '--fleet-dir', tmp_path / 'fleet') == (0, '')
    # the daemon is started from inside the step's cgroup, as run-all.sh's run_step does with cg_enter
    starter = 'import os; open(%r, "w").write(str(os.getpid())); exec(%r)' % (str(steps / 'fake-step' / 'cgroup.procs'),
                                                                              LISTENER)
    out = subprocess.run([sys.executable, '-c', starter], stdout=subprocess.PIPE, check=True, timeout=30).stdout.split()
    pid, port = int(out[0]), int(out[1])

    rc, text = run_check('check', before, '--cgroups', steps, '--fleet-dir', tmp_path / 'fleet')
    lines = text.splitlines()
    assert rc == 1
    assert [line for line in lines if line.startswith('left running: process %d:' % pid)] == \
        [line for line in lines if line.endswith('started by step fake-step') and 'process' in line]
    listener = [line for line in lines if line.startswith('left running: listener') and ':%d (%d:' % (port, pid) in line]
    assert len(listener) == 1 and listener[0].endswith('started by step fake-step')
    assert lines[-1].startswith('leftovers: ')
    deadline = time.monotonic() + 5
    while os.path.exists('/proc/%d' % pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists('/proc/%d' % pid)

    # once killed, the step has left nothing (other tests running beside this one may hold listeners of their own)
    _rc, text = run_check('check', before, '--cgroups', steps, '--fleet-dir', tmp_path / 'fleet')
    assert [line for line in text.splitlines() if 'fake-step' in line or ':%d ' % port in line] == []


def test_leftovers_recorded_during_the_run_count_too(tmp_path, steps):
    before = tmp_path / 'before.json'
    run_check('snapshot', before, '--fleet-dir', tmp_path / 'fleet')
    also = tmp_path / 'leftovers.txt'
    also.write_text('test host mol-1, started by step molecule\n')
    rc, text = run_check('check', before, '--cgroups', steps, '--fleet-dir', tmp_path / 'fleet', '--also', also)
    assert rc == 1
    assert 'left running: test host mol-1, started by step molecule' in text.splitlines()


def test_a_new_test_host_is_a_leftover(tmp_path, steps):
    fleet = tmp_path / 'fleet'
    (fleet / 'nodes').mkdir(parents=True)
    (fleet / 'nodes' / 'old1.pid').write_text('1\n')
    before = tmp_path / 'before.json'
    run_check('snapshot', before, '--fleet-dir', fleet)
    (fleet / 'nodes' / 'new1.pid').write_text('1\n')
    rc, text = run_check('check', before, '--cgroups', steps, '--fleet-dir', fleet)
    assert rc == 1
    assert [line for line in text.splitlines() if line.startswith('left running: test host')] == ['left running: test host new1']


def test_a_listener_of_this_test_process_is_not_a_step_leftover(tmp_path, steps):
    # a socket opened after the snapshot by a process outside every step's cgroup is named without a step
    before = tmp_path / 'before.json'
    run_check('snapshot', before, '--fleet-dir', tmp_path / 'fleet')
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        sock.listen()
        port = sock.getsockname()[1]
        rc, text = run_check('check', before, '--cgroups', steps, '--fleet-dir', tmp_path / 'fleet')
    mine = [line for line in text.splitlines() if ':%d (' % port in line]
    assert rc == 1 and len(mine) == 1 and 'started by step' not in mine[0]


def test_only_this_suites_namespaces_count_not_those_of_another_fleet_on_the_machine():
    sys.path.insert(0, str(CHECK.parent))
    import suite_check  # pylint: disable=import-outside-toplevel
    own = suite_check.fleet_prefix('/var/tmp/llmops-ci/fleet')
    expected = 'llmops-x%s-' % subprocess.run("realpath -m /var/tmp/llmops-ci/fleet | sha256sum | cut -c1-6", shell=True,
                                              stdout=subprocess.PIPE, check=True).stdout.decode().strip()
    assert own == expected  # the prefix tests/infra/fleet.sh gives that state directory
    assert not suite_check.foreign(own + 'mol-1', '/var/tmp/llmops-ci/fleet')
    assert suite_check.foreign('llmops-xabcdef-node1', '/var/tmp/llmops-ci/fleet')
    assert suite_check.foreign('llmops-n-node1', '/var/tmp/llmops-ci/fleet')  # the demo's default state directory
    assert not suite_check.foreign('llmops-n-node1', '/var/tmp/llmops-fleet')
    assert not suite_check.foreign('probe-h1', '/var/tmp/llmops-ci/fleet')  # anything else a test made counts


def test_a_mount_counts_only_below_the_directories_the_suite_works_in():
    sys.path.insert(0, str(CHECK.parent))
    import suite_check  # pylint: disable=import-outside-toplevel
    scope = ['/var/tmp/llmops-ci', '/run/netns']
    assert suite_check.in_scope('/var/tmp/llmops-ci/stock-debian/root/proc', scope)
    assert suite_check.in_scope('/run/netns/llmops-x123456-a', scope)
    assert not suite_check.in_scope('/var/tmp/llmops-ci-other/x', scope)
    assert not suite_check.in_scope('/var/tmp/fleet-guard/rootfs.new/sys', scope)  # another run's build on the machine
    assert suite_check.in_scope('/anything', [])


def test_the_netns_directory_mount_iproute2_makes_once_per_boot_is_no_leftover_but_a_namespace_below_it_is():
    """A fresh machine: the suite's first `ip netns add` made /run/netns a mount (the leftovers step failed on it, run
    ci-base 2026-12-04); a namespace's mount left below it still counts."""
    sys.path.insert(0, str(CHECK.parent))
    import suite_check  # pylint: disable=import-outside-toplevel
    fleet = '/var/tmp/llmops-ci/fleet'
    own = suite_check.fleet_prefix(fleet) + 'mol-1'
    before = ['/', '/proc', '/run']
    now = before + ['/run/netns', '/run/netns/' + own, '/run/netns/llmops-n-node1', '/var/tmp/other/x']
    scope = ['/var/tmp/llmops-ci', '/run/netns']
    assert suite_check.new_mounts(before, now, scope, fleet) == ['/run/netns/' + own]
