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
    prints_now,
    render,
)
from ansible_collections.llmops.sglang.plugins.plugin_utils._run_rows import DEPLOY_PARTS, build_row, build_rows
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_result import Facts, Server, service_result

CRASH = {'status': 'crashed', 'ready': False, 'elapsed': 5.3, 'stage': 'cuda_graph', 'signature': 'cuda_oom',
         'error_line': '[2025-11-02 10:01:58 TP0] Scheduler hit an exception: Traceback (most recent call last):',
         'msg': 'SGLang on node1 crashed after 5.3s at stage cuda_graph: cuda_oom: "..."',
         'error_context': ['Traceback (most recent call last):'] + ['  File "x.py", line 1, in f'] * 30
         + ['torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'],
         # the reason is the wait's root cause, not the line that opened the traceback
         'root_cause': 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'}
READY = {'status': 'ready', 'ready': True, 'elapsed': 12.4, 'stage': 'ready', 'signature': None, 'models': ['glm-5'],
         'msg': 'SGLang on node2 is ready after 12.4s; serving glm-5'}
UNCHANGED = {'current': True, 'reasons': [], 'health': True, 'recorded_at': '2026-12-01T13:02:11Z', 'sglang_version': '0.5.9'}
STALE = {'current': False, 'reasons': ['input sglang_service_args changed'], 'health': True}
# the registered result of llmops.sglang.sglang_restart on a host whose server was running before
RESTARTED = {'changed': True, 'invocation': 'b2', 'previous_invocation': 'a1', 'log_size': 10}
TIMEOUT = {'status': 'timeout', 'ready': False, 'elapsed': 180.0, 'stage': 'load_weights', 'signature': None,
           'msg': 'SGLang on node4 did not become ready within 180s: last stage load_weights'}


def _result(check_mode=False, **facts):
    """sglang_service_result as the role publishes it, from what its steps observed."""
    return service_result(Facts(**facts), Server('sglang', 'http://127.0.0.1:30000'), check_mode).to_json()


def _deployed(wait):
    return _result(stamp=STALE, deploy_reasons=STALE['reasons'], restart_reasons=['unit file'], restart=RESTARTED,
                   wait=wait, changed=True)


def _rows():
    facts = {
        'node1': {'sglang_service_result': _deployed(CRASH),
                  'sglang_run_failure': {'task': 'Stop when SGLang did not become ready', 'msg': 'crashed ...'}},
        'node2': {'sglang_service_result': _deployed(READY)},
        'node3': {'sglang_service_result': _result(stamp=UNCHANGED, unchanged=True)},
        'node4': {'sglang_service_result': _deployed(TIMEOUT)},
        'node5': {'sglang_run_failure': {'task': 'Install SGLang into the venv at /opt/sglang/venv',
                                         'msg': 'sglang==0.5.99 is not in the wheelhouse. Set it to 0.5.9\nsecond line'}},
    }
    hosts = ['node1', 'node2', 'node3', 'node4', 'node5', 'node6']
    return build_rows(hosts, facts, DEPLOY_PARTS, reached=hosts[:-1])


def test_rows_from_what_the_deploy_registered():
    rows = {r.host: r.to_json() for r in _rows()}
    assert rows['node1'] == {'host': 'node1', 'status': 'crashed', 'ok': False, 'stage': 'cuda_graph', 'seconds': 5.3,
                             'signature': 'cuda_oom', 'changed': True, 'kind': 'restarted',
                             'reason': 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.'}
    assert (rows['node2']['status'], rows['node2']['changed'], rows['node2']['reason']) == ('ready', True, 'serving glm-5')
    assert (rows['node3']['status'], rows['node3']['changed'], rows['node3']['seconds']) == ('ready', False, None)
    assert [rows[h].get('kind') for h in sorted(rows)] == ['restarted', 'restarted', 'unchanged', 'restarted', None, None]
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


def test_a_crash_row_says_the_waits_root_cause_else_its_error_line():
    """The row reads the root cause the wait found on the host (the controller does not load the log classifier to
    find it again); a wait without one (a log with no exception line) gives the proving line without SGLang's prefix."""
    chained = dict(CRASH, root_cause="huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name'",
                   error_context=['Traceback (most recent call last):', "OSError: Repo id must be in the form 'repo_name'"])
    cut_short = dict(CRASH, root_cause=None, error_context=['Traceback (most recent call last):'])
    reasons = [build_row('node1', {'sglang_service_result': _deployed(w)}, DEPLOY_PARTS, True).reason
               for w in (chained, cut_short)]
    assert reasons == [chained['root_cause'], 'Scheduler hit an exception: Traceback (most recent call last):']


def test_a_variable_of_the_role_with_a_bad_value_says_which_and_why_in_its_row():
    # seen: `-e sglang_service_sm120_patch=yes` gave the REASON "Validation of arguments failed:" and nothing else
    facts = {'node1': {'sglang_run_failure': {
        'task': "Validating arguments against arg spec 'main' - Run SGLang as a systemd service and wait until it serves",
        'msg': 'Validation of arguments failed:\nvalue of sglang_service_sm120_patch must be one of: , present, absent, '
               'got: yes'}}}
    row = build_rows(['node1'], facts, DEPLOY_PARTS, reached=['node1'])[0]
    assert (row.status, row.stage) == ('failed', 'before start')
    assert row.reason == ('Validation of arguments failed: value of sglang_service_sm120_patch must be one of: , '
                          'present, absent, got: yes')


def test_the_table_prints_after_the_last_host_still_in_the_play():
    ok_rows = [HostRow(host=h, status='ready') for h in ('nb1', 'nb2', 'nb3', 'nb4')]
    # the check playbook (no rescue) with its last host unreachable: the report runs on the others and must print
    # (it printed nothing: the last host of the play was not in the batch)
    lost = [ok_rows[0], HostRow(host='nb2', status='unreachable')]
    assert prints_now(['nb1', 'nb2'], reached=['nb1'], batch=['nb1'], rows=lost)
    # serial batches: not before the batch of the last host, then once
    hosts = ['nb1', 'nb2', 'nb3', 'nb4']
    assert not prints_now(hosts, reached=hosts, batch=['nb1', 'nb2'], rows=ok_rows)
    assert prints_now(hosts, reached=hosts, batch=['nb3', 'nb4'], rows=ok_rows)
    # the last batch's last host lost: its batch still prints
    assert prints_now(hosts, reached=hosts[:3], batch=['nb3'], rows=ok_rows[:3] + [HostRow(host='nb4', status='unreachable')])
    # a batch with a failed host prints (the play may stop there)
    failed = [HostRow(host='nb1', status='crashed')] + ok_rows[1:]
    assert prints_now(hosts, reached=hosts, batch=['nb1', 'nb2'], rows=failed)


def test_table_is_one_line_per_host_with_what_the_run_did():
    lines = render(_rows(), columns_for(DEPLOY_PARTS))
    assert len(lines) == 7
    assert lines[0].split() == ['HOST', 'STATUS', 'RUN', 'STAGE', 'TIME', 'SIGNATURE', 'TTFT', 'STARTUP', 'REASON']
    cells = {line.split()[0]: line.split() for line in lines[1:]}
    assert cells['node1'][1:6] == ['crashed', 'restarted', 'cuda_graph', '5.3s', 'cuda_oom']
    assert cells['node2'][1:6] == ['ready', 'restarted', 'ready', '12.4s', 'serving']
    assert cells['node3'][1:5] == ['ready', 'unchanged', 'ready', 'unchanged']
    # columns line up: every RUN cell starts where its header does
    at = lines[0].index('RUN')
    assert [line[at:].split()[0] for line in lines[1:4]] == ['restarted', 'restarted', 'unchanged']


def test_a_part_adds_a_column_before_reason():
    def fill_ttft(row, smoke):
        row.extra['ttft_ms'] = smoke['ttft_ms']
    base = tuple(p for p in DEPLOY_PARTS if not p.columns)
    parts = base + (Part('smoke', fill_ttft, (Column('ttft_ms', 'TTFT', lambda v: '' if v is None else '%d ms' % v, True),)),)
    row = build_row('node2', {'smoke': {'ttft_ms': 41}}, parts, reached=True)
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


def test_changed_is_what_the_role_says_this_run_changed():
    """A host counts as changed exactly when the role's result says so (newcomer review: a fresh deploy's table said
    'unchanged' for hosts it had just restarted, from a variable the role no longer set)."""
    rows = {r.host: r for r in _rows()}
    assert [rows[h].changed for h in ('node1', 'node2', 'node3')] == [True, True, False]
    dry = build_row('n', {'sglang_service_result': _result(check_mode=True, stamp=STALE, deploy_reasons=['no deployment record yet'],
                                                           changed=True, startable=False)}, DEPLOY_PARTS, True)
    assert (dry.status, dry.kind, dry.changed, dry.ok) == ('dry run', 'would deploy', True, True)
    assert dry.reason == 'would deploy: no deployment record yet'
    # the driver role changed the host (its install), the server was left alone: the row counts the change as the recap does
    both = build_row('n', {'sglang_service_result': _result(stamp=UNCHANGED, unchanged=True),
                           'nvidia_driver_result': {'changed': True, 'status': 'match'}}, DEPLOY_PARTS, True)
    assert (both.kind, both.changed) == ('unchanged', True)


def test_the_line_above_the_table_says_a_check_mode_deploy_was_a_dry_run():
    from ansible_collections.llmops.sglang.plugins.action.sglang_run_report import summary_line
    stale = dict(stamp=STALE, deploy_reasons=STALE['reasons'], changed=True)
    rows = [build_row('n1', {'sglang_service_result': _result(True, startable=False, **stale)}, DEPLOY_PARTS, True),
            build_row('n2', {'sglang_service_result': _result(True, restart_reasons=['unit file'], **stale)}, DEPLOY_PARTS, True),
            build_row('n3', {'sglang_service_result': _result(True, stamp=UNCHANGED, unchanged=True)}, DEPLOY_PARTS, True)]
    assert summary_line('deploy', rows, dry_run=True) == (
        'llmops.sglang deploy (dry run, check mode: nothing was changed): 3 hosts, 1 ready (1 unchanged), '
        '2 dry run (1 would deploy, 1 would restart)')
    assert summary_line('deploy', _rows()) == 'llmops.sglang deploy: 6 hosts, 2 ready (1 unchanged), 1 crashed, 1 failed, 1 timeout, 1 unreachable'
