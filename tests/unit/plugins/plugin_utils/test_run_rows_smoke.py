# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The smoke request's TTFT and the startup comparison in the deploy and check tables (plugin_utils/_run_rows.py)."""

from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.plugin_utils._run_report import columns_for, render
from ansible_collections.llmops.sglang.plugins.plugin_utils._run_rows import CHECK_PARTS, DEPLOY_PARTS, build_row
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_result import Facts, Server, service_result

READY = {'status': 'ready', 'stage': 'ready', 'elapsed': 12.4, 'signature': None, 'models': ['glm-5']}
SMOKE = {'ok': True, 'ttft': 0.1039, 'total': 0.82, 'tokens': 8, 'model': 'glm-5', 'error': None}
HUNG = {'ok': False, 'ttft': None, 'status': None, 'error': 'no complete answer within 10s, not even the HTTP status line: '
        'the request hung (a server that is ready but cannot generate, for example a dead scheduler)'}
STARTED = {'record': {'total': 369.0}, 'comparison': {'short': '14.2x slower than the previous start: load_weights, kv_cache'}}
RESTART = {'invocation': 'b2', 'previous_invocation': ''}


def _deployed(**facts):
    """The role's result after a start (sglang_service_result), from what its steps observed."""
    return {'sglang_service_result': service_result(Facts(restart=RESTART, changed=True, **facts), Server(), False).to_json()}


def test_deploy_row_and_table_carry_ttft_and_the_startup_comparison():
    row = build_row('smoke1', _deployed(wait=READY, smoke=SMOKE, history=STARTED), DEPLOY_PARTS, reached=True)
    data = row.to_json()
    assert (data['status'], data['kind'], data['ttft'], data['startup']) == ('ready', 'started', 0.1039, STARTED['comparison']['short'])
    lines = render([row], columns_for(DEPLOY_PARTS))
    assert lines[0].split()[6:9] == ['TTFT', 'STARTUP', 'REASON']
    assert '0.104s  14.2x slower than the previous start: load_weights, kv_cache  serving glm-5' in lines[1]


def test_a_hung_smoke_request_fails_a_ready_row():
    row = build_row('smoke2', _deployed(wait=READY, smoke=HUNG), DEPLOY_PARTS, reached=True).to_json()
    assert (row['status'], row['ttft']) == ('failed', None)
    assert row['reason'].startswith('smoke request: no complete answer within 10s, not even the HTTP status line')
    assert 'startup' not in row  # no start recorded: a zombie is not a proven start


def test_skipped_or_reset_results_leave_the_cells_empty():
    row = build_row('rank1', _deployed(wait=READY, smoke={'skipped': True}, history={}), DEPLOY_PARTS, reached=True).to_json()
    assert row['status'] == 'ready'
    assert 'ttft' not in row and 'startup' not in row


def test_check_row_fails_when_the_smoke_request_fails_and_shows_the_newest_start():
    ready = {'status': 'ready', 'stage': 'ready', 'http': {'health': {'status': 200}}}
    starts = dict(STARTED, lines=['2026-12-01 14:02:11 SGLang 0.5.9 ready in 6m09s: 14.2x slower than the previous start',
                                  '2026-12-01 13:54:52 SGLang 0.5.9 ready in 26 s: first start of this configuration'])
    good = build_row('n1', {'check_ready': ready, 'check_smoke': SMOKE, 'check_starts': starts}, CHECK_PARTS, True).to_json()
    assert (good['status'], good['ttft'], good['startup']) == ('ready', 0.1039, STARTED['comparison']['short'])
    assert good['starts'] == starts['lines']
    bad = build_row('n2', {'check_ready': ready, 'check_smoke': HUNG, 'check_starts': {'record': None}}, CHECK_PARTS, True)
    assert bad.status == 'failed' and not bad.ok
    assert 'startup' not in bad.to_json()
