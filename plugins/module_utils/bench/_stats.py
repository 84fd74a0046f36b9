# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Benchmark results of an SGLang server and the accept / regress decision.

Pure data and pure functions: one run at one concurrency level (``RunResult``), the repeats of a level summarised by
their medians and spread (``LevelResult``), a whole benchmark (``BenchmarkResult``) and its comparison with the last
accepted one (``Verdict``). Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import dataclasses
import math
from typing import List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.host._state_file import typed

FORMAT = 1

# Metrics a run reports, all floats (tokens/s, milliseconds, watts, percent); None when not measured.
RUN_METRICS = ('output_tps', 'total_tps', 'ttft_p50_ms', 'ttft_p99_ms', 'itl_p50_ms', 'itl_p99_ms',
               'power_w', 'power_limit_w', 'gpu_util_pct')


def percentile(values, pct):
    """The ``pct`` percentile of ``values`` with linear interpolation (numpy's default); None for no values."""
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    rank = (len(ordered) - 1) * pct / 100.0
    low = int(math.floor(rank))
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values):
    return percentile(values, 50)


def spread_pct(values):
    """(max - min) / median in percent: how far the repeats of one measurement lie apart; None below two values."""
    present = [v for v in values if v is not None]
    mid = median(present)
    if len(present) < 2 or not mid:
        return None
    return (max(present) - min(present)) / mid * 100.0


@dataclasses.dataclass
class RunResult:
    """One run at one concurrency level."""

    concurrency: int
    completed: int = 0
    failed: int = 0
    duration_s: float = 0.0
    output_tps: Optional[float] = None
    total_tps: Optional[float] = None
    ttft_p50_ms: Optional[float] = None
    ttft_p99_ms: Optional[float] = None
    itl_p50_ms: Optional[float] = None
    itl_p99_ms: Optional[float] = None
    power_w: Optional[float] = None
    power_limit_w: Optional[float] = None
    gpu_util_pct: Optional[float] = None
    errors: List[str] = dataclasses.field(default_factory=list)

    def to_json(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data, where='run'):
        return typed(cls, data, where)


@dataclasses.dataclass
class LevelResult:
    """The repeats at one concurrency level: each metric is the median of the runs; ``spread_pct`` is the spread of
    output tokens/s over the runs."""

    concurrency: int
    runs: List[RunResult] = dataclasses.field(default_factory=list)

    def metric(self, name):
        return median([getattr(run, name) for run in self.runs])

    @property
    def spread_pct(self):
        return spread_pct([run.output_tps for run in self.runs])

    def to_json(self):
        data = {'concurrency': self.concurrency, 'runs': [run.to_json() for run in self.runs],
                'spread_pct': _rounded(self.spread_pct)}
        data.update((name, _rounded(self.metric(name))) for name in RUN_METRICS)
        return data

    @classmethod
    def from_json(cls, data, where='level'):
        """Every field checked (host/_state_file.typed); the medians are computed again, never read."""
        return typed(cls, data, where)


@dataclasses.dataclass
class BenchmarkResult:
    """A whole benchmark: what was measured (``key``: model and load), how (``client``) and every level."""

    key: str
    model: str
    load: dict
    client: str
    levels: List[LevelResult] = dataclasses.field(default_factory=list)
    measured_at: str = ''

    def headline(self):
        """The level the verdict and the summary line speak of: the highest concurrency."""
        return max(self.levels, key=lambda level: level.concurrency) if self.levels else None

    def to_json(self):
        return {'format': FORMAT, 'key': self.key, 'model': self.model, 'load': dict(self.load), 'client': self.client,
                'measured_at': self.measured_at, 'levels': [level.to_json() for level in self.levels]}

    @classmethod
    def from_json(cls, data, where='result'):
        return typed(cls, data, where)


@dataclasses.dataclass
class Verdict:
    """The comparison of a benchmark with the last accepted one for the same model and load.

    ``status``: ``first`` (no baseline yet: accepted), ``accepted`` (within the threshold or better), ``regressed``.
    ``change_pct`` is the worst relative change of median output tokens/s over the levels both measured.
    ``noisy`` is set when a spread is above the threshold: the runs disagree more than the change that counts.
    """

    status: str
    threshold_pct: float
    change_pct: float = None
    baseline_tps: float = None
    current_tps: float = None
    concurrency: int = None
    noisy: bool = False

    @property
    def accepted(self):
        return self.status in ('first', 'accepted')

    def to_json(self):
        data = dataclasses.asdict(self)
        data['change_pct'] = _rounded(self.change_pct)
        data['accepted'] = self.accepted
        return data


def decide(baseline, current, threshold_pct):
    """Accept or reject ``current`` (BenchmarkResult) against ``baseline`` (BenchmarkResult or None).

    The medians of output tokens/s are compared level by level (the levels both measured); the worst level decides.
    A drop of more than ``threshold_pct`` percent is a regression. A level without any completed request counts as
    zero tokens/s. Never a regression without a baseline.
    """
    noisy = any((level.spread_pct or 0) > threshold_pct for level in current.levels)
    if baseline is None:
        return Verdict('first', threshold_pct, noisy=noisy)
    before = {level.concurrency: level for level in baseline.levels}
    worst = None
    for level in current.levels:
        old = before.get(level.concurrency)
        if old is None or not old.metric('output_tps'):
            continue
        new_tps = level.metric('output_tps') or 0.0
        change = (new_tps - old.metric('output_tps')) / old.metric('output_tps') * 100.0
        noisy = noisy or (old.spread_pct or 0) > threshold_pct
        if worst is None or change < worst.change_pct:
            worst = Verdict('accepted', threshold_pct, change, old.metric('output_tps'), new_tps, level.concurrency)
    if worst is None:
        # Nothing in common (another load): the baseline says nothing about this result.
        return Verdict('first', threshold_pct, noisy=noisy)
    worst.noisy = noisy
    if worst.change_pct < -threshold_pct:
        worst.status = 'regressed'
    return worst


def load_key(model, load):
    """The key a baseline is kept under: the model and every setting of the load that changes the figures."""
    parts = ['model=%s' % model]
    parts.extend('%s=%s' % (name, _key_value(load[name])) for name in sorted(load))
    return ' '.join(parts)


def _key_value(value):
    if isinstance(value, (list, tuple)):
        return ','.join(str(v) for v in value)
    return str(value)


def _rounded(value, digits=2):
    return None if value is None else round(float(value), digits)
