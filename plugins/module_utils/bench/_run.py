# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One benchmark of a running SGLang server: the load, the runs, the accepted results kept on the host.

``measure`` runs every concurrency level ``repeats`` times with SGLang's bench_serving or the built-in client,
sampling GPU power during each run; the accepted results (one per model and load) live in one JSON file next to the
deployment record, replaced atomically. Private module_utils: runs on the target host, Python 3.9+.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os

from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import write_atomic
from ansible_collections.llmops.sglang.plugins.module_utils.host._state_file import StateFormatError, StateReadError, read_state
from ansible_collections.llmops.sglang.plugins.module_utils.bench._stats import (
    BenchmarkResult,
    LevelResult,
    load_key,
)

STORE_FORMAT = 1


class BenchmarkError(Exception):
    """A benchmark that cannot run or a store that cannot be read; ``msg`` says what and what to try."""

    def __init__(self, msg):
        super(BenchmarkError, self).__init__(msg)
        self.msg = msg


@dataclasses.dataclass
class Load:
    """What is sent: the same for every run, so that two results of one key can be compared."""

    concurrency: list
    input_len: int = 256
    output_len: int = 256
    num_prompts: int = 0
    repeats: int = 3
    seed: int = 1
    dataset: str = 'random-ids'

    def prompts_at(self, concurrency):
        """Requests per run: ``num_prompts``, or four rounds of the level's concurrency."""
        return self.num_prompts or concurrency * 4

    def key_fields(self):
        """The settings that change the figures (the repeats and the bound on duration do not)."""
        return {'concurrency': sorted(self.concurrency), 'input_len': self.input_len, 'output_len': self.output_len,
                'num_prompts': self.num_prompts, 'seed': self.seed, 'dataset': self.dataset}

    def check(self):
        problems = []
        if not self.concurrency or any(c < 1 for c in self.concurrency):
            problems.append('concurrency must list levels of 1 or more (got %s)' % (self.concurrency,))
        for name in ('input_len', 'output_len', 'repeats'):
            if getattr(self, name) < 1:
                problems.append('%s must be 1 or more (got %s)' % (name, getattr(self, name)))
        if self.num_prompts < 0:
            problems.append('num_prompts must be 0 (four rounds of each level) or more (got %s)' % self.num_prompts)
        if problems:
            raise BenchmarkError('Invalid load: %s.' % '; '.join(problems))


def measure(load, model, client_name, run_level, sampler_factory=None):
    """Run every level ``load.repeats`` times; returns a BenchmarkResult.

    ``run_level(concurrency, num_prompts) -> RunResult`` runs one level once (bench_serving or the built-in client).
    ``sampler_factory() -> GpuSampler`` (or None) samples GPU power during each run; after the first run without
    figures no further sampler is started.
    """
    levels = []
    sampling = sampler_factory is not None
    for concurrency in load.concurrency:
        level = LevelResult(concurrency=concurrency)
        for _repeat in range(load.repeats):
            sampler = sampler_factory() if sampling else None
            if sampler is not None:
                sampler.start()
            run = run_level(concurrency, load.prompts_at(concurrency))
            if sampler is not None:
                gpu = sampler.stop()
                sampling = gpu['power_w'] is not None
                for name, value in gpu.items():
                    setattr(run, name, value)
            level.runs.append(run)
        levels.append(level)
    return BenchmarkResult(key=load_key(model, load.key_fields()), model=model, load=load.key_fields(), client=client_name,
                           levels=levels, measured_at=_now())


def _store_from_json(data):
    if not isinstance(data, dict) or data.get('format') != STORE_FORMAT:
        raise StateFormatError('not a benchmark store of format %d' % STORE_FORMAT)
    results = data.get('results') or {}
    if not isinstance(results, dict):
        raise StateFormatError('results is not a mapping')
    return {key: BenchmarkResult.from_json(value, 'results[%r]' % key) for key, value in results.items()}


def read_store(path, check_mode=False):
    """``({key: BenchmarkResult}, damage)``: the accepted results in ``path``, empty when the file does not exist. A
    damaged store is set aside and named (host/_state_file): the next accepted result starts it anew."""
    try:
        store, damage = read_state(path, _store_from_json, check_mode=check_mode)
    except StateReadError as err:
        raise BenchmarkError(err.msg)
    return store or {}, damage


def write_store(path, results):
    """Replace ``path`` atomically with ``results`` (``{key: BenchmarkResult}``), mode 0600."""
    data = {'format': STORE_FORMAT, 'results': {key: result.to_json() for key, result in sorted(results.items())}}
    try:
        write_atomic(path, (json.dumps(data, indent=1, sort_keys=True) + '\n').encode('utf-8'), os.replace, suffix='.tmp')
    except OSError as err:
        raise BenchmarkError('Cannot write the accepted benchmark results to %s: %s. Its directory must exist and be '
                             'writable (run as root: become: true).' % (path, err))


def headline(result, verdict):
    """``236 tok/s against 1867 (-87 %)``: median output tokens/s at the highest level, and the baseline's."""
    level = result.headline()
    text = '%s tok/s' % _figure(level.metric('output_tps') if level else None)
    if verdict is not None and verdict.baseline_tps is not None:
        text += ' against %s (%+.0f %%)' % (_figure(verdict.baseline_tps), verdict.change_pct)
    return text


def summary(result, verdict):
    """One line: the headline, at which concurrency, and the spread of the runs."""
    level = result.headline()
    text = headline(result, verdict)
    if verdict is not None and verdict.baseline_tps is None:
        text += ' (no earlier result for this model and load)'
    if level is not None:
        text += ' at concurrency %d' % level.concurrency
        if level.spread_pct is not None:
            text += ', spread %.0f %% over %d runs' % (level.spread_pct, len(level.runs))
    return text


def _figure(value):
    return '-' if value is None else '%.0f' % value


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')
