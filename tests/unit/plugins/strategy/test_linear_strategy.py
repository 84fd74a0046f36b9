# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""llmops.sglang.linear: the wait for a task's results sleeps until a result arrives (ansible.builtin.linear polls every
1 ms), returns as soon as one does, and still finds a dead worker. The strategy is ansible-core's own, with ansible-core's
result thread; only the task queue manager is a stand-in (no hosts, no workers)."""

from __future__ import annotations

import queue
import threading
import time

import pytest
from ansible.errors import AnsibleError
from ansible.plugins.strategy import StrategySentinel

from ansible_collections.llmops.sglang.plugins.strategy import linear


class QueueManager:
    """What StrategyBase reads from the task queue manager; counts the dead-worker checks (one per turn of the wait)."""

    def __init__(self):
        self._workers, self._final_q, self._terminated = [], queue.Queue(), False
        self.checks, self.dead = 0, False

    def get_inventory(self):
        return None

    def get_variable_manager(self):
        return None

    def get_loader(self):
        return None

    def has_dead_workers(self):
        self.checks += 1
        return self.dead


@pytest.fixture
def strategy():
    tqm = QueueManager()
    plugin = linear.StrategyModule(tqm)

    def process(_iterator, one_pass=False, max_passes=None):  # the results the result thread queued, as the base does
        out = []
        with plugin._results_lock:
            while plugin._results:
                out.append(plugin._results.popleft())
        plugin._pending_results -= len(out)
        return out

    plugin._process_pending_results = process
    yield plugin, tqm
    tqm._final_q.put(StrategySentinel())
    plugin._results_thread.join(5)


def later(seconds, what):
    timer = threading.Timer(seconds, what)
    timer.start()
    return timer


def test_wakes_when_a_result_arrives_without_polling(strategy, monkeypatch):
    plugin, tqm = strategy
    monkeypatch.setattr(linear, 'DEAD_WORKER_CHECK', 5.0)  # only the result can end the wait in time
    plugin._pending_results = 1

    def arrive():  # what ansible-core's result thread does with a worker's result
        with plugin._results_lock:
            plugin._results.append('result of host a')

    later(0.5, arrive)
    t0 = time.monotonic()
    assert plugin._wait_on_pending_results(None) == ['result of host a']
    waited = time.monotonic() - t0
    assert 0.45 <= waited < 2.5
    # ansible.builtin.linear turns about 500 times in 0.5 s (1 ms sleeps); this one before and after the wait
    assert tqm.checks <= 3


def test_every_result_of_a_task_is_returned(strategy):
    plugin, _tqm = strategy
    plugin._pending_results = 3
    for i, delay in enumerate((0.05, 0.1, 0.3)):
        later(delay, lambda i=i: plugin._results.append('host %d' % i))
    assert sorted(plugin._wait_on_pending_results(None)) == ['host 0', 'host 1', 'host 2']


def test_a_dead_worker_still_fails_the_wait(strategy):
    plugin, tqm = strategy
    plugin._pending_results = 1
    later(0.2, lambda: setattr(tqm, 'dead', True))
    t0 = time.monotonic()
    with pytest.raises(AnsibleError, match='dead state'):
        plugin._wait_on_pending_results(None)
    assert time.monotonic() - t0 < 0.2 + linear.DEAD_WORKER_CHECK + 0.2


def test_a_workers_request_wakes_the_wait(strategy, monkeypatch):
    plugin, _tqm = strategy
    monkeypatch.setattr(linear, 'DEAD_WORKER_CHECK', 5.0)
    if not hasattr(plugin, '_rpc_queue'):
        pytest.skip('ansible-core before 2.21 has no queue of workers\' requests')
    served = []

    class Request:
        def dispatch(self):
            served.append(time.monotonic())
            plugin._results.append('done')

    plugin._pending_results = 1
    real = plugin._process_pending_results

    def process(iterator, one_pass=False, max_passes=None):  # as the base: serve the requests, then take the results
        try:
            while True:
                plugin._rpc_queue.get(block=False).dispatch()
        except queue.Empty:
            pass
        return real(iterator, one_pass, max_passes)

    plugin._process_pending_results = process
    put = time.monotonic()
    later(0.3, lambda: plugin._rpc_queue.put(Request()))
    assert plugin._wait_on_pending_results(None) == ['done']
    assert served and served[0] - put < 2.5
