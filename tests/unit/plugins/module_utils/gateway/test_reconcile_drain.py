# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The gateway's worker set and the drain: pure decisions over recorded and constructed states."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.gateway import _drain as drain
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import GatewayWorker, parse_workers
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._metrics import Load
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._reconcile import (
    Wanted, changes, in_rotation_after_removal, verdict)

FIXTURES = Path(__file__).resolve().parents[5] / 'tests' / 'fixtures' / 'gateway'
A, B, C = 'http://127.0.0.1:31001', 'http://127.0.0.1:31002', 'http://127.0.0.1:31003'


def recorded(name):
    return parse_workers(json.loads((FIXTURES / name).read_text()))


def test_present_adds_the_missing_and_exclusive_removes_the_unknown():
    have = recorded('smg-1.13.0-workers.json')
    plan = changes([Wanted(A), Wanted(C)], have, 'present')
    assert [w.url for w in plan.add] == [C] and plan.remove == []
    plan = changes([Wanted(A), Wanted(C)], have, 'present', exclusive=True)
    assert [w.url for w in plan.add] == [C] and [w.url for w in plan.remove] == [B]
    assert not changes([Wanted(A + '/'), Wanted(B)], have, 'present').changed


def test_a_failed_worker_or_one_of_another_type_is_registered_again():
    have = [GatewayWorker(url=A, status='failed'), GatewayWorker(url=B, status='ready', healthy=True)]
    plan = changes([Wanted(A), Wanted(B, 'decode')], have, 'present')
    assert [w.url for w in plan.remove] == [A, B] and [(w.url, w.worker_type) for w in plan.add] == [(A, 'regular'), (B, 'decode')]


def test_absent_leaves_a_draining_worker_alone():
    have = recorded('smg-1.13.0-workers-draining.json')
    assert changes([Wanted(A)], have, 'absent').remove == []
    assert [w.url for w in changes([Wanted(B)], have, 'absent').remove] == [B]
    assert verdict([Wanted(A)], have, 'absent').done  # draining: no policy selects it
    assert verdict([Wanted(B)], have, 'absent').waiting == {B: 'ready'}


def test_present_waits_for_rotation_and_names_who_is_not_there():
    have = recorded('smg-1.13.0-workers-not-ready.json')
    result = verdict([Wanted(A), Wanted(B), Wanted(C)], have, 'present')
    assert not result.done and result.waiting == {B: 'not ready', C: 'not registered'}
    assert verdict([Wanted(A)], have, 'present').done
    failed = verdict([Wanted(A)], [GatewayWorker(url=A, status='failed')], 'present')
    assert failed.failed == {A: 'failed'} and not failed.done


def test_wanted_workers_are_checked_before_any_call():
    assert Wanted.from_option({'url': A + '/', 'worker_type': 'prefill', 'bootstrap_port': 8998}).api_body('k') == {
        'url': A, 'worker_type': 'prefill', 'bootstrap_port': 8998, 'api_key': 'k'}
    for bad in ('node1:30000', {'url': A, 'worker_type': 'router'}, {'url': A, 'bootstrap_port': 8998},
                {'url': A, 'worker_type': 'prefill', 'bootstrap_port': 0}):
        with pytest.raises(ValueError):
            Wanted.from_option(bad)


def test_in_rotation_after_removal_counts_pd_by_the_smaller_side():
    have = [GatewayWorker(url=A, status='ready', healthy=True), GatewayWorker(url=B, status='ready', healthy=True),
            GatewayWorker(url=C, status='not_ready')]
    assert in_rotation_after_removal(have, [Wanted(A)]) == 1
    pd = [GatewayWorker(url=A, worker_type='prefill', status='ready', healthy=True),
          GatewayWorker(url=B, worker_type='decode', status='ready', healthy=True),
          GatewayWorker(url=C, worker_type='decode', status='ready', healthy=True)]
    assert in_rotation_after_removal(pd, [Wanted(C, 'decode')]) == 1
    assert in_rotation_after_removal(pd, [Wanted(A, 'prefill')]) == 0


def settings(**kw):
    return drain.DrainSettings(**dict({'timeout': 10, 'policy': 'fail', 'interval': 1, 'idle_readings': 2}, **kw))


def test_drain_ends_on_two_idle_readings_in_a_row_only():
    r = drain.Reading
    assert drain.decide([r(0, 0, 0)], settings()).action == 'continue'
    assert drain.decide([r(0, 0, 0), r(1, 1, 0), r(2, 0, 0)], settings()).action == 'continue'
    assert drain.decide([r(0, 2, 1), r(1, 0, 0), r(2, 0, 0)], settings()).action == 'idle'
    # an unreadable server is never taken for idle; one that refuses the connection has nothing in flight
    assert drain.decide([r(0, error='timed out'), r(1, error='timed out')], settings()).action == 'continue'
    assert drain.decide([r(0, error='refused: 111', refused=True), r(1, 0, 0)], settings()).action == 'idle'


