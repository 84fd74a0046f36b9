# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark statistics and the accept / regress decision (module_utils/bench/_stats.py), the results store and the
summary line (module_utils/bench/_run.py)."""

from __future__ import annotations

import json
import os

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _run as bm
from ansible_collections.llmops.sglang.plugins.module_utils.bench._stats import (
    BenchmarkResult,
    LevelResult,
    RunResult,
    decide,
    load_key,
    percentile,
    spread_pct,
)

LOAD = bm.Load(concurrency=[64])


def result(*levels, model='zai-org/GLM-5-FP8'):
    """levels: (concurrency, [output tok/s of each run])."""
    return BenchmarkResult(key=load_key(model, LOAD.key_fields()), model=model, load=LOAD.key_fields(), client='builtin',
                           levels=[LevelResult(c, [RunResult(c, completed=64, output_tps=t) for t in runs]) for c, runs in levels])


@pytest.mark.parametrize('values,pct,expected', [
    ([1, 2, 3, 4], 50, 2.5),          # numpy.percentile([1,2,3,4], 50) == 2.5
    ([1, 2, 3, 4], 99, 3.97),         # numpy: 3.97
    ([10.0], 99, 10.0),
    ([3, 1, 2], 0, 1),
    ([], 50, None),
    ([None, 4, None], 50, 4),
])
def test_percentile_interpolates_as_numpy_does(values, pct, expected):
    assert percentile(values, pct) == pytest.approx(expected) if expected is not None else percentile(values, pct) is None


def test_spread_is_range_over_median():
    assert spread_pct([1800, 1867, 1900]) == pytest.approx(100 / 1867 * 100)
    assert spread_pct([1867]) is None


def test_the_seeds_fusion_regression_is_detected():
    verdict = decide(result((64, [1860, 1867, 1875])), result((64, [236, 240, 231])), 10)
    assert verdict.to_json() == {'status': 'regressed', 'accepted': False, 'threshold_pct': 10, 'change_pct': -87.36,
                                 'baseline_tps': 1867, 'current_tps': 236, 'concurrency': 64, 'noisy': False}


def test_within_threshold_or_better_is_accepted():
    assert decide(result((64, [1867] * 3)), result((64, [1700, 1710, 1720])), 10).status == 'accepted'   # -8 %
    assert decide(result((64, [1867] * 3)), result((64, [2800] * 3)), 10).change_pct == pytest.approx(49.97, abs=0.01)
    assert decide(result((64, [1867] * 3)), result((64, [1600] * 3)), 10).status == 'regressed'   # -14 %


def test_no_baseline_or_no_common_level_is_a_first_result():
    assert decide(None, result((64, [236])), 10).to_json()['status'] == 'first'
    assert decide(result((512, [2800])), result((64, [236])), 10).status == 'first'


def test_the_worst_level_decides():
    verdict = decide(result((64, [1867]), (512, [2800])), result((64, [1900]), (512, [2000])), 10)
    assert (verdict.status, verdict.concurrency, round(verdict.change_pct)) == ('regressed', 512, -29)


def test_runs_that_disagree_more_than_the_threshold_are_noisy():
    verdict = decide(result((64, [1867] * 3)), result((64, [1500, 1850, 2100])), 10)
    assert (verdict.status, verdict.noisy) == ('accepted', True)


def test_a_level_where_nothing_completed_counts_as_zero():
    failed = result((64, [0.0, 0.0]))
    assert decide(result((64, [1867])), failed, 10).change_pct == -100


def test_result_round_trips_through_json():
    original = result((64, [1860, 1867, 1875]), (512, [2790, 2800]))
    data = json.loads(json.dumps(original.to_json()))
    assert BenchmarkResult.from_json(data) == original
    assert data['levels'][0]['output_tps'] == 1867 and data['levels'][0]['spread_pct'] == 0.80


def test_load_key_names_model_and_every_load_setting():
    assert load_key('m', bm.Load(concurrency=[512, 64]).key_fields()) == (
        'model=m concurrency=64,512 dataset=random-ids input_len=256 num_prompts=0 output_len=256 seed=1')


def test_invalid_load_says_what_is_wrong():
    with pytest.raises(bm.BenchmarkError) as err:
        bm.Load(concurrency=[0], repeats=0).check()
    assert err.value.msg == 'Invalid load: concurrency must list levels of 1 or more (got [0]); repeats must be 1 or more (got 0).'


def test_summary_line():
    baseline, current = result((64, [1860, 1867, 1875])), result((64, [236, 240, 231]))
    assert bm.summary(current, decide(baseline, current, 10)) == '236 tok/s against 1867 (-87 %) at concurrency 64, spread 4 % over 3 runs'
    assert bm.summary(current, decide(None, current, 10)) == (
        '236 tok/s (no earlier result for this model and load) at concurrency 64, spread 4 % over 3 runs')


def test_store_keeps_one_result_per_key_and_replaces_atomically(tmp_path):
    path = str(tmp_path / 'sglang.benchmark.json')
    assert bm.read_store(path) == ({}, None)
    first, other = result((64, [1867])), result((64, [900]), model='other/model')
    bm.write_store(path, {first.key: first, other.key: other})
    assert bm.read_store(path) == ({first.key: first, other.key: other}, None)
    assert oct(os.stat(path).st_mode & 0o777) == '0o600'
    assert sorted(os.listdir(str(tmp_path))) == ['sglang.benchmark.json']


@pytest.mark.parametrize('mangle, why', [
    (lambda data: {'format': 99}, 'not a benchmark store of format 1'),
    (lambda data: dict(data, results=['x']), 'results is not a mapping'),
    (lambda data: {'format': 1, 'results': {k: dict(v, levels='x') for k, v in data['results'].items()}},
     "results['m|x'].levels is a string, not a list"),
    (lambda data: {'format': 1, 'results': {k: dict(v, levels=[{'concurrency': '64', 'runs': []}]) for k, v in data['results'].items()}},
     "results['m|x'].levels[0].concurrency is a string, not an integer"),
    (lambda data: {'format': 1, 'results': {k: dict(v, levels=[{'concurrency': 64, 'runs': [{'concurrency': 64, 'output_tps': 'fast'}]}])
                                            for k, v in data['results'].items()}},
     "results['m|x'].levels[0].runs[0].output_tps is a string, not a number"),
])
def test_a_damaged_store_is_set_aside_named_and_started_anew(tmp_path, mangle, why):
    path = tmp_path / 'sglang.benchmark.json'
    good = result((64, [1867]), model='m')
    good.key = 'm|x'
    bm.write_store(str(path), {good.key: good})
    path.write_text(json.dumps(mangle(json.loads(path.read_text()))))
    store, damage = bm.read_store(str(path))
    assert (store, damage.why) == ({}, why)
    assert damage.kept_as.startswith(str(path) + '.damaged-') and not path.exists()


def test_measure_repeats_every_level_and_stops_sampling_without_figures():
    calls, samplers = [], []

    class NoGpu:
        def start(self):
            samplers.append(self)

        def stop(self):
            return {'power_w': None, 'power_limit_w': None, 'gpu_util_pct': None}

    def run_level(concurrency, num_prompts):
        calls.append((concurrency, num_prompts))
        return RunResult(concurrency, completed=num_prompts, output_tps=100.0 * concurrency)

    load = bm.Load(concurrency=[1, 4], repeats=2)
    measured = bm.measure(load, 'm', 'builtin', run_level, NoGpu)
    assert calls == [(1, 4), (1, 4), (4, 16), (4, 16)]
    assert len(samplers) == 1
    assert [level.metric('output_tps') for level in measured.levels] == [100.0, 400.0]
