# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller side of llmops.sglang.sglang_host_lock: fills in who we are, waits (bounded) for another run's lock,
and takes over a lock whose holder is a dead ansible-playbook process of this same controller."""

from __future__ import annotations

import getpass
import os
import socket
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmops.sglang.plugins.module_utils.host._procfs import parse_stat

display = Display()

MODULE = 'llmops.sglang.sglang_host_lock'


def process_start(pid, proc='/proc'):
    """Start time of ``pid`` in clock ticks since boot (field 22 of /proc/<pid>/stat), or '' when it is gone."""
    try:
        with open('%s/%d/stat' % (proc, pid), 'rb') as handle:
            stat = handle.read().decode('ascii', 'replace')
    except OSError:
        return ''
    return str(parse_stat(stat)[1])


def this_controller(play=''):
    """The holder record of this run: forked workers have the ansible-playbook process as parent."""
    pid = os.getppid()
    return dict(controller=socket.gethostname(), user=getpass.getuser(), pid=pid, pid_start=process_start(pid),
                play=play)


def holder_gone(holder, controller, proc='/proc'):
    """True only when ``holder`` ran on this controller and its process no longer exists (pid gone or reused)."""
    if not holder or holder.get('controller') != controller or not holder.get('pid'):
        return False
    return process_start(int(holder['pid']), proc) != holder.get('pid_start')


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if any(k.startswith('_') for k in args):
            return dict(failed=True, msg='%s: options starting with _ are internal' % MODULE)
        holder = this_controller()
        holder.update((k, v) for k, v in (args.get('holder') or {}).items() if v is not None)
        args['holder'] = holder
        timeout = float(args.get('timeout', 600))
        sleep = max(0.2, float(args.get('sleep', 2)))
        host = task_vars.get('inventory_hostname', '?')
        start = time.monotonic()
        announced = None
        waited_for = None
        while True:
            res = self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars)
            if res.get('failed') or res.get('action') != 'wait' or self._task.check_mode:
                break
            held = res.get('held_by') or {}
            waited_for = held.get('holder') or waited_for
            if holder_gone(held.get('holder'), holder['controller']):
                # our own controller's earlier run was killed: its lock is ours to take over, now
                args['_break_token'] = held.get('token')
                continue
            if time.monotonic() - start >= timeout:
                res.update(failed=True, msg=(
                    'the SGLang lock %s on %s is %s; waited %.0f s (timeout). Wait for that run to finish, or, if it '
                    'is gone, remove %s on the host (it expires by itself at the end of its lease)'
                    % (args['path'], host, res.get('reason'), time.monotonic() - start, args['path'])))
                break
            if announced != held.get('token'):
                display.display('%s: waiting for the SGLang lock, %s' % (host, res.get('reason')))
                announced = held.get('token')
            time.sleep(sleep)
        args.pop('_break_token', None)
        res['waited'] = round(time.monotonic() - start, 1) if res.get('acquired') or res.get('failed') else 0.0
        # whose run this one waited for: it may have deployed meanwhile (the deploy says so)
        res['waited_for'] = waited_for if res.get('acquired') else None
        res.pop('invocation', None)
        result.update(res)
        return result
