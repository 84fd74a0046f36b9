# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The out and return steps of a rolling change (llmops.sglang.sglang_roll_step phase=out / phase=return): a batch
leaves rotation once, in its own out step or in the previous batch's return; the next batch leaves rotation in the
return's task only when this one is back, proven and the roll goes on; only the hosts of drained workers change. The
modules it runs on the gateway's host are replaced by a recorder."""

from __future__ import annotations

import time

from ansible.errors import AnsibleConnectionFailure

from ansible_collections.llmops.sglang.plugins.action import sglang_roll_step as roll_step
from ansible_collections.llmops.sglang.plugins.action.sglang_roll_step import ActionModule

A, B = 'http://10.0.0.11:30000', 'http://10.0.0.12:30000'
GATEWAY = {'url': 'http://127.0.0.1:30080', 'admin_key': 'adm', 'api_key': 'k', 'timeout': 120.0}


def batch(index, host, url):
    return {'index': index, 'canary': index == 1, 'hosts': [host], 'names': [host],
            'workers': [{'name': host, 'url': url, 'hosts': [host], 'worker_type': 'regular'}]}


NEXT = batch(2, 'w2', B)
ROTATION = {'min_in_service': 1, 'drain_timeout': 30.0, 'drain_policy': 'fail'}


def action(answers):
    """An ActionModule whose module runs are answered from ``answers`` (module state -> result or exception); a call
    with ``then_out`` is answered with ``answers['then']`` as its ``then`` when there is one."""
    act = ActionModule.__new__(ActionModule)
    act.calls = []

    def module(name, module_args, task_vars):
        key = module_args.get('state')
        act.calls.append((name, key, module_args))
        answer = answers[key]
        if isinstance(answer, Exception):
            raise answer
        answer = dict(answer)
        if module_args.get('then_out') and 'then' in answers and not answer.get('failed'):
            answer['then'] = dict(answers['then'])
        return answer

    act._module = module
    return act


def args(result, nxt=None):
    facts = {'w1': {'sglang_service_result': result}}
    out = {'drains': [{'url': A, 'outcome': 'idle', 'seconds': 0.4, 'drained': 1, 'policy': 'fail'}], 'at': time.time()}
    return ({'phase': 'return', 'batch': batch(1, 'w1', A), 'out': out, 'gateway': dict(GATEWAY), 'rows': [],
             'next_batch': nxt or {}, 'rotation': dict(ROTATION)}, {'hostvars': facts})


BACK = {'changed': True, 'verdict': {'done': True, 'waiting': {}, 'failed': {}}, 'waited': 0.2,
        'proofs': [{'worker': A, 'ok': True, 'seconds': 0.1, 'reason': '1 request(s) through the gateway answered'}]}
READY = {'outcome': 'restarted', 'status': 'ready', 'reasons': ['inputs changed'], 'elapsed': 9.0}
OUT = {'changed': True, 'ok': True, 'removed': [B], 'msg': 'out of rotation and drained: ...', 'at': 1.0, 'failed': False,
       'drains': [{'url': B, 'outcome': 'idle', 'seconds': 0.6, 'drained': 2}], 'invocation': {'module_args': {}}}


def test_the_next_batch_leaves_rotation_in_the_call_that_puts_this_one_back():
    act = action({'in': BACK, 'then': OUT})
    got = act.put_back(*args(READY, NEXT))
    assert not got['stop'] and [c[1] for c in act.calls] == ['in']  # one call on the gateway's host
    _name, _state, call = act.calls[0]
    assert call['workers'] == [{'url': A, 'worker_type': 'regular'}]
    assert call['then_out'] == [{'url': B, 'worker_type': 'regular'}]
    assert (call['min_in_service'], call['drain_timeout'], call['drain_policy']) == (1, 30.0, 'fail')
    assert call['worker_api_key'] == 'k' and call['admin_key'] == 'adm'
    assert got['next_out']['index'] == 2
    assert got['next_out']['result']['drains'][0]['outcome'] == 'idle'
    assert 'invocation' not in got['next_out']['result'] and 'failed' not in got['next_out']['result']
    assert 'then' not in got['back'] and got['rows'][0]['status'] == 'rolled'


def test_a_module_that_did_not_take_the_next_batch_out_is_followed_by_a_call_of_its_own():
    act = action({'in': BACK, 'out': OUT})  # answers without 'then'
    got = act.put_back(*args(READY, NEXT))
    assert [c[1] for c in act.calls] == ['in', 'out']
    _name, _state, out_args = act.calls[1]
    assert out_args['workers'] == [{'url': B, 'worker_type': 'regular'}] and out_args['drain_timeout'] == 30.0
    assert got['next_out']['index'] == 2 and got['next_out']['result']['removed'] == [B]


