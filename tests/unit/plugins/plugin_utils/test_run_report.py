# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The end-of-run table: rows built from what a deploy registered, the rendered table, and the JMESPath examples of
docs/run_report.md run against real rows."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._run_report import (
    Column,
    HostRow,
    Part,
    columns_for,
    render,
)
from ansible_collections.llmops.sglang.plugins.plugin_utils._run_rows import DEPLOY_PARTS, build_row, build_rows, fill_changed

CRASH = {'status': 'crashed', 'ready': False, 'elapsed': 5.3, 'stage': 'cuda_graph', 'signature': 'cuda_oom',
         'error_line': '[2025-11-02 10:01:58 TP0] Scheduler hit an exception: Traceback (most recent call last):',
         'msg': 'SGLang on node1 crashed after 5.3s at stage cuda_graph: cuda_oom: "..."',
         # the reason is the root cause, the traceback's last exception line, not the line that opened the traceback
         'error_context': ['Traceback (most recent call last):'] + ['  File "x.py", line 1, in f'] * 30
         + ['torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.']}
READY = {'status': 'ready', 'ready': True, 'elapsed': 12.4, 'stage': 'ready', 'signature': None, 'models': ['glm-5'],
         'msg': 'SGLang on node2 is ready after 12.4s; serving glm-5'}
UNCHANGED = {'current': True, 'reasons': [], 'health': True, 'recorded_at': '2026-12-01T13:02:11Z', 'sglang_version': '0.5.9'}
STALE = {'current': False, 'reasons': ['input sglang_service_args changed'], 'health': True}
# the registered result of the role's restart decision on a host it restarted (a skipped result where it did not)
RESTARTED = {'changed': True, 'msg': 'node1: restarting sglang.service: unit file'}
TIMEOUT = {'status': 'timeout', 'ready': False, 'elapsed': 180.0, 'stage': 'load_weights', 'signature': None,
           'msg': 'SGLang on node4 did not become ready within 180s: last stage load_weights'}


def _rows():
    facts = {
        'node1': {'sglang_service_deployment': STALE, '__sglang_service_restart_decision': RESTARTED, 'sglang_service_wait_result': CRASH,
                  'sglang_run_failure': {'task': 'Stop when SGLang did not become ready', 'msg': 'crashed ...'}},
        'node2': {'sglang_service_deployment': STALE, '__sglang_service_restart_decision': RESTARTED, 'sglang_service_wait_result': READY},
        'node3': {'sglang_service_deployment': UNCHANGED},
        'node4': {'sglang_service_deployment': STALE, '__sglang_service_restart_decision': RESTARTED, 'sglang_service_wait_result': TIMEOUT},
        'node5': {'sglang_run_failure': {'task': 'Install SGLang into the venv at /opt/sglang/venv',
                                         'msg': 'sglang==0.5.99 is not in the wheelhouse. Set it to 0.5.9\nsecond line'}},
    }
    hosts = ['node1', 'node2', 'node3', 'node4', 'node5', 'node6']
    return build_rows(hosts, facts, DEPLOY_PARTS, reached=hosts[:-1])


