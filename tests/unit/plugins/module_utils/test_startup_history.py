# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The startup history (plugins/module_utils/deploy/_startup_history.py): stage durations from a real readiness wait's stages,
the comparison with earlier starts, the bounded atomic file, cache warmth from real file times, Prometheus text."""

from __future__ import annotations

import json
import os
import stat
import time

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _startup_history as sh

# The stages wait_for_sglang returned for the recorded GB10 start (gb10-dflash-spec-decoding-ready), log_elapsed from
# SGLang's own timestamps: 23:37:49 init ... 23:43:47 ready.
GB10_STAGES = [
    {'stage': 'start', 'elapsed': 0.0, 'log_elapsed': 0.0, 'line': None},
    {'stage': 'init_distributed', 'elapsed': 0.1, 'log_elapsed': 11.0, 'line': '[2026-08-01 23:37:49] Init torch distributed begin.'},
    {'stage': 'load_weights', 'elapsed': 0.1, 'log_elapsed': 12.0, 'line': '[2026-08-01 23:37:50] Load weight begin.'},
    {'stage': 'kv_cache', 'elapsed': 0.3, 'log_elapsed': 121.0, 'line': '[2026-08-01 23:39:39] Load weight end.'},
    {'stage': 'cuda_graph', 'elapsed': 0.4, 'log_elapsed': 144.0, 'line': '[2026-08-01 23:40:02] Capture target prefill'},
    {'stage': 'http_listening', 'elapsed': 0.9, 'log_elapsed': 365.0, 'line': '[2026-08-01 23:43:43] INFO: Uvicorn running'},
    {'stage': 'warmup', 'elapsed': 1.0, 'log_elapsed': 366.0, 'line': '[2026-08-01 23:43:44] GET /model_info'},
    {'stage': 'ready', 'elapsed': 1.2, 'log_elapsed': 369.0, 'line': '[2026-08-01 23:43:47] The server is fired up'},
]


def rec(total, config='c1', invocation=None, cache=None, **stages):
    return sh.StartRecord(recorded_at='2026-12-01T13:00:00Z', config=config, unit='sglang.service', invocation=invocation,
                          stages=dict(stages), total=total, caches={'state': cache, 'dirs': {}} if cache else None)


def test_stage_durations_run_from_one_stage_line_to_the_next():
    durations, total = sh.stage_durations(GB10_STAGES)
    assert durations == {'start': 11.0, 'init_distributed': 1.0, 'load_weights': 109.0, 'kv_cache': 23.0,
                         'cuda_graph': 221.0, 'http_listening': 1.0, 'warmup': 3.0}
    assert list(durations) == ['start', 'init_distributed', 'load_weights', 'kv_cache', 'cuda_graph', 'http_listening',
                               'warmup']
    assert total == 369.0


def test_stage_durations_skip_untimed_stages_and_an_unfinished_start():
    stages = [{'stage': 'start', 'log_elapsed': 0.0}, {'stage': 'load_weights', 'log_elapsed': None},
              {'stage': 'kv_cache', 'log_elapsed': 30.0}]
    assert sh.stage_durations(stages) == ({'start': 30.0}, None)
    assert sh.stage_durations([]) == ({}, None)


def test_first_start_of_a_configuration():
    cmp = sh.compare(rec(45.0, cuda_graph=20.0), [])
    assert (cmp.previous, cmp.slower, cmp.ratio) == (0, [], None)
    assert cmp.short == cmp.summary == 'first start of this configuration'


def test_a_much_slower_stage_is_named_with_the_previous_range_and_a_hint():
    previous = [rec(60.0, cuda_graph=41.0, load_weights=6.0), rec(66.0, cuda_graph=47.0, load_weights=6.0),
                rec(63.0, cuda_graph=44.0, load_weights=7.0)]
    cmp = sh.compare(rec(270.0, cuda_graph=250.0, load_weights=7.0), previous)
    assert cmp.previous == 3
    assert [(s.stage, s.seconds, s.previous) for s in cmp.slower] == [('cuda_graph', 250.0, [41.0, 47.0, 44.0]),
                                                                      ('total', 270.0, [60.0, 66.0, 63.0])]
    assert cmp.summary == 'cuda_graph 4m10s, previous 3 starts 41-47 s: autotune or compile cache cold?'
    assert cmp.ratio == 4.29
    assert cmp.short == '4.3x slower than the previous 3 starts: cuda_graph'


def test_the_hint_says_so_when_the_caches_were_cold():
    cmp = sh.compare(rec(200.0, cache='cold', kv_cache=150.0), [rec(60.0, cache='warm', kv_cache=12.0)])
    assert cmp.summary == ('kv_cache 2m30s, previous start 12 s: compile caches were cold (first start of this SGLang '
                           'version?)')
    assert cmp.short == '3.3x slower than the previous start: kv_cache'


def test_small_or_proportional_differences_are_not_slower():
    # 2 s -> 5 s is 2.5x but only 3 s more (second-resolution timestamps); 100 s -> 180 s is 80 s more but under 2x
    cmp = sh.compare(rec(190.0, start=5.0, load_weights=180.0), [rec(105.0, start=2.0, load_weights=100.0)])
    assert cmp.slower == []
    assert cmp.short == 'as fast as the previous start'
    assert cmp.summary == 'as fast as the previous start (3m10s, before 1m45s)'


def test_a_warm_start_after_cold_ones_is_faster():
    cmp = sh.compare(rec(45.0, cuda_graph=20.0), [rec(280.0, cuda_graph=250.0), rec(300.0, cuda_graph=270.0)])
    assert cmp.slower == []
    assert cmp.short == cmp.summary == '6.4x faster than the previous 2 starts (45 s, before 4m40s-5m00s)'


def test_only_the_last_five_timed_starts_count():
    previous = [rec(None)] + [rec(300.0, cuda_graph=280.0)] * 2 + [rec(40.0, cuda_graph=20.0)] * 5 + [rec(400.0, cuda_graph=390.0)]
    cmp = sh.compare(rec(60.0, cuda_graph=40.0), previous)
    assert cmp.previous == 5
    assert [s.previous for s in cmp.slower] == []  # 300 s starts are older than the last five


def test_history_is_bounded_and_records_a_start_once(tmp_path):
    path = str(tmp_path / 'sglang.starts.json')
    history, damage = sh.read(path)
    assert (history.records, damage) == ([], None)
    for n in range(7):
        history = history.appended(rec(40.0 + n, invocation='inv%d' % n), keep=5)
    sh.write(path, history)
    again, _damage = sh.read(path)
    assert [r.invocation for r in again.records] == ['inv2', 'inv3', 'inv4', 'inv5', 'inv6']
    assert again.records[-1] == history.records[-1]
    assert again.knows(rec(1.0, invocation='inv6'))
    assert not again.knows(rec(1.0, invocation='inv9'))
    assert not again.knows(rec(1.0, invocation=None))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert [r.invocation for r in again.same_config(again.records[-1])] == ['inv5', 'inv4', 'inv3', 'inv2']
    assert os.listdir(str(tmp_path)) == ['sglang.starts.json']  # no temporary file left


GOOD = {'recorded_at': '2026-12-01T10:00:00Z', 'config': 'c', 'stages': {'load_weights': 6.0}, 'total': 40.0}


@pytest.mark.parametrize('content, why', [
    (b'not json', 'not JSON: Expecting value: line 1 column 1 (char 0)'),
    (b'\xff\xfe\x00garbage', 'not UTF-8 text'),
    (b'[1, 2]', 'not a startup history of format 1'),
    (b'{"format": 1, "records": "x"}', 'records is not a list'),
    (b'{"format": 9, "records": []}', 'not a startup history of format 1'),
    (b'{"format": 1, "records": [{"config": "c"}]}', 'records[0].recorded_at is missing'),
    # the issue's case: valid JSON, wrong types; the module failed with "type str doesn't define __round__ method"
    (json.dumps({'format': 1, 'records': [dict(GOOD, total='x')]}).encode(), 'records[0].total is a string, not a number'),
    (json.dumps({'format': 1, 'records': [dict(GOOD, caches='warm')]}).encode(), 'records[0].caches is a string, not a mapping'),
    (json.dumps({'format': 1, 'records': [dict(GOOD, stages={'start': 'slow'})]}).encode(),
     "records[0].stages['start'] is a string, not a number"),
    (json.dumps({'format': 1, 'records': [dict(GOOD, reasons=[1])]}).encode(), 'records[0].reasons[0] is an integer, not a string'),
    (b'{"format": 1, "records": [' + b' ' * (5 * 1024 * 1024) + b']}', 'larger than 4194304 bytes'),
])
def test_a_damaged_history_is_set_aside_named_and_started_anew(tmp_path, content, why):
    path = tmp_path / 'h.json'
    path.write_bytes(content)
    history, damage = sh.read(str(path))
    assert history.records == [] and (damage.path, damage.why) == (str(path), why)
    assert damage.kept_as.startswith(str(path) + '.damaged-') and not path.exists()
    assert open(damage.kept_as, 'rb').read() == content  # kept, byte for byte
    sh.write(str(path), history.appended(rec(1.0, invocation='i'), keep=3))
    assert json.loads(path.read_text())['records'][0]['invocation'] == 'i'
    assert sh.read(str(path))[1] is None


def test_a_damaged_history_is_left_in_place_in_check_mode(tmp_path):
    path = tmp_path / 'h.json'
    path.write_bytes(b'{"format": 1, "records": [{"config": "c"}]}')
    history, damage = sh.read(str(path), check_mode=True)
    assert (history.records, damage.kept_as) == ([], None) and path.exists()
    assert os.listdir(str(tmp_path)) == ['h.json']


def test_writing_into_a_missing_directory_says_what_to_do(tmp_path):
    with pytest.raises(sh.HistoryError) as err:
        sh.write_text(str(tmp_path / 'nope' / 'sglang.prom'), 'x\n')
    assert 'textfile-collector directory' in err.value.msg


def test_cache_state_from_file_times(tmp_path):
    started = time.time() - 100
    warm, cold, unused = tmp_path / 'deep_gemm', tmp_path / 'triton', tmp_path / 'inductor'
    (warm / 'kernels').mkdir(parents=True)
    cold.mkdir()
    unused.mkdir()
    old = warm / 'kernels' / 'a.so'
    old.write_bytes(b'x')
    os.utime(str(old), (started - 3600, started - 3600))
    (warm / 'b.so').write_bytes(b'y')
    (cold / 'c.cubin').write_bytes(b'z')
    state = sh.cache_state({'deep_gemm': str(warm), 'triton': str(cold), 'inductor': str(unused)}, started)
    assert state['dirs'] == {
        'deep_gemm': {'path': str(warm), 'files_before': 1, 'files': 2, 'state': 'warm'},
        'triton': {'path': str(cold), 'files_before': 0, 'files': 1, 'state': 'cold'},
        'inductor': {'path': str(unused), 'files_before': 0, 'files': 0, 'state': 'unused'},
    }
    assert state['state'] == 'partly warm'
    assert sh.cache_state({'triton': str(cold)}, started)['state'] == 'cold'
    assert sh.cache_state({'deep_gemm': str(warm)}, started)['state'] == 'warm'
    assert sh.cache_state({'x': str(tmp_path / 'missing')}, started)['state'] == 'unused'


def test_seconds_and_ranges_read_like_the_issue():
    assert [sh.seconds_text(s) for s in (41.2, 59.6, 250, 3725)] == ['41 s', '1m00s', '4m10s', '1h02m']
    assert sh.range_text([41.0, 47.0, 44.0]) == '41-47 s'
    assert sh.range_text([45.0]) == '45 s'
    assert sh.range_text([280.0, 300.0]) == '4m40s-5m00s'


def _metrics_record():
    record = rec(369.0, invocation='i1', cache='warm', **sh.stage_durations(GB10_STAGES)[0])
    record.unit = 'sglang-"b".service'
    record.smoke = {'ttft': 0.142, 'total': 0.6, 'tokens': 8}
    return record


def test_prometheus_text_is_exact():
    cmp = sh.compare(_metrics_record(), [rec(60.0, cuda_graph=41.0)])
    text = sh.prometheus_text(_metrics_record(), cmp, None)
    lines = text.splitlines()
    assert text.endswith('\n') and not text.endswith('\n\n')
    assert lines[:3] == [
        '# HELP sglang_startup_seconds Seconds each startup stage of the last proven SGLang start took, from SGLang\'s own '
        'log timestamps (stage="total": first log line to ready).',
        '# TYPE sglang_startup_seconds gauge',
        'sglang_startup_seconds{unit="sglang-\\"b\\".service",stage="start"} 11.0',
    ]
    assert 'sglang_startup_seconds{unit="sglang-\\"b\\".service",stage="total"} 369.0' in lines
    assert 'sglang_startup_smoke_ttft_seconds{unit="sglang-\\"b\\".service"} 0.142' in lines
    assert 'sglang_startup_caches_warm{unit="sglang-\\"b\\".service"} 1.0' in lines
    assert 'sglang_startup_slowdown_ratio{unit="sglang-\\"b\\".service"} 6.15' in lines
    assert 'sglang_startup_last_timestamp_seconds{unit="sglang-\\"b\\".service"} 1796130000.0' in lines
    assert sum(1 for line in lines if line.startswith('# TYPE')) == 6


def test_prometheus_text_parses_with_the_reference_parser():
    parser = pytest.importorskip('prometheus_client.parser')
    text = sh.prometheus_text(_metrics_record(), sh.compare(_metrics_record(), []), 'sglang.service')
    families = dict((f.name, f) for f in parser.text_string_to_metric_families(text))
    assert sorted(families) == ['sglang_startup_caches_warm', 'sglang_startup_last_timestamp_seconds',
                                'sglang_startup_seconds', 'sglang_startup_smoke_seconds', 'sglang_startup_smoke_ttft_seconds']
    stages = dict((s.labels['stage'], s.value) for s in families['sglang_startup_seconds'].samples)
    assert stages == {'start': 11.0, 'init_distributed': 1.0, 'load_weights': 109.0, 'kv_cache': 23.0, 'cuda_graph': 221.0,
                      'http_listening': 1.0, 'warmup': 3.0, 'total': 369.0}
    assert all(f.type == 'gauge' for f in families.values())
    assert families['sglang_startup_seconds'].samples[0].labels == {'unit': 'sglang.service', 'stage': 'start'}


def test_history_lines_compare_each_start_with_the_ones_before_it():
    history = sh.History([rec(17.0, invocation='a', load_weights=6.0), rec(369.0, invocation='b', cache='warm', load_weights=109.0),
                          rec(20.0, config='other', invocation='c')])
    for r, v in zip(history.records, ('0.5.9', '0.5.9', '0.5.10')):
        r.sglang_version = v
    history.records[1].smoke = {'ttft': 0.0521}
    assert history.lines(5) == [
        '2026-12-01 13:00:00 SGLang 0.5.10 ready in 20 s: first start of this configuration',
        '2026-12-01 13:00:00 SGLang 0.5.9 ready in 6m09s, smoke TTFT 0.052s, caches warm: 21.7x slower than the previous '
        'start: load_weights',
        '2026-12-01 13:00:00 SGLang 0.5.9 ready in 17 s: first start of this configuration',
    ]
    assert len(history.lines(1)) == 1
    assert history.lines(0) == []


def test_stages_come_back_in_startup_order_whatever_the_json_order(tmp_path):
    path = str(tmp_path / 'h.json')
    first = rec(26.0, invocation='a', start=9.0, kv_cache=4.0, load_weights=6.0)
    sh.write(path, sh.History([first]))  # written with sorted keys: kv_cache before load_weights before start
    again = sh.read(path)[0].records[0]
    assert [s for s, _v in again.ordered_stages()] == ['start', 'load_weights', 'kv_cache']
    cmp = sh.compare(rec(369.0, kv_cache=23.0, load_weights=109.0, start=11.0), [again])
    assert [s.stage for s in cmp.slower] == ['load_weights', 'kv_cache', 'total']
    assert sh.prometheus_text(again, None, 'u').count('\nsglang_startup_seconds{') == 4  # three stages and the total
    assert sh.prometheus_text(again, None, 'u').index('stage="start"') < sh.prometheus_text(again, None, 'u').index('stage="kv_cache"')
