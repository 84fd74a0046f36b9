# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: linear
short_description: ansible.builtin.linear that sleeps until a result arrives instead of polling every millisecond
version_added: 1.0.0
description:
  - This plugin is C(ansible.builtin.linear) (its task order, batches, forks, handlers, C(run_once),
    C(any_errors_fatal) and failures), with one difference in how the controller waits for the hosts of a task to
    finish.
  - C(ansible.builtin.linear) checks for results in a loop with a sleep of C(internal_poll_interval) (default 1 ms)
    between checks, about 1000 checks per second for as long as any host runs a task. Each check costs the controller
    CPU, so a deploy that waits minutes for its servers to start spends seconds of controller CPU on the loop alone
    (measured about 0.025 CPU seconds per second of waiting, more on a loaded controller; docs/benchmarks.md).
  - This strategy sleeps until the controller's result thread has a result (or a worker's request) for it, and checks
    for a dead worker at least every 0.1 s while it waits. A result is handled as soon as it arrives, as before.
  - The collection's deploy playbook (C(llmops.sglang.deploy)) runs with it; its steps need linear's lockstep across
    hosts anyway (the ranks of a multi-node deployment see each other's results at each task boundary).
    A play of your own uses it with the play keyword C(strategy) set to C(llmops.sglang.linear).
author:
  - llmops.sglang contributors (@llmops)
seealso:
  - plugin: ansible.builtin.linear
    plugin_type: strategy
"""

import threading
from collections import deque

from ansible.errors import AnsibleError
from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule

# how long the wait sleeps at most before it looks for a dead worker again, seconds
DEAD_WORKER_CHECK = 0.1


class _WakingDeque(deque):
    """The strategy's result deque: every append wakes the waiting strategy."""

    def __init__(self, wake: threading.Event, items=()):
        super().__init__(items)
        self._wake = wake

    def append(self, x):
        super().append(x)
        self._wake.set()


class _WakingQueue:
    """The strategy's queue of workers' requests (ansible-core 2.21+): every put wakes the waiting strategy."""

    def __init__(self, inner, wake: threading.Event):
        self._inner, self._wake = inner, wake

    def put(self, item, *args, **kwargs):
        self._inner.put(item, *args, **kwargs)
        self._wake.set()

    def __getattr__(self, name):
        return getattr(self._inner, name)


class StrategyModule(LinearStrategyModule):
    """ansible.builtin.linear, waiting for results on an event instead of a 1 ms polling loop."""

    def __init__(self, tqm):
        super().__init__(tqm)
        self._result_ready = threading.Event()
        # the result thread started in the base class; nothing was queued yet, but keep anything it appended
        with self._results_lock:
            self._results = _WakingDeque(self._result_ready, self._results)
        rpc = getattr(self, '_rpc_queue', None)
        if rpc is not None:
            self._rpc_queue = _WakingQueue(rpc, self._result_ready)

    def _wait_on_pending_results(self, iterator):
        """StrategyBase._wait_on_pending_results with the sleep replaced by a wait for the next result."""
        ret_results = []
        while self._pending_results > 0 and not self._tqm._terminated:
            if self._tqm.has_dead_workers():
                raise AnsibleError("A worker was found in a dead state")
            # cleared before the results are read: a result appended after this wakes the next wait
            self._result_ready.clear()
            ret_results.extend(self._process_pending_results(iterator))
            if self._pending_results > 0:
                self._result_ready.wait(DEAD_WORKER_CHECK)
        return ret_results
