# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Test-only callback (not part of the collection): saves each host's llmops.sglang.wait_for_sglang result as JSON.

The tests' ansible-playbook runs enable it (tests/wait_live.py, callback_env): ANSIBLE_CALLBACK_PLUGINS=tests/callback_plugins,
ANSIBLE_CALLBACKS_ENABLED=wait_results, and LLMOPS_WAIT_RESULTS=<directory>. When a host's wait task ends (ok, failed,
ignored or unreachable) its result, as `register:` would hold it, is written to <directory>/<host>.json, in the
controller's main process: no task of the play, so no module run, copies it. At the end of the play it writes
<directory>/<host>.seconds.json, {task name: seconds}, for each task of each host, from the task's start for that host
(v2_runner_on_start) to its result.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase
from ansible.vars.clean import module_response_deepcopy, strip_internal_keys

WAIT_ACTIONS = frozenset(('llmops.sglang.wait_for_sglang', 'wait_for_sglang'))


def _write(path, data):
    tmp = path + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump(data, f, default=str)
    os.replace(tmp, path)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'aggregate'
    CALLBACK_NAME = 'wait_results'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.directory = os.environ.get('LLMOPS_WAIT_RESULTS')
        self.started = {}  # (host, task uuid) -> monotonic time the task was started for the host
        self.seconds = {}  # host -> {task name: seconds}

    def v2_runner_on_start(self, host, task):
        self.started[(host.get_name(), task._uuid)] = time.monotonic()

    def _done(self, result):
        host, task = result.host.get_name(), result.task
        began = self.started.pop((host, task._uuid), None)
        if began is not None:
            self.seconds.setdefault(host, {})[task.get_name()] = round(time.monotonic() - began, 3)
        if self.directory and WAIT_ACTIONS & {task.action, getattr(task, 'resolved_action', None)}:
            os.makedirs(self.directory, exist_ok=True)
            saved = strip_internal_keys(module_response_deepcopy(dict(result.result)))
            # what register holds beyond the callback's view (ansible-core 2.19+ keeps failed out of it)
            saved['failed'] = result.is_failed()
            _write(os.path.join(self.directory, '%s.json' % host), saved)

    def v2_runner_on_ok(self, result):
        self._done(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._done(result)

    def v2_runner_on_unreachable(self, result):
        self._done(result)

    def v2_playbook_on_stats(self, stats):
        if not self.directory:
            return
        os.makedirs(self.directory, exist_ok=True)
        for host, seconds in self.seconds.items():
            _write(os.path.join(self.directory, '%s.seconds.json' % host), seconds)
