# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/procs.py with real processes: what a test leaves running is found (daemons too), named and killed; a spawned
helper dies with its block and with the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
from procs import TestCgroup, spawn, stop_group  # noqa: E402  pylint: disable=wrong-import-position


def alive(pid):
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open('/proc/%d/stat' % pid, encoding='ascii') as handle:
            return handle.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def gone_within(pid, seconds):
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


# A daemon as the leaked stand-ins were: its parent exits without stopping it, it is re-parented and lives on.
DAEMON = ('import os, sys, time\n'
          'if os.fork():\n    os._exit(0)\n'
          'os.setsid()\n'
          'print(os.getpid(), flush=True)\n'
          'os.dup2(os.open(os.devnull, os.O_WRONLY), 1)\n'
          'time.sleep(60)\n')


def test_a_daemon_the_test_left_is_named_and_killed():
    cgroup = TestCgroup('leak-probe')
    if not cgroup.enter():
        pytest.skip('no writable cgroup v2 hierarchy on this machine')
    try:
        out = subprocess.run([sys.executable, '-c', DAEMON + '# llmops-leak-probe'], stdout=subprocess.PIPE, check=True,
                             timeout=30).stdout
    finally:
        left = cgroup.leave()
    daemon = int(out.split()[0])
    assert [entry.split(':', 1)[0] for entry in left] == [str(daemon)]
    assert 'llmops-leak-probe' in left[0]
    assert gone_within(daemon, 5)
    assert not os.path.exists(cgroup.path)


def test_a_test_that_stopped_its_processes_leaves_nothing():
    cgroup = TestCgroup('clean-probe')
    if not cgroup.enter():
        pytest.skip('no writable cgroup v2 hierarchy on this machine')
    try:
        with spawn([sys.executable, '-c', 'import time; time.sleep(60)']) as proc:
            assert proc.poll() is None
    finally:
        left = cgroup.leave()
    assert left == []


def test_spawn_stops_the_whole_process_group_when_the_block_fails():
    script = 'import subprocess, sys, time; c = subprocess.Popen(["sleep", "60"]); print(c.pid, flush=True); time.sleep(60)'
    with pytest.raises(RuntimeError):
        with spawn([sys.executable, '-c', script], stdout=subprocess.PIPE) as proc:
            grandchild = int(proc.stdout.readline())
            raise RuntimeError('the test failed here')
    assert proc.returncode is not None
    assert gone_within(grandchild, 5)


def test_a_spawned_helper_dies_with_the_process_that_started_it():
    # the starter ends with os._exit, as ansible-test's fork of a test does: no finally, no fixture teardown runs
    starter = ('import os, sys; sys.path.insert(0, %r)\n'
               'from procs import spawn\n'
               'block = spawn(["sleep", "60"]); proc = block.__enter__()\n'
               'print(proc.pid, flush=True); os._exit(0)\n') % str(TESTS)
    out = subprocess.run([sys.executable, '-c', starter], stdout=subprocess.PIPE, check=True, timeout=30).stdout
    assert gone_within(int(out), 5)


def test_stop_group_kills_a_helper_that_ignores_sigterm():
    ignore = 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print("up", flush=True); time.sleep(60)'
    proc = subprocess.Popen([sys.executable, '-c', ignore], start_new_session=True, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b'up\n'
    started = time.monotonic()
    assert stop_group(proc, grace=0.5) == -9
    assert time.monotonic() - started < 5


def test_stop_group_sends_the_first_signal_asked_for():
    # the SGLang stand-in drains on SIGTERM (a look every 5 s) and exits at once on SIGINT (its own handler, as here: a
    # process started in the background of a shell inherits SIGINT ignored, so Python's default handler is not there)
    script = ('import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); '
              'signal.signal(signal.SIGINT, lambda *_: sys.exit(3)); print("up", flush=True); time.sleep(60)')
    proc = subprocess.Popen([sys.executable, '-c', script], start_new_session=True, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b'up\n'
    started = time.monotonic()
    assert stop_group(proc, grace=30, first=signal.SIGINT) == 3
    assert time.monotonic() - started < 5
