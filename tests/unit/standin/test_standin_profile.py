# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The stand-in's recorded performance profile (tests/standin/standin_profile.py): what configuration it sees (server
flags, environment, the SM120 patch state of a real SGLang release patched by the collection's own patcher), which
entry it picks, the paced rate and the power figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _sm120_patch as sm

TESTS = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / 'standin'))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position
import standin_profile as sp  # noqa: E402  pylint: disable=wrong-import-position

SEED = sp.load(str(TESTS / 'standin' / 'profiles' / 'seed-sm120.json'))


def config(args=(), env=None, patch='absent'):
    return {'args': sp.server_flags(list(args)), 'env': env or {}, 'sm120_patch': patch}


def test_server_flags_reads_sglang_words():
    assert sp.server_flags(['--model-path', 'm', '--trust-remote-code', '--tp_size', '8', '--port=30000',
                            '--enable-flashinfer-allreduce-fusion']) == {
        'model-path': 'm', 'trust-remote-code': True, 'tp-size': '8', 'port': '30000', 'enable-flashinfer-allreduce-fusion': True}


@pytest.mark.parametrize('cfg, entry', [
    (config(['--tp-size', '8']), 'fusion-off'),
    (config(['--enable-flashinfer-allreduce-fusion']), 'fusion-off'),              # the flag without the patch
    (config([], patch='present'), 'fusion-off'),                                  # the patch without the flag
    (config(['--enable-flashinfer-allreduce-fusion'], patch='present'), 'sm120-fusion'),
    (config([], env={'NCCL_ALGO': 'Tree', 'NCCL_MIN_NCHANNELS': '16'}), 'nccl-tree'),
    (config(['--num-continuous-decode-steps', '4']), 'fusion-off'),               # no measurable gain in the notes
])
def test_the_seed_profile_picks_the_recorded_entry(cfg, entry):
    assert sp.select(SEED, cfg)['name'] == entry


def test_entries_get_the_profile_defaults_and_name_their_source():
    fusion = sp.select(SEED, config(['--enable-flashinfer-allreduce-fusion'], patch='present'))
    assert (fusion['ttft_ms'], fusion['idle_power_w'], fusion['power_limit_w']) == (200, 60, 600)
    assert all(entry['source'] for entry in SEED['entries'])
    assert sp.select(SEED, config(env={'NCCL_ALGO': 'Tree'}))['crash'] == 'nccl-unhandled-system-error-unindented-traceback'
    assert (TESTS / 'fixtures' / 'sglang-logs' / 'nccl-unhandled-system-error-unindented-traceback' / 'expected.json').exists()


def test_rate_and_power_between_the_recorded_points():
    off = sp.select(SEED, config())
    assert [sp.interpolate(off['points'], c, 'output_tps') for c in (1, 64, 288, 512, 1024)] == [1867, 1867, 2333.5, 2800, 2800]
    pacer = sp.Pacer(off)
    assert pacer.power() == (60, 600)
    with pacer.request():
        assert pacer.power() == (250, 600)
    assert pacer.active == 0


def test_pacer_hands_out_tokens_at_the_rate():
    now = [100.0]
    slept = []
    pacer = sp.Pacer({'points': [{'concurrency': 1, 'output_tps': 1000, 'power_w': 1}], 'ttft_ms': 50}, clock=lambda: now[0],
                     sleep=slept.append)
    with pacer.request():
        pacer.take(1, first=True)
        for _chunk in range(3):
            pacer.take(333)
    # the prefill, then 1 + 3 x 333 tokens at 1000 tok/s: each chunk waits for the ones before it
    assert slept == pytest.approx([0.05, 0.001, 0.334, 0.667])


def test_without_a_profile_every_token_takes_the_recorded_interval():
    slept = []
    rate = sp.FixedRate(20.0, sleep=slept.append)
    with rate.request():
        rate.take(1, first=True)
        rate.take(4)
    assert slept == pytest.approx([0.05, 0.2]) and rate.chunk_tokens == 1


@pytest.mark.parametrize('version', ['0.5.9', '0.5.23'])   # gate in communicator.py (C3) and in add_norm.py (C5)
def test_patch_state_of_a_real_release_patched_by_the_collection(tmp_path, version):
    site = tmp_path / 'venv' / 'lib' / 'python3.11' / 'site-packages'
    site.mkdir(parents=True)
    package = sglang_wheels.copy_tree(version, site)
    assert sp.sm120_patch_state(str(tmp_path / 'venv')) == 'absent'
    params = {'sglang_path': str(package), 'python': sys.executable, 'state': 'present', 'glm5_only': True, 'patches': None}
    assert sm.run_patch(params, sglang_wheels.run_command)['changed'] is True
    assert sp.sm120_patch_state(str(tmp_path / 'venv')) == 'present'
    assert sp.sm120_patch_state(str(tmp_path / 'nothing')) is None


def test_every_profile_file_is_valid():
    for path in (TESTS / 'standin' / 'profiles').glob('*.json'):
        profile = json.loads(path.read_text())
        assert profile['source'] and profile['stand_in'], path
        assert 'when' not in profile['entries'][-1], '%s: the last entry must match every configuration' % path
        for entry in profile['entries']:
            assert entry.get('crash') or entry.get('points'), (path, entry['name'])
