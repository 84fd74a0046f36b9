# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""SGLang's own benchmark client (``python -m sglang.bench_serving``) and GPU power sampling with ``nvidia-smi``.

``bench_serving_argv`` builds the command line from flags every release 0.4.x - 0.5.x defines; ``parse_output``
reads the JSON line it appends to ``--output-file`` (keys ``output_throughput``, ``median_ttft_ms`` ...). The
``GpuSampler`` runs ``nvidia-smi --query-gpu`` in a thread during a run. Private module_utils: runs on the target
host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import json
import threading

from ansible_collections.llmops.sglang.plugins.module_utils.bench._stats import RunResult

# bench_serving result keys -> RunResult fields.
OUTPUT_KEYS = {
    'output_throughput': 'output_tps',
    'total_throughput': 'total_tps',
    'median_ttft_ms': 'ttft_p50_ms',
    'p99_ttft_ms': 'ttft_p99_ms',
    'median_itl_ms': 'itl_p50_ms',
    'p99_itl_ms': 'itl_p99_ms',
    'duration': 'duration_s',
}

GPU_QUERY = ['--query-gpu=power.draw,power.limit,utilization.gpu', '--format=csv,noheader,nounits']


class BenchServingError(Exception):
    """bench_serving ran but left no result to read; ``msg`` says why."""

    def __init__(self, msg):
        super(BenchServingError, self).__init__(msg)
        self.msg = msg


def bench_serving_argv(python, url, load, concurrency, seed, output_file, model=None):
    """The command line of one bench_serving run at ``concurrency``.

    ``random-ids`` draws the prompts' token ids itself (``random`` would download ShareGPT first); a range ratio of 1
    fixes every input and output length; ``--max-concurrency`` bounds the requests in flight.
    """
    argv = [python, '-m', 'sglang.bench_serving', '--backend', 'sglang', '--base-url', url.rstrip('/'),
            '--dataset-name', load['dataset'], '--random-input-len', str(load['input_len']),
            '--random-output-len', str(load['output_len']), '--random-range-ratio', '1.0',
            '--num-prompts', str(load['num_prompts'] or concurrency * 4), '--max-concurrency', str(concurrency),
            '--request-rate', 'inf', '--seed', str(seed), '--output-file', output_file, '--disable-tqdm']
    if model:
        argv += ['--model', model]
    return argv


def parse_output(text, concurrency, num_prompts):
    """The RunResult of the last result line bench_serving appended to its output file."""
    lines = [line for line in (text or '').splitlines() if line.strip()]
    if not lines:
        raise BenchServingError('bench_serving wrote no result line (it prints "Error running benchmark" when no request '
                                'completed); see its output in the result')
    try:
        data = json.loads(lines[-1])
    except ValueError as err:
        raise BenchServingError('bench_serving\'s result line is not JSON (%s): %s' % (err, lines[-1][:200]))
    missing = [key for key in OUTPUT_KEYS if key not in data]
    if missing:
        raise BenchServingError('bench_serving\'s result has no %s; this release writes other keys: %s'
                                % (', '.join(missing), ', '.join(sorted(data)[:40])))
    fields = {field: float(data[key]) if data[key] is not None else None for key, field in OUTPUT_KEYS.items()}
    completed = int(data.get('completed') or 0)
    return RunResult(concurrency=concurrency, completed=completed, failed=max(0, num_prompts - completed), **fields)


def parse_gpu_sample(text):
    """``[(power_w, limit_w, util_pct), ...]`` per GPU from ``nvidia-smi --query-gpu`` CSV; unreadable fields are
    None (``[N/A]`` on GPUs that do not report power)."""
    gpus = []
    for line in (text or '').splitlines():
        fields = [field.strip() for field in line.split(',')]
        if len(fields) != 3:
            continue
        gpus.append(tuple(_number(field) for field in fields))
    return gpus


def _number(text):
    try:
        return float(text)
    except ValueError:
        return None


def _mean(values):
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


class GpuSampler:
    """Samples ``nvidia-smi`` every ``interval`` seconds between ``start()`` and ``stop()``, the first time 0.2 s after
    the start.

    ``run_command(argv) -> (rc, out, err)``. The first failing call ends the sampling (no nvidia-smi, no driver):
    the figures are then None and ``error`` says why.
    """

    def __init__(self, argv, run_command, interval=0.5):
        self.argv = list(argv) + GPU_QUERY
        self.run_command = run_command
        self.interval = interval
        self.samples = []
        self.error = None
        self._stop = threading.Event()
        self._thread = None

    def sample_once(self):
        rc, out, err = self.run_command(self.argv)
        gpus = parse_gpu_sample(out) if rc == 0 else []
        if not gpus:
            self.error = 'nvidia-smi gave no GPU figures (rc=%s): %s' % (rc, (err or out or '').strip()[-200:])
            return False
        self.samples.append(gpus)
        return True

    def _loop(self):
        # The first sample a little after the start, when the load is running: a sample at the very start reads an idle
        # GPU, and a short run would be all idle.
        pause = min(0.2, self.interval)
        while not self._stop.wait(pause) and self.sample_once():
            pause = self.interval

    def start(self):
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self):
        """Stop sampling; returns ``{'power_w', 'power_limit_w', 'gpu_util_pct'}``, each the mean per GPU over the
        samples (the seeds compared one GPU's draw with its 600 W limit)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval + 10)
        if not self.samples and self.error is None and self.sample_once():
            # a run shorter than the first pause: one call tells whether nvidia-smi works, but its figures are of
            # an idle GPU after the run, not of the run
            self.samples = []
            self.error = 'the run ended before the first GPU sample (%.1f s after its start)' % min(0.2, self.interval)
        per_gpu = [gpu for sample in self.samples for gpu in sample]
        return {'power_w': _mean([g[0] for g in per_gpu]), 'power_limit_w': _mean([g[1] for g in per_gpu]),
                'gpu_util_pct': _mean([g[2] for g in per_gpu])}
