# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The startup history of an SGLang unit: one record per proven start, kept on the host, bounded.

A record says when the start happened, which SGLang version and configuration it ran, why it was started (the
no-change check's reasons), how long each startup stage took by SGLang's own log timestamps, what the smoke request
measured and whether the compile caches were warm. ``compare()`` puts a start beside the previous starts of the same
configuration and names the stages that got much slower; ``prometheus_text()`` renders the last start as
node_exporter textfile-collector metrics.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import write_atomic
from ansible_collections.llmops.sglang.plugins.module_utils.host._state_file import StateFormatError, StateReadError, read_state, typed
from ansible_collections.llmops.sglang.plugins.module_utils.log._classifier import STAGES

FORMAT = 1
# A stage counts as much slower when it took SLOWER_FACTOR times the slowest previous start and at least
# SLOWER_MIN_SECONDS more: second-resolution timestamps make short stages jitter by 100 % without meaning anything.
SLOWER_FACTOR = 2.0
SLOWER_MIN_SECONDS = 10.0
COMPARE_LAST = 5  # previous starts of the same configuration a start is compared with
CACHE_SCAN_LIMIT = 20000  # files looked at per cache directory (a warm TorchInductor cache holds thousands)

# Why a stage may have become slower; the cache-bound stages name the caches when the start ran cold.
HINTS = {
    'start': 'imports slower (cold page cache after an upgrade or reboot?)',
    'init_distributed': 'NCCL/network set-up slower?',
    'load_weights': 'weights not in the page cache, or slower storage?',
    'kv_cache': 'FlashInfer autotune or DeepGEMM JIT cache cold?',
    'cuda_graph': 'autotune or compile cache cold?',
    'http_listening': 'tokenizer or HTTP server start slower?',
    'warmup': 'first request compiled kernels (JIT cache cold?)',
}
CACHE_BOUND = ('kv_cache', 'cuda_graph', 'warmup')


class HistoryError(Exception):
    """A history that cannot be read or written; ``msg`` says what and what to do."""

    def __init__(self, msg):
        super(HistoryError, self).__init__(msg)
        self.msg = msg


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def stage_durations(stages):
    """Seconds spent in each stage, from ``wait_for_sglang``'s ``stages`` (``log_elapsed``: seconds from the run's first
    timestamped line to the line that began the stage). A stage lasts until the next stage began; ``ready`` has no
    duration but ends the one before it. Stages without a log time are left out. Returns ``(durations, total)``:
    an ordered dict of stage to seconds, and the seconds from the first line to ready (None when not reached)."""
    timed = [(s.get('stage'), s.get('log_elapsed')) for s in stages or []
             if isinstance(s, dict) and isinstance(s.get('log_elapsed'), (int, float))]
    durations = {}
    for (stage, begin), (_next, end) in zip(timed, timed[1:]):
        if stage != 'ready':
            durations[stage] = round(max(0.0, end - begin), 1)
    total = dict(timed).get('ready')
    return durations, (round(total, 1) if total is not None else None)


@dataclass
class StartRecord:
    """One proven start."""

    recorded_at: str
    config: str
    unit: Optional[str] = None
    invocation: Optional[str] = None
    started_at: Optional[str] = None
    sglang_version: Optional[str] = None
    reasons: List[str] = field(default_factory=list)
    stages: Dict[str, float] = field(default_factory=dict)
    total: Optional[float] = None
    wait_elapsed: Optional[float] = None
    smoke: Optional[dict] = None
    caches: Optional[dict] = None

    def to_json(self):
        return asdict(self)

    def ordered_stages(self):
        """(stage, seconds) in startup order (JSON objects may come back in any order)."""
        rank = dict((stage, index) for index, stage in enumerate(STAGES))
        return sorted(self.stages.items(), key=lambda item: (rank.get(item[0], len(STAGES)), item[0]))

    @classmethod
    def from_json(cls, data, where='record'):
        """The record in parsed JSON, every field checked; StateFormatError names the first field that is wrong."""
        return typed(cls, data, where)

    @property
    def cache_state(self):
        return (self.caches or {}).get('state')


@dataclass
class History:
    """The records of one unit, oldest first."""

    records: List[StartRecord] = field(default_factory=list)

    def to_json(self):
        return {'format': FORMAT, 'records': [r.to_json() for r in self.records]}

    @classmethod
    def from_json(cls, data):
        """The history in parsed JSON; StateFormatError when it is not one this collection wrote."""
        if not isinstance(data, dict) or data.get('format') != FORMAT:
            raise StateFormatError('not a startup history of format %d' % FORMAT)
        if not isinstance(data.get('records'), list):
            raise StateFormatError('records is not a list')
        return cls([StartRecord.from_json(r, 'records[%d]' % i) for i, r in enumerate(data['records'])])

    def knows(self, record):
        """Whether this start is recorded already (same unit invocation): a second run adds nothing."""
        return bool(record.invocation) and any(r.invocation == record.invocation and r.unit == record.unit
                                               for r in self.records)

    def appended(self, record, keep):
        """A new History with ``record`` last and at most ``keep`` records."""
        return History((self.records + [record])[-keep:])

    def lines(self, show):
        """One line per start for a person, the newest ``show`` starts first, each compared with the starts before it."""
        out = []
        for index in range(len(self.records) - 1, max(-1, len(self.records) - 1 - show), -1):
            record = self.records[index]
            earlier = History(self.records[:index]).same_config(record)
            out.append(start_line(record, compare(record, earlier)))
        return out

    def same_config(self, record):
        """Earlier records of ``record``'s configuration, newest first (``record`` itself excluded)."""
        return [r for r in reversed(self.records) if r.config == record.config and r is not record
                and not (record.invocation and r.invocation == record.invocation)]


def read(path, check_mode=False):
    """``(History, damage)`` at ``path``: empty when there is none; a damaged file is set aside (host/_state_file) and
    the history starts anew, with ``damage`` saying which file, why and where it was kept."""
    try:
        history, damage = read_state(path, History.from_json, check_mode=check_mode)
    except StateReadError as err:
        raise HistoryError(err.msg)
    return history or History(), damage


def write_text(path, text, mode=0o644):
    """Write ``text`` to ``path`` atomically with ``mode`` (readable by node_exporter for metrics)."""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise HistoryError('Cannot write %s: the directory %s does not exist. Create it first (for metrics: the '
                           'node_exporter textfile-collector directory, --collector.textfile.directory).' % (path, directory))

    def move(tmp, dest):
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    try:
        write_atomic(path, text.encode('utf-8'), move)
    except OSError as err:
        raise HistoryError('Cannot write %s: %s' % (path, err))


def write(path, history):
    write_text(path, json.dumps(history.to_json(), indent=1, sort_keys=True) + '\n')


def cache_state(dirs, started_epoch, limit=CACHE_SCAN_LIMIT):
    """Whether each compile-cache directory held files from before the start (warm), got its first files during it
    (cold) or is still empty (unused), and the overall state: ``warm``, ``cold``, ``partly warm`` or ``unused``.

    ``dirs``: name -> path. ``started_epoch``: the unit's start (Unix seconds); None counts every file as earlier.
    At most ``limit`` files are looked at per directory.
    """
    out = {}
    for name, path in sorted((dirs or {}).items()):
        before = after = 0
        for root, _dirs, files in os.walk(path):
            for entry in files:
                try:
                    mtime = os.lstat(os.path.join(root, entry)).st_mtime
                except OSError:
                    continue
                after += 1
                before += 1 if started_epoch is None or mtime < started_epoch else 0
                if after >= limit:
                    break
            if after >= limit:
                break
        out[name] = {'path': path, 'files_before': before, 'files': after,
                     'state': 'warm' if before else 'cold' if after else 'unused'}
    states = set(d['state'] for d in out.values()) - {'unused'}
    overall = ('unused' if not states else states.pop() if len(states) == 1 else 'partly warm')
    return {'state': overall, 'dirs': out}


# ------------------------------------------------------------------------------------------------ comparison


def seconds_text(seconds):
    """41 s, 4m10s, 1h02m."""
    seconds = int(round(seconds))
    if seconds < 60:
        return '%d s' % seconds
    if seconds < 3600:
        return '%dm%02ds' % divmod(seconds, 60)
    return '%dh%02dm' % (seconds // 3600, seconds % 3600 // 60)


def range_text(values):
    low, high = min(values), max(values)
    if int(round(low)) == int(round(high)):
        return seconds_text(low)
    if high < 60:
        return '%d-%d s' % (int(round(low)), int(round(high)))
    return '%s-%s' % (seconds_text(low), seconds_text(high))


def _median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


@dataclass
class Slowdown:
    stage: str
    seconds: float
    previous: List[float]
    hint: str

    def text(self):
        n = len(self.previous)
        starts = 'start' if n == 1 else '%d starts' % n
        return '%s %s, previous %s %s%s' % (self.stage, seconds_text(self.seconds), starts, range_text(self.previous),
                                            ': ' + self.hint if self.hint else '')


@dataclass
class Comparison:
    """A start beside the previous starts of its configuration (newest first, at most COMPARE_LAST)."""

    previous: int = 0
    slower: List[Slowdown] = field(default_factory=list)
    ratio: Optional[float] = None
    summary: str = ''
    short: str = ''

    def to_json(self):
        return asdict(self)


def _hint(stage, record):
    if stage in CACHE_BOUND and record.cache_state in ('cold', 'partly warm'):
        return 'compile caches were %s (first start of this SGLang version?)' % record.cache_state
    return HINTS.get(stage, '')


def compare(record, previous, factor=SLOWER_FACTOR, min_seconds=SLOWER_MIN_SECONDS):
    """Compare ``record`` with ``previous`` (earlier records of the same configuration, newest first).

    A stage is much slower when it took at least ``factor`` times, and ``min_seconds`` more than, the slowest of the
    last COMPARE_LAST previous starts. ``short`` is the fleet-table cell ("2.1x slower than the previous start:
    cuda_graph"), ``summary`` the sentence for the log ("cuda_graph 4m10s, previous 3 starts 41-47 s: autotune cache
    cold?").
    """
    earlier = [r for r in previous if r.total is not None][:COMPARE_LAST]
    if not earlier:
        text = 'first start of this configuration'
        return Comparison(summary=text, short=text)
    slower = []
    for stage, seconds in record.ordered_stages() + [('total', record.total)]:
        before = [r.stages.get(stage) if stage != 'total' else r.total for r in earlier]
        before = [b for b in before if isinstance(b, (int, float))]
        if seconds is None or not before:
            continue
        if seconds >= factor * max(before) and seconds - max(before) >= min_seconds:
            slower.append(Slowdown(stage, seconds, before, _hint(stage, record) if stage != 'total' else ''))
    totals = [r.total for r in earlier]
    ratio = round(record.total / _median(totals), 2) if record.total and _median(totals) > 0 else None
    than = 'the previous start' if len(earlier) == 1 else 'the previous %d starts' % len(earlier)
    stages = [s for s in slower if s.stage != 'total']
    if slower:
        names = ', '.join(s.stage for s in stages) or 'total'
        short = '%sx slower than %s: %s' % (_ratio_text(ratio), than, names)
        summary = '; '.join(s.text() for s in (stages or slower))
    elif ratio is not None and ratio * factor <= 1.0 and _median(totals) - record.total >= min_seconds:
        faster = _ratio_text(_median(totals) / record.total)
        short = summary = '%sx faster than %s (%s, before %s)' % (faster, than, seconds_text(record.total), range_text(totals))
    else:
        short = 'as fast as %s' % than
        summary = 'as fast as %s (%s, before %s)' % (than, seconds_text(record.total) if record.total is not None else '?',
                                                     range_text(totals))
    return Comparison(previous=len(earlier), slower=slower, ratio=ratio, summary=summary, short=short)


def start_line(record, comparison):
    """``2026-12-01 13:50:02 SGLang 0.5.9 ready in 17 s, smoke TTFT 0.052s, caches warm: as fast as the previous start``"""
    parts = ['ready in %s' % seconds_text(record.total) if record.total is not None else 'ready']
    smoke = record.smoke or {}
    if smoke.get('ttft') is not None:
        parts.append('smoke TTFT %.3fs' % smoke['ttft'])
    if record.cache_state:
        parts.append('caches %s' % record.cache_state)
    when = record.recorded_at.replace('T', ' ').rstrip('Z')
    return '%s SGLang %s %s: %s' % (when, record.sglang_version or '?', ', '.join(parts), comparison.short)


def _ratio_text(ratio):
    return '?' if ratio is None else '%.1f' % ratio


# ------------------------------------------------------------------------------------------------ Prometheus


def label_text(value):
    """A Prometheus label value with its backslashes, quotes and newlines escaped."""
    return str(value).replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


def number_text(value):
    """A sample value as Prometheus reads it (a Python float repr: 1.0, 0.25, 1e-05)."""
    return repr(float(value))


METRICS = (
    ('sglang_startup_seconds', 'Seconds each startup stage of the last proven SGLang start took, from SGLang\'s own log '
                               'timestamps (stage="total": first log line to ready).'),
    ('sglang_startup_smoke_ttft_seconds', 'Time to the first token of the smoke request after the last proven start.'),
    ('sglang_startup_smoke_seconds', 'Total time of the smoke request after the last proven start.'),
    ('sglang_startup_caches_warm', '1 when the compile caches were warm at the last proven start, 0 when they were cold '
                                   'or partly warm.'),
    ('sglang_startup_slowdown_ratio', 'Total startup time of the last start divided by the median of the previous starts '
                                      'of the same configuration.'),
    ('sglang_startup_last_timestamp_seconds', 'Unix time at which the last proven start was recorded.'),
)


def prometheus_text(record, comparison, unit):
    """node_exporter textfile-collector metrics (Prometheus text exposition format 0.0.4) of the last start."""
    base = '{unit="%s"' % label_text(unit or record.unit or 'unknown')
    samples = dict((name, []) for name, _help in METRICS)
    for stage, seconds in record.ordered_stages() + ([('total', record.total)] if record.total is not None else []):
        samples['sglang_startup_seconds'].append(('%s,stage="%s"}' % (base, label_text(stage)), seconds))
    smoke = record.smoke or {}
    if smoke.get('ttft') is not None:
        samples['sglang_startup_smoke_ttft_seconds'].append((base + '}', smoke['ttft']))
    if smoke.get('total') is not None:
        samples['sglang_startup_smoke_seconds'].append((base + '}', smoke['total']))
    if record.cache_state in ('warm', 'cold', 'partly warm'):
        samples['sglang_startup_caches_warm'].append((base + '}', 1 if record.cache_state == 'warm' else 0))
    if comparison is not None and comparison.ratio is not None:
        samples['sglang_startup_slowdown_ratio'].append((base + '}', comparison.ratio))
    when = datetime.datetime.strptime(record.recorded_at, '%Y-%m-%dT%H:%M:%SZ').replace(tzinfo=datetime.timezone.utc)
    samples['sglang_startup_last_timestamp_seconds'].append((base + '}', when.timestamp()))
    lines = []
    for name, help_text in METRICS:
        if samples[name]:
            lines.append('# HELP %s %s' % (name, help_text))
            lines.append('# TYPE %s gauge' % name)
            lines.extend('%s%s %s' % (name, labels, number_text(value)) for labels, value in samples[name])
    return '\n'.join(lines) + '\n'
