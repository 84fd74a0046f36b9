# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_benchmark module in-process against the SGLang stand-in as a real subprocess that streams tokens at its
recorded profile's rate: client choice, the model from /model_info, the first result becoming the baseline, the
next one compared with it, a regression never replacing it, check mode, and bad input."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.modules import sglang_benchmark

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))
from module_process import run_in_process  # noqa: E402  pylint: disable=wrong-import-position
from procs import spawn  # noqa: E402  pylint: disable=wrong-import-position
STANDIN = TESTS / 'standin'
RECORDING = TESTS / 'fixtures' / 'sglang-logs' / 'gb10-dflash-spec-decoding-ready'


@pytest.fixture
def run_module(capsys):
    def run(args, check_mode=False):
        return run_in_process(sglang_benchmark.main, capsys, args, check_mode=check_mode)
    return run


@pytest.fixture
def server():
    """The stand-in on a free port, for one test: ansible-test runs each test in a fork that ends with os._exit, where a
    module-scoped fixture is never torn down (it left one stand-in running per test)."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    argv = [sys.executable, str(STANDIN / 'sglang_standin.py'), '--recording', str(RECORDING), '--max-seconds', '0.5',
            '--port', str(port), '--profile', str(STANDIN / 'profiles' / 'seed-sm120.json')]
    # SIGINT: the stand-in exits at once (SIGTERM would be SGLang's drain, which looks every 5 s)
    with spawn(argv, stderr=subprocess.DEVNULL, stop=signal.SIGINT):
        url = 'http://127.0.0.1:%d' % port
        for _attempt in range(200):
            try:
                with urllib.request.urlopen(url + '/health', timeout=1) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.05)
        yield url


@pytest.fixture
def args(server, tmp_path):
    return {'url': server, 'python': sys.executable, 'concurrency': [4], 'input_len': 16, 'output_len': 16, 'num_prompts': 8,
            'repeats': 2, 'nvidia_smi': [], 'baseline_path': str(tmp_path / 'sglang.benchmark.json'), 'update_baseline': True}


def test_first_result_becomes_the_baseline_and_the_next_is_compared(run_module, args):
    first = run_module(args)
    assert first['changed'] is True and first['baseline_updated'] is True and first['baseline'] is None
    assert first['verdict']['status'] == 'first'
    reason = "%s cannot import sglang.bench_serving: ModuleNotFoundError: No module named 'sglang'" % sys.executable
    assert first['client'] == {'name': 'builtin', 'reason': reason}
    # the model comes from the stand-in's /model_info (the recording's model path)
    assert first['result']['model'] == 'poolside/Laguna-S-2.1-INT4'
    level = first['result']['levels'][0]
    assert [run['completed'] for run in level['runs']] == [8, 8] and level['concurrency'] == 4
    assert 0 < level['output_tps'] < 1.05 * 1867 and level['ttft_p50_ms'] >= 50 and level['spread_pct'] is not None
    assert first['gpu'] is None
    stored = json.loads(Path(args['baseline_path']).read_text())
    assert list(stored['results']) == [first['result']['key']]

    second = run_module(args)
    assert second['baseline']['levels'][0]['output_tps'] == level['output_tps']
    assert second['verdict']['baseline_tps'] == pytest.approx(level['output_tps'], abs=0.01)
    assert second['verdict']['status'] in ('accepted', 'regressed')   # real timing on a shared machine: either, never first
    assert second['summary'].startswith(second['headline'] + ' at concurrency 4, spread ')


def test_a_regression_never_replaces_the_baseline(run_module, args):
    first = run_module(args)
    path = Path(args['baseline_path'])
    store = json.loads(path.read_text())
    for run in store['results'][first['result']['key']]['levels'][0]['runs']:
        run['output_tps'] *= 10   # a baseline ten times faster than this server
    path.write_text(json.dumps(store))
    before = path.read_bytes()
    second = run_module(args)
    assert second['verdict']['status'] == 'regressed' and second['verdict']['change_pct'] < -80
    assert second['changed'] is False and second['baseline_updated'] is False
    assert path.read_bytes() == before
    assert second['headline'] == '%.0f tok/s against %.0f (%+.0f %%)' % (
        second['verdict']['current_tps'], second['verdict']['baseline_tps'], second['verdict']['change_pct'])


def test_power_figures_of_a_gpu_and_of_a_host_without_nvidia_smi(run_module, args):
    # a run long enough for samples: 16 x 64 tokens at the profile's 1867 tok/s, about 0.6 s
    with_gpu = run_module(dict(args, nvidia_smi=[sys.executable, str(STANDIN / 'nvidia_smi_standin.py'), '--url', args['url']],
                               baseline_path=None, output_len=64, num_prompts=16))
    level = with_gpu['result']['levels'][0]
    assert (level['power_limit_w'], level['gpu_util_pct'], with_gpu['gpu']) == (600.0, None, None)
    assert 60.0 <= level['power_w'] <= 250.0   # the recorded fusion-off figure while streams run, idle between
    without = run_module(dict(args, nvidia_smi=['/nonexistent/nvidia-smi'], baseline_path=None, output_len=64, num_prompts=16))
    assert without['result']['levels'][0]['power_w'] is None
    assert without['gpu']['error'].startswith('nvidia-smi gave no GPU figures (rc=127): /nonexistent/nvidia-smi: ')
    assert without['verdict'] is None and without['changed'] is False


def test_check_mode_sends_no_load_and_writes_nothing(run_module, args):
    result = run_module(args, check_mode=True)
    assert (result['changed'], result['result'], result['verdict'], result['summary']) == (False, None, None, 'check mode: no load sent')
    assert not os.path.exists(args['baseline_path'])


def test_bad_input_says_what_to_do(run_module, args):
    failed = run_module(dict(args, client='bench_serving', python=None))
    assert failed['msg'] == 'client=bench_serving needs python, the interpreter SGLang is installed in.'
    failed = run_module(dict(args, concurrency=[0]))
    assert failed['msg'] == 'Invalid load: concurrency must list levels of 1 or more (got [0]).'
    failed = run_module(dict(args, url='http://127.0.0.1:9', model=None))
    assert failed['msg'].startswith('Cannot read the model from http://127.0.0.1:9/model_info (status None, ')
