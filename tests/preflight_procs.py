# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Real processes for the pre-flight tests: holders of stand-in device files, re-parented orphans with SGLang's
process titles, processes of another user, listeners. Every process started here is killed by :meth:`Spawner.close`."""

from __future__ import annotations

import os
import signal
import shutil
import subprocess
import sys
import tempfile
import time

# The holder process (a standalone script: the molecule scenario `preflight` runs the same file on its test hosts).
HOLDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'preflight_holder.py')

NOBODY = 65534


class Spawner:
    """Starts holder processes and remembers their pids."""

    def __init__(self):
        # Another user's holder writes its ready file here too.
        self.workdir = tempfile.mkdtemp(prefix='llmops-preflight-', dir='/tmp')
        os.chmod(self.workdir, 0o1777)
        self.pids = []
        self.count = 0

    def start(self, paths, title='python3', detach=False, ignore_term=False, uid=None):
        """Start a holder of PATHS with argv[0]=TITLE; returns its pid (the detached grandchild's when DETACH)."""
        self.count += 1
        ready = os.path.join(self.workdir, 'ready-%d' % self.count)
        argv = [title, HOLDER, ready, '1' if detach else '0', '1' if ignore_term else '0'] + [str(p) for p in paths]
        preexec = (lambda: (os.setgid(uid), os.setuid(uid))) if uid is not None else None
        # Another user cannot run this venv's interpreter (under root's home); the system one it can.
        executable = sys.executable if uid is None else '/usr/bin/python3'
        proc = subprocess.Popen(argv, executable=executable, preexec_fn=preexec,  # pylint: disable=subprocess-popen-preexec-fn
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while not os.path.exists(ready):
            assert time.monotonic() < deadline, 'holder %s did not start' % title
            time.sleep(0.02)
        if detach:
            proc.wait(timeout=10)
        with open(ready) as handle:
            pid = int(handle.read())
        self.pids.append(pid)
        return pid

    def close(self):
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # Reap the ones that are our children (not detached), and wait until every one has died: a SIGKILLed process
        # is still in the test's cgroup until it has exited, and on a loaded machine that can take a while after kill()
        # returns (tests/conftest.py then named it as left running: "25058: " in CI, its command line already gone).
        for pid in self.pids:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                wait_gone(pid)
        shutil.rmtree(self.workdir, ignore_errors=True)


def wait_gone(pid, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open('/proc/%d/stat' % pid) as handle:
                state = handle.read().rsplit(')', 1)[1].split()[0]
        except OSError:
            return True
        if state in ('Z', 'X'):
            return True
        time.sleep(0.05)
    return False
