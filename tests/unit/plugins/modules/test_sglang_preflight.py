# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_preflight module in-process (AnsibleModule, run_command, the real /proc) on real parts: stand-in device
files held by real processes (a re-parented orphan with SGLang's process title, a process of another user), a leaked
file in a shared-memory directory, and a real venv holding SGLang 0.5.9's released files (tests/sglang_wheels.py) and
torch 2.8.0's real metadata (tests/fixtures/python_dists). Check mode, cleanup, the second run and a refusal."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.modules import sglang_preflight

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))
import preflight_procs as pp  # noqa: E402  pylint: disable=wrong-import-position
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position
from module_process import run_in_process  # noqa: E402  pylint: disable=wrong-import-position

USER = __import__('pwd').getpwuid(os.getuid()).pw_name


def run_module(capsys, args, check_mode=False):
    return run_in_process(sglang_preflight.main, capsys, args, check_mode)


@pytest.fixture(scope='module')
def venv(tmp_path_factory):
    """A real venv with SGLang 0.5.9's released files and torch 2.8.0's installed metadata in its site-packages."""
    made = sglang_wheels.make_venv(tmp_path_factory.mktemp('venv'), '0.5.9')
    shutil.copytree(str(TESTS / 'fixtures' / 'python_dists' / 'torch-2.8.0.dist-info'), str(made['site'] / 'torch-2.8.0.dist-info'))
    return made['python']


@pytest.fixture
def host():
    """Stand-in GPU device files, a shared-memory directory and a process spawner; everything removed afterwards."""
    root = tempfile.mkdtemp(prefix='llmops-preflight-host-', dir='/tmp')
    os.chmod(root, 0o755)
    for name in ('nvidia0', 'nvidia1', 'nvidiactl'):
        with open(os.path.join(root, name), 'wb') as handle:
            handle.write(b'\0' * 64)
        os.chmod(os.path.join(root, name), 0o666)
    os.mkdir(os.path.join(root, 'shm'))
    spawn = pp.Spawner()
    yield {'root': root, 'spawn': spawn, 'port': free_port()}
    spawn.close()
    shutil.rmtree(root, ignore_errors=True)


def free_port():
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def args(host, venv, **extra):
    base = dict(unit='llmops-preflight-test.service', user=USER, python=venv, working_directory=host['root'],
                gpu_devices=[os.path.join(host['root'], 'nvidia0'), os.path.join(host['root'], 'nvidia1')],
                shared_devices=[os.path.join(host['root'], 'nvidiactl')], shm_dir=os.path.join(host['root'], 'shm'),
                server_args={'model-path': host['root'], 'port': host['port']}, min_free_gb=0.001, stop_timeout=2)
    base.update(extra)
    return base


def test_check_mode_reports_then_cleanup_stops_the_orphan_and_the_second_run_is_clean(capsys, host, venv):
    orphan = host['spawn'].start([os.path.join(host['root'], 'nvidia0')], title='sglang::scheduler_TP0', detach=True)
    leak = os.path.join(host['root'], 'shm', 'sem.mp-leaked')
    open(leak, 'wb').close()

    planned = run_module(capsys, args(host, venv, cleanup=True), check_mode=True)
    assert planned['changed'] is True and planned['ok'] is True
    assert (planned['checks']['gpus']['status'], planned['checks']['shm']['status']) == ('would clean', 'would clean')
    assert [entry['pid'] for entry in planned['stopped']] == [orphan] and planned['removed'] == [leak]
    assert not pp.wait_gone(orphan, timeout=0.2) and os.path.exists(leak)  # check mode touched nothing

    done = run_module(capsys, args(host, venv, cleanup=True))
    assert done['changed'] is True and done['ok'] is True
    assert done['stopped'] == [{'pid': orphan, 'title': 'sglang::scheduler_TP0', 'user': USER, 'signal': 'SIGTERM', 'stopped': True,
                                'error': None}]
    assert done['removed'] == [leak] and not os.path.exists(leak)
    assert done['checks']['gpus']['status'] == 'cleaned' and pp.wait_gone(orphan)
    assert done['rank']['sglang_version'] == '0.5.9'
    assert (done['rank']['torch'], done['rank']['torch_cuda'], done['rank']['driver_branch']) == ('2.8.0', '12.8', None)
    assert done['checks']['driver']['status'] == 'unknown'

    again = run_module(capsys, args(host, venv, cleanup=True))
    assert again['changed'] is False and again['stopped'] == [] and again['removed'] == []
    assert again['summary'].startswith('gpus ok (2 GPUs, no other holder), ports ok (%d free), driver unknown (no NVIDIA driver found), '
                                       'shm ok (clean), disk ok (' % host['port'])