def test_a_batch_that_stops_the_roll_takes_nothing_else_out():
    rolled_back = {'outcome': 'rolled back', 'status': 'crashed', 'rollback': {'after': {'status': 'ready'}, 'msg': 'x'}}
    failed = {'outcome': 'restarted', 'status': 'crashed', 'msg': 'the server crashed'}
    for result in (rolled_back, failed):
        act = action({'in': BACK, 'then': OUT, 'out': OUT, 'absent': {'changed': False}})
        got = act.put_back(*args(result, NEXT))
        assert got['stop'] and 'next_out' not in got
        assert 'out' not in [c[1] for c in act.calls]
        assert not any(c[2].get('then_out') for c in act.calls)  # a rolled-back canary goes back alone
    # a worker that does not come back: the module fails the return and takes nothing out; the roll stops and the worker
    # is taken out again
    act = action({'in': dict(BACK, failed=True, proofs=[{'worker': A, 'ok': False, 'reason': 'none reached it'}]),
                  'then': OUT, 'out': OUT, 'absent': {'changed': True}})
    got = act.put_back(*args(READY, NEXT))
    assert got['stop'] and got['take_out'] == [A] and 'next_out' not in got
    assert [c[1] for c in act.calls] == ['in', 'absent']


def test_a_next_batch_out_while_the_verdict_stops_goes_back_at_once():
    # the module's 'then' with a return the controller does not accept (not reached with the real module): the next
    # batch is put back, never left out of rotation
    act = action({'in': dict(BACK, proofs=[]), 'then': OUT, 'absent': {'changed': True}})
    got = act.put_back(*args(READY, NEXT))
    assert got['stop'] and 'next_out' not in got
    assert [(c[1], c[2]['workers']) for c in act.calls[1:]] == [('absent', [A]),
                                                                ('in', [{'url': B, 'worker_type': 'regular'}])]
    assert act.calls[2][2]['prove'] is False


def test_the_last_batch_takes_nothing_out():
    act = action({'in': BACK, 'then': OUT})
    got = act.put_back(*args(READY, {}))
    assert not got['stop'] and 'next_out' not in got and [c[1] for c in act.calls] == ['in']
    assert not act.calls[0][2].get('then_out')


def test_a_next_removal_that_fails_is_kept_for_the_next_batch_not_raised():
    refused = {'ok': False, 'msg': 'refusing to take ... out of rotation: min_in_service', 'drains': [], 'removed': []}
    act = action({'in': BACK, 'then': refused})
    got = act.put_back(*args(READY, NEXT))
    assert not got['stop'] and got['next_out']['result']['msg'].startswith('refusing')
    assert got['next_out']['result']['drains'] == []
    act = action({'in': BACK, 'out': AnsibleConnectionFailure('ssh: connection reset')})
    got = act.put_back(*args(READY, NEXT))
    assert 'could not take the batch out' in got['next_out']['result']['msg'] and got['next_out']['result']['drains'] == []
    # this batch's own rows are kept whatever happened to the next one
    assert got['rows'][0]['status'] == 'rolled'


def out_args(index, host, url, previous=None):
    return {'phase': 'out', 'batch': batch(index, host, url), 'previous': previous or {}, 'gateway': dict(GATEWAY),
            'rotation': dict(ROTATION)}


def test_the_first_batch_leaves_rotation_in_its_own_out_step(monkeypatch):
    said = []
    monkeypatch.setattr(roll_step.display, 'display', said.append)
    act = action({'out': dict(OUT, removed=[A], drains=[{'url': A, 'outcome': 'idle', 'seconds': 0.5, 'drained': 1}])})
    got = act.take_out(out_args(1, 'w1', A), {})
    assert said == ['batch 1 (w1): out of rotation and drained: ...']  # one line, as for the batches after it
    assert [c[1] for c in act.calls] == ['out']
    _name, _state, call = act.calls[0]
    assert call['workers'] == [{'url': A, 'worker_type': 'regular'}]
    assert (call['min_in_service'], call['drain_timeout'], call['drain_policy']) == (1, 30.0, 'fail')
    assert (call['worker_api_key'], call['admin_key']) == ('k', 'adm')
    assert got['cleared_hosts'] == ['w1'] and got['reused'] is False and got['changed'] is True
    assert got['change_drains'] == {}  # drained here: nothing left to the change
    assert 'invocation' not in got and 'failed' not in got


def test_a_removal_that_left_the_drain_to_the_change_hands_each_serving_host_its_drain():
    left = dict(OUT, removed=[A], msg='out of rotation, its change drains it: %s 2 in flight' % A,
                drains=[{'url': A, 'outcome': 'left', 'seconds': 0.0, 'in_flight_at_start': 2, 'still_running': 2}])
    act = action({'out': left})
    task = out_args(1, 'w1', A)
    task['rotation'] = dict(ROTATION, drain=False)
    got = act.take_out(task, {})
    assert act.calls[0][2]['drain'] is False
    assert got['cleared_hosts'] == ['w1']
    assert got['change_drains'] == {'w1': {'url': A, 'timeout': 30.0, 'policy': 'fail', 'interval': 0.1, 'idle_spacing': 0.25}}


