# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The return step of a rolling change (llmops.sglang.sglang_roll_step phase=return): the next batch leaves rotation in
the same task only when this one is back, proven and the roll goes on; the modules it runs on the gateway's host are
replaced by a recorder."""

from __future__ import annotations

import time

from ansible.errors import AnsibleConnectionFailure

from ansible_collections.llmops.sglang.plugins.action.sglang_roll_step import ActionModule

A, B = 'http://10.0.0.11:30000', 'http://10.0.0.12:30000'
GATEWAY = {'url': 'http://127.0.0.1:30080', 'admin_key': 'adm', 'api_key': 'k', 'timeout': 120.0}


def batch(index, host, url):
    return {'index': index, 'canary': index == 1, 'hosts': [host], 'names': [host],
            'workers': [{'name': host, 'url': url, 'hosts': [host], 'worker_type': 'regular'}]}


NEXT = {'batch': batch(2, 'w2', B), 'min_in_service': 1, 'drain_timeout': 30.0, 'drain_policy': 'fail'}


def action(answers):
    """An ActionModule whose module runs are answered from ``answers`` (module state -> result or exception)."""
    act = ActionModule.__new__(ActionModule)
    act.calls = []

    def module(name, module_args, task_vars):
        key = module_args.get('state')
        act.calls.append((name, key, module_args))
        answer = answers[key]
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)

    act._module = module
    return act


def args(result, nxt=None):
    facts = {'w1': {'sglang_service_result': result}}
    out = {'drains': [{'url': A, 'outcome': 'idle', 'seconds': 0.4, 'drained': 1, 'policy': 'fail'}], 'at': time.time()}
    return ({'batch': batch(1, 'w1', A), 'out': out, 'gateway': dict(GATEWAY), 'rows': [], 'next': nxt or {}},
            {'hostvars': facts})


BACK = {'changed': True, 'verdict': {'done': True, 'waiting': {}, 'failed': {}}, 'waited': 0.2,
        'proofs': [{'worker': A, 'ok': True, 'seconds': 0.1, 'reason': '1 request(s) through the gateway answered'}]}
READY = {'outcome': 'restarted', 'status': 'ready', 'reasons': ['inputs changed'], 'elapsed': 9.0}
OUT = {'changed': True, 'ok': True, 'removed': [B], 'msg': 'out of rotation and drained: ...', 'at': 1.0, 'failed': False,
       'drains': [{'url': B, 'outcome': 'idle', 'seconds': 0.6, 'drained': 2}], 'invocation': {'module_args': {}}}


def test_the_next_batch_leaves_rotation_once_this_one_is_back_and_proven():
    act = action({'in': BACK, 'out': OUT})
    got = act.put_back(*args(READY, NEXT))
    assert not got['stop'] and [c[1] for c in act.calls] == ['in', 'out']  # back and proven first, then the next out
    _name, _state, out_args = act.calls[1]
    assert out_args['workers'] == [{'url': B, 'worker_type': 'regular'}]
    assert (out_args['min_in_service'], out_args['drain_timeout'], out_args['drain_policy']) == (1, 30.0, 'fail')
    assert out_args['worker_api_key'] == 'k' and out_args['admin_key'] == 'adm'
    assert got['next_out']['index'] == 2
    assert got['next_out']['result']['drains'][0]['outcome'] == 'idle'
    assert 'invocation' not in got['next_out']['result'] and 'failed' not in got['next_out']['result']


def test_a_batch_that_stops_the_roll_takes_nothing_else_out():
    rolled_back = {'outcome': 'rolled back', 'status': 'crashed', 'rollback': {'after': {'status': 'ready'}, 'msg': 'x'}}
    failed = {'outcome': 'restarted', 'status': 'crashed', 'msg': 'the server crashed'}
    for result in (rolled_back, failed):
        act = action({'in': BACK, 'out': OUT, 'absent': {'changed': False}})
        got = act.put_back(*args(result, NEXT))
        assert got['stop'] and 'next_out' not in got
        assert 'out' not in [c[1] for c in act.calls]
    # a worker that does not come back stops it too (and is taken out again), the next batch stays in rotation
    act = action({'in': dict(BACK, proofs=[{'worker': A, 'ok': False, 'reason': 'none reached it'}]), 'out': OUT,
                  'absent': {'changed': True}})
    got = act.put_back(*args(READY, NEXT))
    assert got['stop'] and got['take_out'] == [A] and 'next_out' not in got
    assert [c[1] for c in act.calls] == ['in', 'absent']


def test_the_last_batch_takes_nothing_out():
    act = action({'in': BACK, 'out': OUT})
    got = act.put_back(*args(READY, {'batch': {}, 'min_in_service': 1, 'drain_timeout': 30.0, 'drain_policy': 'fail'}))
    assert not got['stop'] and 'next_out' not in got and [c[1] for c in act.calls] == ['in']


def test_a_next_removal_that_fails_is_kept_for_the_next_batch_not_raised():
    refused = {'failed': True, 'msg': 'refusing to take ... out of rotation: min_in_service', 'drains': [], 'removed': []}
    act = action({'in': BACK, 'out': refused})
    got = act.put_back(*args(READY, NEXT))
    assert not got['stop'] and got['next_out']['result']['msg'].startswith('refusing')
    assert got['next_out']['result']['drains'] == []
    act = action({'in': BACK, 'out': AnsibleConnectionFailure('ssh: connection reset')})
    got = act.put_back(*args(READY, NEXT))
    assert 'could not take the batch out' in got['next_out']['result']['msg'] and got['next_out']['result']['drains'] == []
    # this batch's own rows are kept whatever happened to the next one
    assert got['rows'][0]['status'] == 'rolled'
