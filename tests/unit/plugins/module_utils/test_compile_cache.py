# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Compile-cache directories (plugins/module_utils/sglang/_compile_cache.py) and the sglang_compile_cache module on real files."""

from __future__ import annotations

import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _compile_cache as cc
from ansible_collections.llmops.sglang.plugins.modules import sglang_compile_cache

VARIABLES = ['SGLANG_DG_CACHE_DIR', 'SGLANG_CACHE_DIR', 'TORCHINDUCTOR_CACHE_DIR', 'TRITON_CACHE_DIR',
             'FLASHINFER_WORKSPACE_BASE', 'CUDA_CACHE_PATH']


def test_gpu_arch_from_nvidia_smi():
    assert cc.gpu_arch('9.0\n9.0\n9.0\n9.0\n') == 'sm90'
    assert cc.gpu_arch('12.0\n8.9\n') == 'sm120-sm89'
    assert cc.gpu_arch('No devices were found\n') is None
    assert cc.gpu_arch('') is None


def test_directory_name_per_version_and_arch():
    assert cc.version_dir_name('0.5.9', 'sm90') == '0.5.9-sm90'
    assert cc.version_dir_name('0.5.10.post1', None) == '0.5.10.post1'
    assert cc.version_dir_name('1.0/../x', None) == '1.0_.._x'
    with pytest.raises(cc.CacheError):
        cc.version_dir_name('..', None)


def test_plan_keeps_the_newest_marked_directories_and_never_touches_others():
    existing = {'0.5.7-sm90': {'created': 1}, '0.5.8-sm90': {'created': 2}, '0.5.6-sm90': {'created': 0},
                'hand-made': None, '0.5.9-sm90': {'created': 3}}
    plan = cc.plan('/c', '0.5.10-sm90', {}, 3, existing)
    assert plan.path == '/c/0.5.10-sm90'
    assert plan.kept == ['0.5.10-sm90', '0.5.8-sm90', '0.5.9-sm90']
    assert plan.prune == ['/c/0.5.6-sm90', '/c/0.5.7-sm90']
    assert sorted(plan.environment) == sorted(VARIABLES)
    assert plan.environment['SGLANG_DG_CACHE_DIR'] == '/c/0.5.10-sm90/deep_gemm'
    assert plan.dirs['inductor'] == '/c/0.5.10-sm90/inductor'
    assert cc.plan('/c', '0.5.9-sm90', {}, 1, existing).prune == ['/c/0.5.6-sm90', '/c/0.5.7-sm90', '/c/0.5.8-sm90']


def test_a_variable_the_user_set_is_left_alone():
    plan = cc.plan('/c', '0.5.9', {'TRITON_CACHE_DIR': '/fast/triton', 'NCCL_DEBUG': 'WARN'}, 3, {})
    assert 'TRITON_CACHE_DIR' not in plan.environment
    assert plan.dirs['triton'] == '/fast/triton'
    assert '/fast/triton' not in plan.create


def run_module(capsys, args, check_mode=False, diff=False):
    args = dict(args)
    args['_ansible_check_mode'] = check_mode
    args['_ansible_diff'] = diff
    with patch_module_args(args):
        with pytest.raises(SystemExit) as info:
            sglang_compile_cache.main()
    result = json.loads(capsys.readouterr().out)
    assert (info.value.code == 0) != bool(result.get('failed')), result
    return result


def test_module_creates_is_idempotent_and_prunes_after_upgrades(tmp_path, capsys):
    root = tmp_path / 'cache'
    (root / 'hand-made').mkdir(parents=True)
    args = {'root': str(root), 'version': '0.5.9', 'arch': 'sm90', 'keep': 2}
    check = run_module(capsys, args, check_mode=True)
    assert check['changed'] and not (root / '0.5.9-sm90').exists()
    first = run_module(capsys, args)
    assert first['changed'] is True
    assert first['path'] == str(root / '0.5.9-sm90')
    assert sorted(os.listdir(str(root / '0.5.9-sm90'))) == sorted(['.llmops-sglang-cache.json', 'deep_gemm', 'sglang',
                                                                   'inductor', 'triton', 'flashinfer', 'cuda'])
    assert oct(os.stat(str(root / '0.5.9-sm90' / 'triton')).st_mode & 0o777) == '0o750'
    assert run_module(capsys, args)['changed'] is False
    run_module(capsys, dict(args, version='0.5.10'))
    (root / '0.5.10-sm90' / 'deep_gemm' / 'kernel.so').write_bytes(b'x')
    third = run_module(capsys, dict(args, version='0.5.11'), diff=True)
    assert third['pruned'] == [str(root / '0.5.9-sm90')]
    assert sorted(os.listdir(str(root))) == ['0.5.10-sm90', '0.5.11-sm90', 'hand-made']
    assert third['diff']['after'] == '0.5.10-sm90\n0.5.11-sm90\nhand-made\n'
    assert third['msg'] == '%s (GPU sm90); pruned 0.5.9-sm90' % (root / '0.5.11-sm90')


def test_module_without_gpu_and_unknown_owner(tmp_path, capsys):
    res = run_module(capsys, {'root': str(tmp_path), 'version': '0.5.9', 'environment': {'SGLANG_CACHE_DIR': '/x'}})
    assert res['arch'] is None  # no nvidia-smi on this machine
    assert res['path'] == str(tmp_path / '0.5.9')
    assert 'SGLANG_CACHE_DIR' not in res['environment']
    bad = run_module(capsys, {'root': str(tmp_path), 'version': '0.5.9', 'owner': 'no-such-user-4711'})
    assert bad['failed'] and 'create the service user first' in bad['msg']


def test_the_arch_comes_from_nvidia_smi_when_not_given(tmp_path, capsys, monkeypatch):
    """prepare resolves the architecture itself (one place for sglang_compile_cache and sglang_service_layout): a real
    executable named nvidia-smi on PATH, answering the query the way the driver's tool does (one line per GPU)."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    smi = bin_dir / 'nvidia-smi'
    smi.write_text('#!/bin/sh\n[ "$1" = --query-gpu=compute_cap ] && [ "$2" = --format=csv,noheader ] || exit 2\n'
                   'printf "12.0\\n12.0\\n"\n')
    smi.chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (bin_dir, os.environ.get('PATH', '')))
    res = run_module(capsys, {'root': str(tmp_path / 'cache'), 'version': '0.5.9'})
    assert (res['arch'], res['path']) == ('sm120', str(tmp_path / 'cache' / '0.5.9-sm120'))
    assert 'diff' not in res  # built only in diff mode
    given = run_module(capsys, {'root': str(tmp_path / 'cache'), 'version': '0.5.9', 'arch': 'sm90'}, diff=True)
    assert given['arch'] == 'sm90' and given['diff']['after'] == '0.5.9-sm120\n0.5.9-sm90\n'


def test_prepare_builds_the_diff_only_when_asked(tmp_path):
    def no_run(argv):
        raise AssertionError('nvidia-smi must not run when the arch is given: %r' % (argv,))

    spec = {'root': str(tmp_path), 'version': '0.5.9', 'arch': 'sm90', 'owner': None, 'group': None, 'keep': 3,
            'environment': {}}
    result, diff = cc.prepare(spec, True, no_run, lambda name: '/usr/bin/' + name)
    assert (result['changed'], result['arch'], diff) == (True, 'sm90', None)
    _result, diff = cc.prepare(spec, True, no_run, lambda name: None, want_diff=True)
    assert diff == {'before': '', 'after': '0.5.9-sm90\n', 'before_header': str(tmp_path), 'after_header': str(tmp_path)}
