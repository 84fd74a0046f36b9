# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Processes the tests start, and proof that none outlives its test.

* :func:`spawn` starts a long-lived helper (a stand-in server, a log writer) in its own process group, with the
  kernel told to kill it if the process that started it dies (``PR_SET_PDEATHSIG``), and stops the whole group when
  the ``with`` block ends, also when the test failed: SIGTERM, a bounded wait, then SIGKILL.
* :class:`TestCgroup` puts the running test into a cgroup of its own (cgroup v2: the unified hierarchy of a hybrid
  host, or the whole tree of a pure v2 host). Every process the test starts lands there, double-forked daemons too, so
  what is still in it when the test ends was left behind: it is named, killed, and the test fails. ansible-test runs
  each unit test in a fork that ends with ``os._exit``, so a module-scoped fixture's teardown never runs there: this is
  what found the stand-in servers the benchmark module tests left running for the rest of the suite.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import itertools
import os
import signal
import subprocess
import time
from typing import Iterator, List, Optional, Tuple

PR_SET_PDEATHSIG = 1
_LIBC = None


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the process that forked it ends (Linux prctl)."""
    global _LIBC  # pylint: disable=global-statement
    if _LIBC is None:
        _LIBC = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6', use_errno=True)
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def stop_group(proc: subprocess.Popen, grace: float = 5.0, first: int = signal.SIGTERM) -> Optional[int]:
    """``first`` (SIGTERM) to the process group of ``proc``, up to ``grace`` seconds, then SIGKILL; reaps ``proc``."""
    for sig, wait in ((first, grace), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            return proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    return proc.poll()


@contextlib.contextmanager
def spawn(argv, grace: float = 5.0, stop: int = signal.SIGTERM, **popen_kw) -> Iterator[subprocess.Popen]:
    """``with spawn([...]) as proc:`` a helper process that cannot outlive the block or the test process; ``stop`` is
    the signal that ends it (SIGINT for the SGLang stand-in, whose SIGTERM is SGLang's drain: 5 s per look)."""
    proc = subprocess.Popen(argv, start_new_session=True, preexec_fn=_die_with_parent, **popen_kw)  # pylint: disable=subprocess-popen-preexec-fn
    try:
        yield proc
    finally:
        stop_group(proc, grace, stop)


# ------------------------------------------------------------------------------------------------ one cgroup per test

def _cgroup2_root() -> Optional[str]:
    """The writable cgroup v2 mount: /sys/fs/cgroup/unified on a hybrid host, /sys/fs/cgroup on a pure v2 host."""
    for root in ('/sys/fs/cgroup/unified', '/sys/fs/cgroup'):
        if os.path.isfile(os.path.join(root, 'cgroup.procs')) and os.path.isfile(os.path.join(root, 'cgroup.stat')) \
                and os.access(root, os.W_OK):
            return root
    return None


def own_cgroup() -> Optional[str]:
    """This process's path in the cgroup v2 hierarchy (the ``0::`` line of /proc/self/cgroup)."""
    with open('/proc/self/cgroup', encoding='ascii') as handle:
        for line in handle:
            if line.startswith('0::'):
                return line[3:].strip()
    return None


def _procs(path: str) -> List[int]:
    """Every process in the cgroup ``path`` and its descendants."""
    found = []
    for directory, _subdirs, files in os.walk(path):
        if 'cgroup.procs' in files:
            with contextlib.suppress(OSError), open(os.path.join(directory, 'cgroup.procs'), encoding='ascii') as handle:
                found.extend(int(word) for word in handle.read().split())
    return found


def describe(pid: int) -> str:
    """``pid: command line`` as /proc shows it (or what is known once it is gone)."""
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as handle:
            words = handle.read().split(b'\0')
        return '%d: %s' % (pid, b' '.join(w for w in words if w).decode('utf-8', 'replace')[:300])
    except OSError:
        return '%d: (exited)' % pid


class TestCgroup:
    """A cgroup that holds one test: ``enter()`` moves this process in, ``leave()`` moves it back and returns what the
    test left running there (after killing it)."""

    __test__ = False  # not a pytest test class
    _serial = itertools.count()

    def __init__(self, label: str) -> None:
        root = _cgroup2_root()
        origin = own_cgroup() if root else None
        self.available = bool(root and origin is not None)
        self.origin = os.path.join(root, origin.lstrip('/')) if self.available else ''
        name = '%d-%d-%s' % (os.getpid(), next(self._serial), ''.join(c if c.isalnum() else '_' for c in label)[:60])
        # below the cgroup the test runs in (tests/run-all.sh's step), so the step's CPU time and its leftovers check
        # still count what the test ran
        self.path = os.path.join(self.origin, 'llmops-tests', name) if self.available else ''

    def enter(self) -> bool:
        if not self.available:
            return False
        for attempt in range(3):
            try:
                os.makedirs(self.path, exist_ok=True)
                with open(os.path.join(self.path, 'cgroup.procs'), 'w', encoding='ascii') as handle:
                    handle.write(str(os.getpid()))
                return True
            except FileNotFoundError:
                # another test of the same cgroup removed the empty llmops-tests between the two mkdirs: again
                if attempt == 2:
                    break
            except OSError:
                break
        self.available = False
        return False

    def leave(self, wait: float = 5.0) -> List[str]:
        """Back to the original cgroup; kill and name every process the test left in its own."""
        if not self.available:
            return []
        with open(os.path.join(self.origin, 'cgroup.procs'), 'w', encoding='ascii') as handle:
            handle.write(str(os.getpid()))
        left = [pid for pid in _procs(self.path) if pid != os.getpid()]
        names = [describe(pid) for pid in left]
        deadline = time.monotonic() + wait
        while left and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
            left = _procs(self.path)
        for directory, _subdirs, _files in sorted(os.walk(self.path), key=lambda entry: -len(entry[0])):
            with contextlib.suppress(OSError):
                os.rmdir(directory)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(self.path))  # llmops-tests, when no other test of this cgroup is in it
        return names


def listeners() -> List[Tuple[str, int]]:
    """TCP sockets in LISTEN state in this network namespace: (address, port)."""
    found = []
    for table, width in (('/proc/net/tcp', 8), ('/proc/net/tcp6', 32)):
        with contextlib.suppress(OSError), open(table, encoding='ascii') as handle:
            next(handle)
            for line in handle:
                fields = line.split()
                if fields[3] == '0A':
                    address, port = fields[1].split(':')
                    found.append((address[:width], int(port, 16)))
    return sorted(found)
