# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Driver vs torch CUDA (_cuda_compat): NVIDIA's driver table, torch's build read from real installed metadata
(tests/fixtures/python_dists, from PyPI), and the verdict against recorded nvidia-smi and /proc/driver/nvidia/version
outputs of the NVIDIA corpus (tests/fixtures/nvidia)."""

from __future__ import annotations

import os
import shutil

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _cuda_compat as cc
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._evidence import parse_nvidia_smi, parse_proc_version

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DISTS = os.path.join(TESTS, 'fixtures', 'python_dists')
CORPUS = os.path.join(TESTS, 'fixtures', 'nvidia')


def corpus(case, name):
    with open(os.path.join(CORPUS, case, name), encoding='utf-8') as handle:
        return handle.read()


def site(tmp_path, *dists, name='site-packages'):
    """A site-packages directory with the given real dist-info directories installed."""
    target = tmp_path / name
    target.mkdir()
    for dist in dists:
        shutil.copytree(os.path.join(DISTS, dist + '.dist-info'), str(target / (dist + '.dist-info')))
    return [str(target)]


# The rows of NVIDIA's Table 3 the check depends on, as published (GA releases, Linux x86_64).
@pytest.mark.parametrize('cuda, driver', [('13.0', '580.65.06'), ('12.9', '575.51.03'), ('12.8', '570.26'), ('12.6', '560.28.03'),
                                          ('12.4', '550.54.14'), ('12.2', '535.54.03'), ('12.1', '530.30.02'),
                                          ('12.0', '525.60.13'), ('11.8', '520.61.05')])
def test_minimum_driver_per_cuda_release(cuda, driver):
    assert cc.min_driver(cuda) == driver


@pytest.mark.parametrize('driver, cuda', [('580.173.02', '13.0'), ('570.26', '12.8'), ('570.25', '12.6'), ('560.35.03', '12.6'),
                                          ('535.104.05', '12.2'), ('525.60.13', '12.0'), ('520.56.06', '11.7'),
                                          ('470.82.01', '11.4'), ('450.51.05', '11.0'), ('440.33', None)])
def test_newest_cuda_a_driver_supports(driver, cuda):
    assert cc.max_cuda(driver) == cuda


def test_table_is_newest_first_and_monotonic():
    keys = [(cc.version_key(cuda), cc.version_key(driver)) for cuda, driver in cc.TOOLKIT_DRIVERS]
    assert keys == sorted(keys, reverse=True)
    assert cc.min_driver('12.7') is None  # no CUDA 12.7 toolkit was released


def test_torch_280_pins_the_cuda_128_runtime(tmp_path):
    build = cc.torch_build(site(tmp_path, 'torch-2.8.0'))
    assert (build['torch'], build['cuda']) == ('2.8.0', '12.8')
    assert build['source'] == 'torch Requires-Dist nvidia-cuda-runtime-cu12==12.8.90'


def test_torch_240_parenthesised_pin(tmp_path):
    build = cc.torch_build(site(tmp_path, 'torch-2.4.0'))
    assert (build['torch'], build['cuda']) == ('2.4.0', '12.1')


def test_local_version_wins_and_cpu_builds_have_no_cuda():
    assert cc.torch_cuda('2.8.0+cu126', ['nvidia-cuda-runtime-cu12==12.8.90'])['cuda'] == '12.6'
    assert cc.torch_cuda('2.8.0+cpu')['cuda'] is None


def test_installed_runtime_wheel_when_torch_pins_nothing(tmp_path):
    dirs = site(tmp_path, 'nvidia_cuda_runtime_cu12-12.8.90')
    (tmp_path / 'site-packages' / 'torch-2.8.0.dist-info').mkdir()
    (tmp_path / 'site-packages' / 'torch-2.8.0.dist-info' / 'METADATA').write_text('Metadata-Version: 2.4\nName: torch\nVersion: 2.8.0\n')
    build = cc.torch_build(dirs)
    assert (build['cuda'], build['cuda_runtime_wheel']) == ('12.8', '12.8.90')


def test_no_torch_installed(tmp_path):
    assert cc.torch_build(site(tmp_path, 'nvidia_cuda_runtime_cu12-12.8.90')) is None
    assert cc.verdict('570.26', None, None)[0] is None


def test_recorded_560_driver_refuses_torch_280_with_both_versions_and_both_ways_out(tmp_path):
    smi = parse_nvidia_smi(corpus('ubuntu2404-role-560-match-new-header', 'nvidia-smi.txt'))
    ok, text = cc.verdict(smi['driver_version'], smi['cuda_version'], cc.torch_build(site(tmp_path, 'torch-2.8.0')))
    assert ok is False
    assert text == ('driver 560.35.03 supports CUDA 12.6 (nvidia-smi), but torch 2.8.0 was built for CUDA 12.8 (torch Requires-Dist '
                    'nvidia-cuda-runtime-cu12==12.8.90): install a driver >= 570.26, or a torch wheel built for CUDA <= 12.6')


def test_recorded_560_driver_runs_torch_240(tmp_path):
    smi = parse_nvidia_smi(corpus('ubuntu2404-role-560-match-new-header', 'nvidia-smi.txt'))
    ok, text = cc.verdict(smi['driver_version'], smi['cuda_version'], cc.torch_build(site(tmp_path, 'torch-2.4.0')))
    assert ok is True and 'CUDA 12.6 >= 12.1' in text


def test_driver_table_without_nvidia_smi(tmp_path):
    proc = parse_proc_version(corpus('debian-bookworm-smi-525-module-520', 'proc_driver_nvidia_version.txt'))
    ok, text = cc.verdict(proc['version'], None, cc.torch_build(site(tmp_path, 'torch-2.4.0')))
    assert ok is False
    assert text.startswith('driver 520.56.06 supports CUDA 11.7 (the driver table), but torch 2.4.0 was built for CUDA 12.1')
    assert 'a driver >= 530.30.02' in text
    proc = parse_proc_version(corpus('truenas-module-580-173-nvml-580-178', 'proc_driver_nvidia_version.txt'))
    ok, text = cc.verdict(proc['version'], None, cc.torch_build(site(tmp_path, 'torch-2.8.0', name='other')))
    assert ok is True and text.startswith('driver 580.173.02 supports CUDA 13.0 >= 12.8')
