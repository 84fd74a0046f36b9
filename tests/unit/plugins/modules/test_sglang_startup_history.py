# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_startup_history module in-process against real files. The unit option (InvocationID, the unit's start
time) needs systemd as PID 1: the molecule scenario sglang_service covers it on real hosts."""

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.modules import sglang_startup_history

STAGES = [{'stage': 'start', 'log_elapsed': 0.0}, {'stage': 'load_weights', 'log_elapsed': 3.0},
          {'stage': 'kv_cache', 'log_elapsed': 9.0}, {'stage': 'ready', 'log_elapsed': 17.0}]


def run_module(capsys, args, check_mode=False, diff=False):
    args = dict(args)
    if check_mode:
        args['_ansible_check_mode'] = True
    if diff:
        args['_ansible_diff'] = True
    with patch_module_args(args):
        with pytest.raises(SystemExit) as info:
            sglang_startup_history.main()
    result = json.loads(capsys.readouterr().out)
    assert (info.value.code == 0) != bool(result.get('failed')), result
    return result


def present(tmp_path, **extra):
    args = {'path': str(tmp_path / 'sglang.starts.json'), 'state': 'present', 'config': {'version': '0.5.9', 'args': {'tp': 8}},
            'sglang_version': '0.5.9', 'reasons': ['no deployment record yet'], 'stages': STAGES, 'wait_elapsed': 4.2,
            'smoke': {'ok': True, 'ttft': 0.12, 'total': 0.5, 'tokens': 8, 'model': 'glm-5', 'endpoint': 'generate',
                      'text': 'not kept', 'sent': {'body': 'not kept'}}}
    args.update(extra)
    return args


def test_records_reads_back_and_exports_metrics(tmp_path, capsys):
    prom = tmp_path / 'sglang.prom'
    first = run_module(capsys, present(tmp_path, metrics_path=str(prom)), diff=True)
    assert first['changed'] is True
    record = first['record']
    assert record['stages'] == {'start': 3.0, 'load_weights': 6.0, 'kv_cache': 8.0}
    assert (record['total'], record['wait_elapsed'], record['sglang_version']) == (17.0, 4.2, '0.5.9')
    assert record['smoke'] == {'ok': True, 'ttft': 0.12, 'total': 0.5, 'tokens': 8, 'model': 'glm-5', 'endpoint': 'generate'}
    assert record['reasons'] == ['no deployment record yet']
    assert len(record['config']) == 16
    assert first['comparison']['short'] == 'first start of this configuration'
    assert first['msg'] == ('start of the server recorded (1 in the history): ready in 17 s, smoke TTFT 0.120s; '
                            'first start of this configuration')
    assert json.loads(first['diff']['after']) == record
    assert prom.read_text() == first['metrics']
    assert 'sglang_startup_seconds{unit="unknown",stage="kv_cache"} 8.0\n' in first['metrics']
    oct_mode = oct(os.stat(str(prom)).st_mode & 0o777)
    assert oct_mode == '0o644'
    slower = STAGES[:2] + [{'stage': 'kv_cache', 'log_elapsed': 9.0}, {'stage': 'ready', 'log_elapsed': 60.0}]
    second = run_module(capsys, present(tmp_path, stages=slower, keep=2))
    assert second['comparison']['short'] == '3.5x slower than the previous start: kv_cache'
    assert second['comparison']['summary'] == 'kv_cache 51 s, previous start 8 s: FlashInfer autotune or DeepGEMM JIT cache cold?'
    other = run_module(capsys, present(tmp_path, config={'version': '0.5.10'}, keep=2))
    assert other['comparison']['short'] == 'first start of this configuration'
    assert other['count'] == 2  # keep=2 dropped the first record
    query = run_module(capsys, {'path': str(tmp_path / 'sglang.starts.json'), 'show': 5})
    assert query['changed'] is False
    assert [r['total'] for r in query['records']] == [17.0, 60.0]  # newest first
    assert query['record'] == other['record']


def test_check_mode_writes_nothing(tmp_path, capsys):
    result = run_module(capsys, present(tmp_path, metrics_path=str(tmp_path / 'm.prom')), check_mode=True)
    assert result['changed'] is True
    assert os.listdir(str(tmp_path)) == []


def test_query_of_no_history(tmp_path, capsys):
    result = run_module(capsys, {'path': str(tmp_path / 'none.json')})
    assert (result['record'], result['records'], result['count'], result['msg']) == (None, [], 0, 'no start recorded yet')


def test_bad_input_says_what_to_do(tmp_path, capsys):
    result = run_module(capsys, present(tmp_path, metrics_path=str(tmp_path / 'sglang.txt')))
    assert result['failed'] and 'must end in .prom' in result['msg']
    result = run_module(capsys, present(tmp_path, path=str(tmp_path / 'missing' / 'h.json')))
    assert result['failed'] and 'does not exist' in result['msg']
    result = run_module(capsys, {'path': str(tmp_path / 'h.json'), 'state': 'present'})
    assert result['failed'] and 'config' in result['msg']


def test_a_history_with_fields_of_the_wrong_type_is_set_aside_and_the_start_recorded(tmp_path, capsys):
    # the issue 25 case: valid JSON, wrong types; the module failed with "type str doesn't define __round__ method"
    # after the server was restarted, and every rerun failed the same way until the file was removed by hand
    path = tmp_path / 'sglang.starts.json'
    bad = json.dumps({'format': 1, 'records': [{'recorded_at': '2026-12-01T10:00:00Z', 'config': 'c', 'total': 'x',
                                                'caches': 'warm'}]})
    path.write_text(bad)
    query = run_module(capsys, {'path': str(path), 'show': 5})
    assert (query['count'], query['damaged']['why'], query['damaged']['kept_as']) == (
        0, 'records[0].total is a string, not a number', None)
    assert path.read_text() == bad  # a query moves nothing
    result = run_module(capsys, present(tmp_path))
    assert result['changed'] is True and result['count'] == 1
    assert result['damaged']['why'] == 'records[0].total is a string, not a number'
    assert open(result['damaged']['kept_as']).read() == bad
    assert [w['event']['msg'] for w in result['warnings']][-1:] == [
        'The startup history %s was damaged (records[0].total is a string, not a number): it was kept as %s, and this run '
        'went on as if it were absent.' % (path, result['damaged']['kept_as'])]
    again = run_module(capsys, {'path': str(path), 'show': 5})
    assert (again['count'], again['damaged']) == (1, None)
