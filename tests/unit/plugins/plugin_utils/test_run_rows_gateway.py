# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the gateway thinks of each server, in the check table (GATEWAY), and the roll's table."""

from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._roll import WorkerOutcome
from ansible_collections.llmops.sglang.plugins.plugin_utils._roll_table import render_roll
from ansible_collections.llmops.sglang.plugins.plugin_utils._run_report import columns_for, render
from ansible_collections.llmops.sglang.plugins.plugin_utils._run_rows import CHECK_PARTS, build_row

READY = {'status': 'ready', 'stage': 'ready', 'elapsed': 0.4, 'signature': None, 'models': ['glm-5']}
OPEN = {'url': 'http://10.0.0.12:30000', 'status': 'ready', 'healthy': True, 'circuit': 'open', 'load': 0,
        'in_rotation': False, 'state': 'circuit open'}


def test_the_gateway_column_shows_what_the_gateway_thinks_and_fails_nothing():
    rows = [build_row('gpu1', {'check_ready': READY, 'check_gateway': {'state': 'ready', 'url': 'http://10.0.0.11:30000'}},
                      CHECK_PARTS, reached=True),
            build_row('gpu2', {'check_ready': READY, 'check_gateway': OPEN}, CHECK_PARTS, reached=True),
            build_row('gpu3', {'check_ready': READY, 'check_gateway': {'state': 'not registered'}}, CHECK_PARTS, reached=True)]
    data = [r.to_json() for r in rows]
    assert [(d['status'], d['gateway']) for d in data] == [('ready', 'ready'), ('ready', 'circuit open'), ('ready', 'not registered')]
    assert data[1]['gateway_worker']['circuit'] == 'open'
    header = render(rows, columns_for(CHECK_PARTS, rows))[0].split()
    assert header[-2:] == ['GATEWAY', 'REASON']


def test_without_a_gateway_the_check_table_has_no_gateway_column():
    rows = [build_row('gpu1', {'check_ready': READY}, CHECK_PARTS, reached=True)]
    assert 'GATEWAY' not in render(rows, columns_for(CHECK_PARTS, rows))[0]
    assert 'GATEWAY' not in render(rows, columns_for(CHECK_PARTS))[0]


def test_the_roll_table_says_drain_change_start_and_return_per_worker():
    rows = [WorkerOutcome('gw1', 'http://a:1', 1, drain='idle', drained=2, drain_seconds=1.4, change='changed', change_seconds=79.6,
                          start='ready', start_seconds=15.8, serves=True, returned=True, return_seconds=1.2, status='rolled'),
            WorkerOutcome('gw2', 'http://b:1', 2, drain='proceed', drained=0, drain_seconds=2.1, still_running=1, change='changed',
                          status='rolled', returned=True, return_seconds=0.9),
            WorkerOutcome('gw3', 'http://c:1', 3, reason='not reached: the roll stopped before batch 3'),
            WorkerOutcome('gw4', 'http://d:1', 1, drain='idle', drained=1, drain_seconds=38.2, drain_policy='wait',
                          drain_at_timeout=1, change='changed', status='rolled', returned=True, return_seconds=1.0)]
    lines = render_roll(rows, 'gw2: did not return').splitlines()
    assert lines[0] == 'llmops.sglang roll: 4 workers, 3 rolled, 1 untouched; stopped: gw2: did not return'
    assert lines[2].split() == ['WORKER', 'BATCH', 'STATUS', 'DRAIN', 'CHANGE', 'START', 'RETURN', 'REASON']
    assert lines[3].split()[:12] == ['gw1', '1', 'rolled', '2', 'req', '1.4s', 'changed', '79.6s', 'ready', '15.8s', 'yes', '1.2s']
    assert '0 req 2.1s, 1 left (proceed)' in lines[4]
    assert lines[5].split()[:3] == ['gw3', '3', 'untouched']
    assert '1 req 38.2s, 1 in flight at drain_timeout (wait)' in lines[6]


GUARD = {'summary': 'hung 1', 'guard': {'events': [
    {'at': '2026-12-02T06:22:09Z', 'kind': 'hung', 'action': 'restart', 'reason': 'generation failed while GET /health answered 200',
     'outcome': 'restarted in 8.1s, ready after 1.5s, a generation request answered'}]}}


def test_the_guard_column_shows_its_events_and_fails_nothing():
    rows = [build_row('gpu1', {'check_ready': READY, 'check_guard': GUARD}, CHECK_PARTS, reached=True),
            build_row('gpu2', {'check_ready': READY, 'check_guard': {'summary': 'not installed'}}, CHECK_PARTS, reached=True)]
    data = [r.to_json() for r in rows]
    assert [(d['status'], d.get('guard')) for d in data] == [('ready', 'hung 1'), ('ready', None)]
    assert data[0]['guard_events'] == ['2026-12-02T06:22:09Z hung -> restart: generation failed while GET /health answered 200; '
                                       'restarted in 8.1s, ready after 1.5s, a generation request answered']
    assert render(rows, columns_for(CHECK_PARTS, rows))[0].split()[-2:] == ['GUARD', 'REASON']
    assert 'GUARD' not in render(rows[1:], columns_for(CHECK_PARTS, rows[1:]))[0]


def test_a_drain_past_its_bound_is_said_alike_in_the_module_message_and_the_table():
    from ansible_collections.llmops.sglang.plugins.modules.sglang_gateway_rotation import out_message
    drain = {'url': 'http://10.0.0.11:30000', 'outcome': 'idle', 'seconds': 38.2, 'drained': 1, 'at_timeout': 1,
             'policy': 'wait'}
    msg = out_message([drain])
    row = WorkerOutcome('gw1', drain['url'], 1, drain='idle', drained=1, drain_seconds=38.2, drain_policy='wait',
                        drain_at_timeout=1, status='rolled')
    cell = [line for line in render_roll([row]).splitlines() if line.startswith('gw1')][0]
    assert msg.endswith('(1 request(s) drained; 1 in flight at drain_timeout (wait))')
    assert '1 req 38.2s, 1 in flight at drain_timeout (wait)' in cell
