# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""bench_serving's command line and output file (module_utils/bench/_serving.py) against the REAL
``sglang/bench_serving.py`` of released SGLang wheels from PyPI (tests/sglang_wheels.py): the flags the command
line uses must be ones its argparse defines, and the result line is built from the keys its ``result = {...}``
literal writes. Also the nvidia-smi CSV parser and the sampler with a real process."""

from __future__ import annotations

import ast
import json
import sys
import zipfile
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _serving as bs
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import local_run

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position

# The operator era (0.5.9) and 0.5.20, where bench_serving re-exports sglang.benchmark.serving.
RELEASES = ('0.5.9', '0.5.20')
LOAD = {'dataset': 'random-ids', 'input_len': 256, 'output_len': 128, 'num_prompts': 64}


def bench_serving_source(version):
    """What ``python -m sglang.bench_serving`` runs: the module itself, or from 0.5.20 on the implementation it
    re-exports (``sglang/benchmark/serving.py``)."""
    with zipfile.ZipFile(str(sglang_wheels.wheel_path(version))) as wheel:
        source = wheel.read('sglang/bench_serving.py').decode('utf-8')
        if 'from sglang.benchmark.serving import cli_main' in source:
            source = wheel.read('sglang/benchmark/serving.py').decode('utf-8')
    return source


def real_options(tree):
    """{option string: choices or None} of every add_argument call in the source."""
    options = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, 'attr', None) == 'add_argument':
            choices = next((kw.value for kw in node.keywords if kw.arg == 'choices'), None)
            literal = [elt.value for elt in choices.elts] if isinstance(choices, ast.List) else None
            for arg in node.args:
                if isinstance(arg, ast.Constant) and str(arg.value).startswith('--'):
                    options[arg.value] = literal
    return options


def real_result_keys(tree):
    """Keys of the ``result = {...}`` dict literal that bench_serving dumps to --output-file."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and len(node.targets) == 1
                and getattr(node.targets[0], 'id', None) == 'result'):
            keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
            if 'output_throughput' in keys:
                return keys
    raise AssertionError('no result dict in bench_serving.py')


@pytest.fixture(scope='module', params=RELEASES)
def release(request):
    return ast.parse(bench_serving_source(request.param))


def test_every_flag_of_the_command_line_is_defined_by_the_release(release):
    options = real_options(release)
    argv = bs.bench_serving_argv('/opt/sglang/venv/bin/python', 'http://127.0.0.1:30000/', LOAD, 64, 1, '/tmp/out.jsonl',
                                 model='zai-org/GLM-5-FP8')
    assert argv[:3] == ['/opt/sglang/venv/bin/python', '-m', 'sglang.bench_serving']
    flags = [word for word in argv[3:] if word.startswith('--')]
    assert [flag for flag in flags if flag not in options] == []
    assert 'random-ids' in options['--dataset-name']
    assert argv[argv.index('--base-url') + 1] == 'http://127.0.0.1:30000'
    assert argv[argv.index('--max-concurrency') + 1] == '64'


def test_the_result_line_of_the_release_is_read(release):
    keys = real_result_keys(release)
    assert set(bs.OUTPUT_KEYS) <= set(keys)
    # one line as bench_serving appends it: every key of the real literal, our figures in the ones we read
    line = dict.fromkeys(keys)
    line.update(completed=60, output_throughput=1867.2, total_throughput=5601.6, median_ttft_ms=152.5, p99_ttft_ms=310.0,
                median_itl_ms=33.9, p99_itl_ms=41.2, duration=8.77)
    earlier = dict(line, output_throughput=1.0)
    run = bs.parse_output(json.dumps(earlier) + '\n' + json.dumps(line) + '\n', 64, 64)
    assert (run.output_tps, run.total_tps, run.ttft_p50_ms, run.ttft_p99_ms, run.itl_p50_ms, run.itl_p99_ms,
            run.duration_s, run.completed, run.failed) == (1867.2, 5601.6, 152.5, 310.0, 33.9, 41.2, 8.77, 60, 4)


def test_no_result_line_and_an_unknown_format_are_named():
    with pytest.raises(bs.BenchServingError) as err:
        bs.parse_output('', 64, 64)
    assert 'wrote no result line' in err.value.msg
    with pytest.raises(bs.BenchServingError) as err:
        bs.parse_output('{"duration": 1}\n', 64, 64)
    assert err.value.msg.startswith("bench_serving's result has no output_throughput, total_throughput, median_ttft_ms")


def test_nvidia_smi_query_csv():
    # nvidia-smi --query-gpu=power.draw,power.limit,utilization.gpu --format=csv,noheader,nounits, 2 GPUs, one without power
    assert bs.parse_gpu_sample('248.31, 600.00, 97\n[N/A], [N/A], 0\n') == [(248.31, 600.0, 97.0), (None, None, 0.0)]
    assert bs.parse_gpu_sample('NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.\n') == []


def test_sampler_runs_a_real_command_until_stopped():
    printer = [sys.executable, '-c', 'import sys; print("250.00, 600.00, 97"); print("248.00, 600.00, 95")']
    sampler = bs.GpuSampler(printer, local_run, interval=0.05)
    sampler.start()
    while len(sampler.samples) < 2:
        pass
    figures = sampler.stop()
    assert figures == {'power_w': 249.0, 'power_limit_w': 600.0, 'gpu_util_pct': 96.0}
    assert sampler.error is None


def test_sampler_without_nvidia_smi_says_why():
    sampler = bs.GpuSampler(['/nonexistent/nvidia-smi'], local_run, interval=0.05)
    sampler.start()
    assert sampler.stop() == {'power_w': None, 'power_limit_w': None, 'gpu_util_pct': None}
    assert sampler.error.startswith('nvidia-smi gave no GPU figures (rc=127)')


def test_a_run_shorter_than_the_first_pause_has_no_figures_and_says_so():
    printer = [sys.executable, '-c', 'print("250.00, 600.00, 97")']
    sampler = bs.GpuSampler(printer, local_run)
    sampler.start()
    assert sampler.stop() == {'power_w': None, 'power_limit_w': None, 'gpu_util_pct': None}
    assert sampler.error == 'the run ended before the first GPU sample (0.2 s after its start)'
