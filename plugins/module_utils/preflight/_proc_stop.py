# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Stop processes the pre-flight found to be this server's orphans: SIGTERM, a bounded wait, then SIGKILL.

A pid is signalled only while it is still the process that was classified (same start time in /proc/<pid>/stat), so a
pid reused by an unrelated process in the meantime is never touched. The clock, sleep and kill are parameters for tests.
Standard library only (runs on the target, Python 3.9+).
"""

from __future__ import annotations

import os
import signal
import time

from ansible_collections.llmops.sglang.plugins.module_utils.host._procfs import parse_stat


def _state(pid, proc_root):
    """(start_time, state letter) of a live pid, or None when it is gone."""
    try:
        with open(os.path.join(proc_root, str(pid), 'stat')) as handle:
            text = handle.read()
    except OSError:
        return None
    try:
        state = text[text.rindex(')') + 2]
        return parse_stat(text)[1], state
    except (ValueError, IndexError):
        return None


def _same_alive(proc, proc_root):
    found = _state(proc.pid, proc_root)
    # A zombie has exited: it holds no device, port or memory any more.
    return found is not None and found[0] == proc.start_time and found[1] not in ('Z', 'X')


def _signal_all(procs, signum, kill, proc_root, outcome):
    for proc in procs:
        if not _same_alive(proc, proc_root):
            continue
        try:
            kill(proc.pid, signum)
            outcome[proc.pid]['signal'] = 'SIGTERM' if signum == signal.SIGTERM else 'SIGKILL'
        except ProcessLookupError:
            continue
        except PermissionError as exc:
            outcome[proc.pid]['error'] = 'not allowed to signal it: %s' % exc


def _wait_gone(procs, timeout, proc_root, clock, sleep):
    deadline = clock() + timeout
    left = [proc for proc in procs if _same_alive(proc, proc_root)]
    while left and clock() < deadline:
        sleep(0.1)
        left = [proc for proc in left if _same_alive(proc, proc_root)]
    return left


def stop(procs, term_timeout=10.0, kill_timeout=5.0, proc_root='/proc', kill=os.kill, clock=time.monotonic, sleep=time.sleep):
    """Stop PROCS (``_procfs.Proc``); return one entry per process: pid, title, user, signal sent last, stopped."""
    outcome = dict((proc.pid, {'pid': proc.pid, 'title': proc.title, 'user': proc.user, 'signal': None, 'stopped': False,
                               'error': None}) for proc in procs)
    _signal_all(procs, signal.SIGTERM, kill, proc_root, outcome)
    left = _wait_gone(procs, term_timeout, proc_root, clock, sleep)
    if left:
        _signal_all(left, signal.SIGKILL, kill, proc_root, outcome)
        left = _wait_gone(left, kill_timeout, proc_root, clock, sleep)
    still = set(proc.pid for proc in left)
    for pid, entry in outcome.items():
        entry['stopped'] = pid not in still
    return [outcome[proc.pid] for proc in procs]