def test_rows_from_what_the_deploy_registered():
    rows = {r.host: r.to_json() for r in _rows()}
    assert rows['node1'] == {'host': 'node1', 'status': 'crashed', 'ok': False, 'stage': 'cuda_graph', 'seconds': 5.3,
                             'signature': 'cuda_oom', 'changed': True,
                             'reason': 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'}
    assert (rows['node2']['status'], rows['node2']['changed'], rows['node2']['reason']) == ('ready', True, 'serving glm-5')
    assert (rows['node3']['status'], rows['node3']['changed'], rows['node3']['seconds']) == ('ready', False, None)
    assert rows['node3']['reason'] == 'unchanged since 2026-12-01T13:02:11Z (SGLang 0.5.9, GET /health 200)'
    assert (rows['node4']['status'], rows['node4']['stage']) == ('timeout', 'load_weights')
    assert rows['node4']['reason'] == 'did not become ready within 180s: last stage load_weights'
    # a failure before the start: the task and the first line of its message
    assert (rows['node5']['status'], rows['node5']['stage']) == ('failed', 'before start')
    assert rows['node5']['reason'] == 'sglang==0.5.99 is not in the wheelhouse'
    assert rows['node5']['failed_task'] == 'Install SGLang into the venv at /opt/sglang/venv'
    assert rows['node6']['status'] == 'unreachable'
    # JSON round trip keeps the row
    assert HostRow.from_json(rows['node1']).to_json() == rows['node1']
    assert HostRow.from_json(rows['node5']).to_json() == rows['node5']


def test_table_is_one_line_per_host_with_signature_or_unchanged():
    lines = render(_rows(), columns_for(DEPLOY_PARTS))
    assert len(lines) == 7
    assert lines[0].split() == ['HOST', 'STATUS', 'STAGE', 'TIME', 'SIGNATURE', 'TTFT', 'STARTUP', 'REASON']
    cells = {line.split()[0]: line.split() for line in lines[1:]}
    assert cells['node1'][1:5] == ['crashed', 'cuda_graph', '5.3s', 'cuda_oom']
    assert cells['node2'][1:5] == ['ready', 'ready', '12.4s', '-']
    assert cells['node3'][1:4] == ['ready', 'ready', 'unchanged']
    # columns line up: every SIGNATURE cell starts where its header does
    at = lines[0].index('SIGNATURE')
    assert [line[at:].split()[0] for line in lines[1:4]] == ['cuda_oom', '-', 'unchanged']


def test_a_part_adds_a_column_before_reason():
    def fill_ttft(row, smoke):
        row.extra['ttft_ms'] = smoke['ttft_ms']
    base = tuple(p for p in DEPLOY_PARTS if not p.columns)
    parts = base + (Part('smoke', fill_ttft, (Column('ttft_ms', 'TTFT', lambda v: '' if v is None else '%d ms' % v, True),)),)
    row = build_row('node2', {'sglang_service_wait_result': READY, 'smoke': {'ttft_ms': 41}}, parts, reached=True)
    lines = render([row], columns_for(parts))
    assert lines[0].split() == ['HOST', 'STATUS', 'STAGE', 'TIME', 'SIGNATURE', 'TTFT', 'REASON']
    assert '41 ms' in lines[1] and row.to_json()['ttft_ms'] == 41


jmespath = pytest.importorskip('jmespath')


@pytest.mark.parametrize('query, expected', [
    ("[?status=='crashed'].{host: host, signature: signature}", [{'host': 'node1', 'signature': 'cuda_oom'}]),
    ('[?changed].host', ['node1', 'node2', 'node4']),
    ('max_by([?seconds != null], &seconds).{host: host, seconds: seconds}', {'host': 'node4', 'seconds': 180.0}),
    ('[?!ok].[host, status, reason] | length(@)', 4),
    ("[?status=='ready' && !changed].host", ['node3']),
])
def test_documented_queries(query, expected):
    from ansible_collections.llmops.sglang.plugins.action.sglang_run_report import select
    assert select([r.to_json() for r in _rows()], query) == expected


def test_command_line_examples_survive_key_value_parsing():
    """ansible-playbook splits -e key=value at spaces: every documented -e sglang_report_query=... has none, and
    each one is a valid expression over real rows."""
    import re
    from pathlib import Path
    from ansible_collections.llmops.sglang.plugins.action.sglang_run_report import select
    root = Path(__file__).resolve().parents[4]
    found = []
    for name in ('README.md', 'docs/run_report.md', 'demo/run.sh', 'playbooks/deploy.yml'):
        found += re.findall(r'-e "sglang_report_query=([^"<]+)"', (root / name).read_text())
    assert len(found) >= 5
    rows = [r.to_json() for r in _rows()]
    for query in found:
        assert ' ' not in query, query
        select(rows, query)


def test_changed_is_the_restart_decision_of_this_run():
    """A host counts as changed only when the role's restart decision restarted its server (newcomer review: a fresh
    deploy's table said 'unchanged' for hosts it had just restarted, from a variable the role no longer sets)."""
    restarted, skipped = HostRow('a'), HostRow('b')
    fill_changed(restarted, RESTARTED)
    fill_changed(skipped, {'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False'})
    missing = HostRow('c')
    fill_changed(missing, None)
    assert (restarted.changed, skipped.changed, missing.changed) == (True, False, False)
