# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_patch_sm120 module end to end (AnsibleModule, run_command, atomic_move, backup_local)
on copies of real released SGLang files from PyPI (tests/sglang_wheels.py; fails without network)."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from ansible.module_utils.common import warnings as warnings_mod
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.modules import sglang_patch_sm120

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position

PY = sys.executable


def run_module(capsys, args):
    # a real module process starts with no warnings; in-process runs share ansible's global list
    getattr(warnings_mod, '_global_warnings', {}).clear()
    with patch_module_args(args):
        with pytest.raises(SystemExit) as info:
            sglang_patch_sm120.main()
    out = capsys.readouterr().out
    result = json.loads(out)
    assert (info.value.code == 0) != bool(result.get('failed')), result
    return result


@pytest.fixture
def pkg(tmp_path, request):
    version = getattr(request, 'param', '0.5.9')
    try:
        return sglang_wheels.copy_tree(version, tmp_path / 'site-packages')
    except sglang_wheels.WheelUnavailable as exc:
        pytest.fail('SGLang %s is needed from PyPI for this test and could not be fetched:\n%s' % (version, exc))


def test_check_mode_with_diff_writes_nothing(capsys, pkg):
    before = sglang_wheels.snapshot(pkg)
    res = run_module(capsys, {'sglang_path': str(pkg), 'python': PY, '_ansible_check_mode': True, '_ansible_diff': True})
    assert res['changed'] is True
    assert sglang_wheels.snapshot(pkg) == before
    headers = sorted(d['before_header'] for d in res['diff'])
    assert headers == sorted([str(pkg / 'srt/layers/communicator.py'), str(pkg / 'srt/server_args.py')])
    for diff in res['diff']:
        assert diff['after_header'] == diff['before_header']
        assert diff['before'] == Path(diff['before_header']).read_text('utf-8')
        assert 'sm120' in diff['after'] and diff['after'] != diff['before']
    assert [s['status'] for s in res['sites']] == ['applied', 'applied', 'applied', 'not_present']
    assert res['sglang_version'] == '0.5.9' and res['version_source'].startswith('dist-info METADATA')
    assert res['advice'] == ['fusion_regression', 'flashinfer_missing']
    # the one message whose wording matters: the measured regression and how to go back
    warnings = json.dumps(res.get('warnings', []))  # 2.19+: structured warning summaries
    assert ('SM120 FlashInfer allreduce fusion is enabled in SGLang 0.5.9: upstream measured a large throughput regression '
            'with fusion on PCIe SM120 (TP4 about 1867 -> 236 tokens/s, sgl-project/sglang PR 32330). Benchmark it; '
            'revert with state=absent (sglang_service_sm120_patch: absent).') in warnings
    # and the one for a SGLang without FlashInfer beside it (the demo's --no-deps install): what to install, or go back
    assert ('flashinfer-python was not found beside SGLang; FlashInfer before 0.6.17 cannot build the allreduce-fusion '
            'kernels for SM120. Install flashinfer-python>=0.6.17 beside SGLang before the server uses the fusion, or '
            'revert with state=absent (sglang_service_sm120_patch: absent).') in warnings
    assert res['backup_files'] == []


def test_no_diff_key_without_diff_mode(capsys, pkg):
    res = run_module(capsys, {'sglang_path': str(pkg), 'python': PY, '_ansible_check_mode': True})
    assert res['changed'] is True and 'diff' not in res


def test_apply_with_backup_then_revert(capsys, pkg):
    pristine = {p: (pkg / p).read_bytes() for p in ('srt/layers/communicator.py', 'srt/server_args.py')}
    everything = sglang_wheels.snapshot(pkg)
    res = run_module(capsys, {'sglang_path': str(pkg), 'python': PY, 'backup': True})
    assert res['changed'] is True
    assert len(res['backup_files']) == 2
    for backup in res['backup_files']:
        rel = [p for p in pristine if backup.startswith(str(pkg / p) + '.')][0]
        assert Path(backup).read_bytes() == pristine[rel]
        os.unlink(backup)
    again = run_module(capsys, {'sglang_path': str(pkg), 'python': PY, 'backup': True})
    assert again['changed'] is False and again['backup_files'] == []
    assert {s['status'] for s in again['sites']} == {'already_applied', 'not_present'}
    back = run_module(capsys, {'sglang_path': str(pkg), 'python': PY, 'state': 'absent'})
    assert back['changed'] is True
    assert [s['status'] for s in back['sites']] == ['reverted', 'reverted', 'reverted', 'not_present']
    assert sglang_wheels.snapshot(pkg) == everything


def test_python_option_locates_the_package(capsys, pkg, monkeypatch):
    monkeypatch.setenv('PYTHONPATH', str(pkg.parent))
    res = run_module(capsys, {'python': PY, '_ansible_check_mode': True})
    assert res['sglang_path'] == str(pkg)
    assert res['sglang_version'] == '0.5.9'