def test_drain_past_its_bound_follows_the_policy():
    busy = [drain.Reading(0, 3, 0), drain.Reading(10.2, 2, 1)]
    proceed = drain.decide(busy, settings(policy='proceed'))
    assert (proceed.action, proceed.still_running) == ('proceed', 3)
    assert 'proceeding (policy proceed)' in proceed.reason
    fail = drain.decide(busy, settings(policy='fail'))
    assert (fail.action, fail.still_running) == ('fail', 3)
    wait = drain.decide(busy, settings(policy='wait', max_wait=60))
    assert (wait.action, wait.still_running) == ('continue', 3)
    over = drain.decide(busy + [drain.Reading(61, 1, 0)], settings(policy='wait', max_wait=60))
    assert (over.action, over.still_running) == ('fail', 1)


def test_drainer_counts_what_drained_and_how_long(clock):
    loads = iter([Load(2, 1), Load(1, 0), Load(0, 0), Load(0, 0)])
    result = drain.Drainer(lambda: (next(loads), None, False), settings(interval=0.5), 'metrics', clock, clock.sleep).run()
    assert (result.outcome, result.seconds, result.in_flight_at_start, result.peak, result.drained) == ('idle', 1.5, 3, 3, 3)
    assert result.to_json()['reading_count'] == 4


def test_drainer_that_times_out_with_proceed_says_what_it_left(clock):
    result = drain.Drainer(lambda: (Load(1, 0), None, False), settings(timeout=2, policy='proceed', interval=0.5),
                           'get_load', clock, clock.sleep).run()
    assert (result.outcome, result.still_running, result.drained) == ('proceed', 1, 0)
    assert result.seconds == 2.0


def test_drainer_with_policy_wait_waits_past_its_bound_and_says_for_how_many(clock):
    loads = iter([Load(2, 0)] * 4 + [Load(1, 0)] * 5 + [Load(0, 0), Load(0, 0)])
    result = drain.Drainer(lambda: (next(loads), None, False), settings(timeout=2, policy='wait', interval=0.5),
                           'metrics', clock, clock.sleep).run()
    assert (result.outcome, result.policy, result.at_timeout, result.still_running, result.drained) == ('idle', 'wait', 1, 0, 2)
    assert result.seconds == 5.0 and result.past_timeout
    assert 'in flight when drain_timeout 2s passed, waited 3.0s more (policy wait)' in result.reason
    data = result.to_json()
    assert (data['policy'], data['at_timeout']) == ('wait', 1)


def test_a_drain_idle_within_its_bound_has_nothing_at_the_bound(clock):
    loads = iter([Load(1, 0), Load(0, 0), Load(0, 0)])
    result = drain.Drainer(lambda: (next(loads), None, False), settings(timeout=2, policy='wait', interval=0.5),
                           'metrics', clock, clock.sleep).run()
    assert (result.outcome, result.at_timeout, result.past_timeout) == ('idle', None, False)
    # the second idle reading falls on the bound: it was idle within it
    loads = iter([Load(1, 0), Load(1, 0), Load(1, 0), Load(0, 0), Load(0, 0)])
    result = drain.Drainer(lambda: (next(loads), None, False), settings(timeout=2, policy='wait', interval=0.5),
                           'metrics', clock, clock.sleep).run()
    assert (result.outcome, result.seconds, result.at_timeout) == ('idle', 2.0, None)


def test_drainer_reads_often_while_busy_and_spaces_the_reading_that_confirms_idle(clock):
    # busy readings every interval; the reading after an idle one comes idle_spacing later; a busy one in between starts over
    loads = iter([Load(2, 0), Load(1, 0), Load(0, 0), Load(1, 0), Load(0, 0), Load(0, 0)])
    result = drain.Drainer(lambda: (next(loads), None, False), settings(interval=0.1, idle_spacing=0.25), 'metrics',
                           clock, clock.sleep).run()
    assert [r.at for r in result.readings] == [0.0, 0.1, 0.2, 0.45, 0.55, 0.8]
    assert (result.outcome, result.seconds, result.drained) == ('idle', 0.8, 2)
    # without idle_spacing every reading is interval apart, as before
    loads = iter([Load(1, 0), Load(0, 0), Load(0, 0)])
    result = drain.Drainer(lambda: (next(loads), None, False), settings(interval=0.5), 'metrics', clock, clock.sleep).run()
    assert [r.at for r in result.readings] == [0.0, 0.5, 1.0]


def test_an_unread_server_is_read_again_at_the_busy_interval(clock):
    # an error is not idle: no spacing for it, and the drain never ends on it
    reads = iter([(None, 'timed out', False), (Load(0, 0), None, False), (Load(0, 0), None, False)])
    result = drain.Drainer(lambda: next(reads), settings(interval=0.1, idle_spacing=0.25), 'metrics', clock, clock.sleep).run()
    assert [r.at for r in result.readings] == [0.0, 0.1, 0.35]
    assert result.outcome == 'idle'