def test_a_foreign_holder_fails_named_and_is_never_stopped(capsys, host, venv):
    stranger = host['spawn'].start([os.path.join(host['root'], 'nvidia1')], title='sglang::scheduler_TP0', detach=True, uid=pp.NOBODY)
    result = run_module(capsys, args(host, venv, cleanup=True))
    assert result['failed'] is True and result['failed_checks'] == ['gpus'] and result['stopped'] == []
    assert result['msg'].startswith('pre-flight for llmops-preflight-test.service failed (gpus), nothing was started: gpus: GPU 1 is '
                                    'held by pid %d sglang::scheduler_TP0 (user nobody): runs as nobody, not as the service user.' % stranger)
    holders = result['checks']['gpus']['details']['holders']
    assert [(h['pid'], h['kind'], h['gpus']) for h in holders] == [(stranger, 'foreign', [1])]
    assert not pp.wait_gone(stranger, timeout=0.2)
    report = run_module(capsys, args(host, venv, fail_on_problems=False))
    assert report['ok'] is False and not report.get('failed')


def _nvidia_smi_standin(root, recorded):
    """An executable nvidia-smi: the stand-in replaying a recorded ``nvidia-smi -q`` (8x H100, ECC on)."""
    path = os.path.join(root, 'nvidia-smi')
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write('#!/bin/sh\nexec %s %s --recorded %s "$@"\n' % (sys.executable, TESTS / 'standin' / 'nvidia_smi_standin.py', recorded))
    os.chmod(path, 0o755)
    return path


def test_gpu_health_blocks_a_start_on_an_xid_of_the_servers_gpu_and_warn_lets_it_go_on(capsys, host, venv):
    """The module reads a real (stand-in) nvidia-smi and a kernel log file: the recorded Xid 119 of the H100 at
    0000:9b:00 (minor 4) blocks a server on /dev/nvidia4 with NVIDIA's meaning, not one on /dev/nvidia0."""
    health = TESTS / 'fixtures' / 'nvidia_health'
    smi = _nvidia_smi_standin(host['root'], health / 'h100x8-ecc-healthy' / 'nvidia-smi-q.txt')
    kern = os.path.join(host['root'], 'kern.log')
    shutil.copy(str(health / 'xid119-gsp-timeout-h100-dmesg' / 'kernel_log.txt'), kern)
    gpu4 = os.path.join(host['root'], 'nvidia4')
    open(gpu4, 'wb').close()
    options = dict(checks=['gpu_health'], nvidia_smi=smi, kernel_log=kern, dcgm_diag=False)

    blocked = run_module(capsys, args(host, venv, gpu_devices=[gpu4], **options))
    assert blocked['failed'] is True and blocked['failed_checks'] == ['gpu_health']
    assert ('gpu_health: GPU 4 (0000:9b:00, GPU-2b6f61f9-8b00-3b57-d912-b62792120662) has Xid 119 (GSP RPC Timeout; NVIDIA: RESET_GPU) x5'
            in blocked['msg'])
    assert blocked['checks']['gpu_health']['details']['gpus'][0]['xids'] == [119]

    warned = run_module(capsys, args(host, venv, gpu_devices=[gpu4], gpu_health='warn', **options))
    assert warned['ok'] is True and warned['checks']['gpu_health']['status'] == 'warning'
    assert any('Xid 119 (GSP RPC Timeout' in str(warning) for warning in warned['warnings'])  # a str, or an event on 2.19+

    other = run_module(capsys, args(host, venv, **options))  # /dev/nvidia0 and /dev/nvidia1: GPUs 0 and 1
    assert other['ok'] is True and other['checks']['gpu_health']['status'] == 'ok'
    assert other['checks']['gpu_health']['summary'] == '2 GPU(s) of the server, healthy'
