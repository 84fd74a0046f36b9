# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Runtime faults of the SGLang stand-in (test tooling, NOT SGLang): what goes wrong after a start, replayed.

* A hang after N generation requests while ``/health`` stays 200 (sgl-project/sglang#22779: after a ``kill -9`` and a
  relaunch on the same port, SGLang hung after ~80-140 requests with its health green).
* Recorded kernel-log lines (an Xid of one of the server's GPUs, tests/fixtures/nvidia_health) appended to the host's
  kernel-log stand-in file after N generation requests (0: once ready).
* Scheduler children (``sglang::scheduler_TP<i>``, as SGLang titles them) that hold the GPU device nodes; with SIGTERM
  ignored while loading (sgl-project/sglang#16145) they ignore it too, so only the unit's SIGKILL after its stop timeout
  ends them, as it must end SGLang's children that outlive their parent (#23627, #30110).

A fault can be *armed by a file*: it fires only when that file exists at the start, and the file is removed when the
fault fires, so the restart that follows runs clean (a clean restart cured #22779's hang). Standard library only;
Python 3.9+ (the test hosts' python3).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time


def armed(path):
    """Whether a fault armed by ``path`` (None: always armed) may fire in this run."""
    return path is None or os.path.exists(path)


def disarm(path):
    if path:
        try:
            os.unlink(path)
        except OSError:
            pass


class Faults:
    """The runtime faults of one stand-in run, counted over its generation requests."""

    def __init__(self, args):
        self.hang_after = args.hang_after if args.hang_after is not None and armed(args.hang_armed_by) else None
        self.hang_armed_by = args.hang_armed_by
        self.kernel_log = args.kernel_log
        self.xid_lines = args.xid_lines
        self.xid_after = args.xid_after if args.xid_lines and args.kernel_log and armed(args.xid_armed_by) else None
        self.xid_armed_by = args.xid_armed_by
        self.requests = 0
        self.hanging = False
        self.lock = threading.Lock()
        self.note = lambda message: None  # the stand-in's marked line writer, set by the stand-in

    def request(self):
        """Count one generation request; True when it must hang (and every later one)."""
        with self.lock:
            self.requests += 1
            if self.xid_after is not None and self.requests > self.xid_after:
                self.write_xid()
            if self.hang_after is not None and self.requests > self.hang_after and not self.hanging:
                self.hanging = True
                disarm(self.hang_armed_by)
                self.note('generation hangs from request %d on (--hang-after %d), at %.3f' % (self.requests, self.hang_after, time.time()))
            return self.hanging

    def ready(self):
        if self.xid_after == 0:
            with self.lock:
                self.write_xid()

    def write_xid(self):
        """Append the recorded kernel-log lines to the kernel-log stand-in, once per run."""
        with open(self.xid_lines, 'rb') as source:
            data = source.read()
        with open(self.kernel_log, 'ab') as sink:
            sink.write(data if data.endswith(b'\n') else data + b'\n')
        self.xid_after = None
        disarm(self.xid_armed_by)
        self.note('appended %s to the kernel log %s, at %.3f' % (self.xid_lines, self.kernel_log, time.time()))


# --------------------------------------------------------------------------- scheduler children

class Children:
    """SGLang's scheduler processes: one per TP rank, each holding the GPU device nodes."""

    def __init__(self):
        self.procs = []

    def spawn(self, count, devices, ignore_sigterm):
        for rank in range(count):
            argv = ['sglang::scheduler_TP%d' % rank, os.path.abspath(__file__), '--child', '1' if ignore_sigterm else '0'] + list(devices)
            self.procs.append(subprocess.Popen(argv, executable=sys.executable, stdin=subprocess.DEVNULL,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True))

    def kill(self):
        """SIGKILL every child (SGLang's kill_process_tree) and reap it."""
        for proc in self.procs:
            if proc.poll() is None:
                try:
                    proc.kill()
                except OSError:
                    pass
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.procs = []


def child_main(argv):
    """A scheduler child: open the device nodes, ignore SIGTERM when told to, sleep until killed."""
    ignore = argv[0] == '1'
    held = []
    for path in argv[1:]:
        try:
            held.append(open(path, 'rb'))  # pylint: disable=consider-using-with
        except OSError:
            pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN if ignore else signal.SIG_DFL)
    while True:
        time.sleep(3600)


if __name__ == '__main__' and len(sys.argv) > 1 and sys.argv[1] == '--child':
    child_main(sys.argv[2:])