def test_a_batch_the_previous_return_took_out_is_not_taken_out_again(monkeypatch):
    said = []
    monkeypatch.setattr(roll_step.display, 'display', said.append)
    previous = {'stop': False, 'next_out': {'index': 2, 'result': dict(OUT)}}
    act = action({})
    got = act.take_out(out_args(2, 'w2', B, previous), {})
    assert said == []  # the return that took it out said it already
    assert act.calls == []  # no module run on the gateway's host
    assert got['cleared_hosts'] == ['w2'] and got['reused'] is True and got['changed'] is False
    assert got['drains'] == OUT['drains'] and got['at'] == OUT['at']
    # a removal the previous return made for another batch is not this one's
    act = action({'out': OUT})
    got = act.take_out(out_args(3, 'w3', B, previous), {})
    assert [c[1] for c in act.calls] == ['out'] and got['reused'] is False


def test_only_the_hosts_of_drained_workers_change():
    drains = [{'url': A, 'outcome': 'fail', 'reason': '2 in flight at drain_timeout'},
              {'url': B, 'outcome': 'proceed', 'at_timeout': 1}]
    two = {'index': 1, 'hosts': ['w1', 'w2a', 'w2b'], 'names': ['w1', 'w2'],
           'workers': [{'name': 'w1', 'url': A, 'hosts': ['w1']}, {'name': 'w2', 'url': B, 'hosts': ['w2a', 'w2b']}]}
    act = action({'out': {'ok': False, 'msg': 'drain failed', 'drains': drains, 'removed': [A, B], 'failed': True}})
    got = act.take_out(dict(out_args(1, 'w1', A), batch=two), {})
    assert got['cleared_hosts'] == ['w2a', 'w2b']  # a multi-node worker: every rank
    assert 'failed' not in got and got['msg'] == 'drain failed'  # kept for the return step, not raised


def test_a_removal_that_cannot_run_clears_no_host():
    act = action({'out': AnsibleConnectionFailure('ssh: connection reset')})
    got = act.take_out(out_args(1, 'w1', A), {})
    assert got['cleared_hosts'] == [] and got['drains'] == [] and 'could not take the batch out' in got['msg']
    refused = {'ok': False, 'failed': True, 'msg': 'refusing: min_in_service 1', 'drains': [], 'removed': []}
    got = action({'out': refused}).take_out(out_args(1, 'w1', A), {})
    assert got['cleared_hosts'] == [] and got['msg'].startswith('refusing')


class _Task:
    def __init__(self, check_mode):
        self.check_mode = check_mode


def test_check_mode_skips_the_steps_that_change_the_rotation(monkeypatch):
    """In check mode the out and return steps run no module (the gateway keeps its rotation); the report runs."""
    act = action({})
    act._task = _Task(True)
    monkeypatch.setattr(act, 'validate_argument_spec', lambda argument_spec: (None, out_args(1, 'w1', A)), raising=False)
    monkeypatch.setattr(ActionModule.__mro__[1], 'run', lambda self, tmp=None, task_vars=None: {})
    got = act.run(task_vars={})
    assert got['skipped'] is True and got['changed'] is False and act.calls == []
    plan = {'batches': [batch(1, 'w1', A)], 'fleet': [{'name': 'w1', 'url': A}], 'unchanged': []}
    monkeypatch.setattr(act, 'validate_argument_spec', lambda argument_spec: (
        None, {'phase': 'report', 'plan': plan, 'rows': [], 'stopped': '', 'path': None}), raising=False)
    got = act.run(task_vars={})
    assert got['dry_run'] is True and [(r['name'], r['status']) for r in got['rows']] == [('w1', 'would roll')]


def test_a_batch_whose_change_drained_it_gets_that_drain_in_its_row_and_passes_drain_false_on():
    """llmops.sglang.roll (rotation drain: false): the removal read 3 in flight and left the drain to the change; the
    row shows the role's drain, the CHANGE seconds leave its wait out, and the next batch leaves rotation the same way."""
    at = time.time() - 20.0
    left = {'drains': [{'url': A, 'outcome': 'left', 'seconds': 0.0, 'in_flight_at_start': 3, 'still_running': 3,
                        'policy': 'fail'}], 'at': at}
    drained = dict(READY, drain={'outcome': 'idle', 'seconds': 1.5, 'in_flight_at_start': 1, 'drained': 1,
                                 'still_running': 0, 'policy': 'fail'})
    act = action({'in': BACK, 'then': OUT})
    task_args, task_vars = args(drained, NEXT)
    task_args.update(out=left, rotation=dict(ROTATION, drain=False))
    got = act.put_back(task_args, task_vars)
    row = got['rows'][0]
    assert (row['drain'], row['drained'], row['drain_seconds'], row['status']) == ('idle', 3, 1.5, 'rolled')
    assert 18.0 <= row['change_seconds'] <= 19.0  # 20 s out of rotation, 1.5 s of it the drain's
    assert act.calls[0][2]['drain'] is False and act.calls[0][2]['then_out'] == [{'url': B, 'worker_type': 'regular'}]