def test_unknown_shape_fails_with_context(capsys, pkg):
    server_args = pkg / 'srt/server_args.py'
    text = server_args.read_text('utf-8')
    server_args.write_text(text.replace('            # Set moe backend for DeepSeek\n            if is_sm100_supported():\n',
                                        '            # Set moe backend for DeepSeek\n            if is_sm100_supported() or _local_hack():\n'), 'utf-8')
    before = sglang_wheels.snapshot(pkg)
    res = run_module(capsys, {'sglang_path': str(pkg), 'python': PY})
    assert res['failed'] is True and res['changed'] is False
    assert res['site'] == 'glm5_moe_runner_backend'
    assert res['file'] == str(server_args)
    assert res['expected'] == 'if is_sm100_supported():'
    assert '_local_hack' in res['found']
    assert res['sglang_version'] == '0.5.9'
    assert str(server_args) in res['msg'] and '0.5.9' in res['msg']
    assert sglang_wheels.snapshot(pkg) == before


def test_explicit_unsupported_site_fails(capsys, pkg):
    res = run_module(capsys, {'sglang_path': str(pkg), 'python': PY, 'patches': ['allreduce_fusion_backend_resolver']})
    assert res['failed'] is True
    assert 'allreduce_fusion_backend_resolver is not_present' in res['msg']
    assert res['sites'][0]['status'] == 'not_present'


def test_bad_patch_name_is_rejected(capsys, pkg):
    res = run_module(capsys, {'sglang_path': str(pkg), 'patches': ['allreduce_fusion']})
    assert res['failed'] is True and 'allreduce_fusion' in res['msg']


def test_not_a_package_dir(capsys, tmp_path):
    res = run_module(capsys, {'sglang_path': str(tmp_path), 'python': PY})
    assert res['failed'] is True and 'srt/server_args.py' in res['msg']


@pytest.mark.parametrize('pkg', ['0.5.13'], indirect=True)
def test_warnings_name_old_flashinfer_and_upstream_moe_rule(capsys, pkg):
    # the FlashInfer release this SGLang pins (Requires-Dist of its wheel: 0.6.12), installed beside it as pip records it
    meta = next(pkg.parent.glob('sglang-*.dist-info')) / 'METADATA'
    pinned = re.search(r'^Requires-Dist: flashinfer_python(?:\[[^]]*\])?==(\S+)', meta.read_text('utf-8'), re.M).group(1)
    dist = pkg.parent / ('flashinfer_python-%s.dist-info' % pinned)
    dist.mkdir()
    (dist / 'METADATA').write_text('Metadata-Version: 2.1\nName: flashinfer-python\nVersion: %s\n' % pinned)
    res = run_module(capsys, {'sglang_path': str(pkg), 'python': PY, '_ansible_check_mode': True})
    assert res['advice'] == ['fusion_regression', 'flashinfer_too_old', 'moe_rule_preempted']
    assert 'flashinfer-python %s is installed' % pinned in json.dumps(res.get('warnings', []))
    assert '_flashinfer_version' not in res
    (dist / 'METADATA').write_text('Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 0.6.17\n')
    res = run_module(capsys, {'sglang_path': str(pkg), 'python': PY, '_ansible_check_mode': True})
    assert res['advice'] == ['fusion_regression', 'moe_rule_preempted']


def test_no_warning_when_nothing_is_enabled(capsys, pkg):
    res = run_module(capsys, {'sglang_path': str(pkg), 'python': PY, 'state': 'absent'})
    assert res['changed'] is False
    assert not res.get('warnings') and res['advice'] == []


def test_atomic_move_keeps_owner_group_mode(capsys, pkg):
    comm = pkg / 'srt/layers/communicator.py'
    os.chmod(str(comm), 0o640)
    if os.geteuid() == 0:
        os.chown(str(comm), 65534, 65534)
    st = os.stat(str(comm))
    res = run_module(capsys, {'sglang_path': str(pkg), 'python': PY})
    assert res['changed'] is True
    st2 = os.stat(str(comm))
    assert (st2.st_mode, st2.st_uid, st2.st_gid) == (st.st_mode, st.st_uid, st.st_gid)
    assert st2.st_ino != st.st_ino
    assert not [p for p in os.listdir(str(comm.parent)) if p.endswith('.sm120tmp')]


def test_read_only_file_fails_cleanly(capsys, pkg):
    server_args = pkg / 'srt/server_args.py'
    os.chmod(str(server_args), 0o444)
    before = sglang_wheels.snapshot(pkg)
    res = run_module(capsys, {'sglang_path': str(pkg), 'python': PY})
    assert res['failed'] is True and res['changed'] is False
    assert res['file'] == str(server_args) and 'read-only' in res['msg']
    assert sglang_wheels.snapshot(pkg) == before
