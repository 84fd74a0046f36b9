# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of llmops.sglang.sglang_host_lock: who holds a lock, and when its holder is gone (real processes)."""

from __future__ import annotations

import os
import subprocess
import sys

from ansible_collections.llmops.sglang.plugins.action.sglang_host_lock import holder_gone, process_start, this_controller


def test_holder_gone_only_for_a_dead_process_of_this_controller():
    child = subprocess.Popen([sys.executable, '-c', 'pass'])
    start = process_start(child.pid)
    child.wait()
    me = this_controller()
    assert me['pid'] == os.getppid() and me['pid_start'] == process_start(os.getppid())
    alive = dict(me)
    dead = dict(me, pid=child.pid, pid_start=start)
    reused = dict(me, pid_start='1')           # the pid exists but started at another time: not the holder
    elsewhere = dict(dead, controller='some-other-controller')
    assert [holder_gone(h, me['controller']) for h in (alive, dead, reused, elsewhere)] == [False, True, True, False]
