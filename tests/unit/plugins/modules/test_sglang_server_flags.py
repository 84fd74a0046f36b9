# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_server_flags module in-process (AnsibleModule, run_command) on real released SGLang files from PyPI
(extracted from the cached wheels, tests/sglang_wheels.py; fails without network on the first run)."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path
from unittest import mock

import pytest

from ansible.module_utils import _internal as module_utils_internal
from ansible.module_utils.common import warnings as warnings_mod
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.modules import sglang_server_flags

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position


def run_module(capsys, args):
    # a real module process starts with no warnings and is not the controller; in-process runs share ansible's
    # globals with tests that imported controller code (then module warnings would go to Display instead)
    getattr(warnings_mod, '_global_warnings', {}).clear()
    with patch_module_args(args), mock.patch.object(module_utils_internal, 'is_controller', False):
        with pytest.raises(SystemExit) as info:
            sglang_server_flags.main()
    result = json.loads(capsys.readouterr().out)
    assert (info.value.code == 0) != bool(result.get('failed')), result
    return result


def extract(version, dest):
    """The release's sglang/srt sources and dist-info, as pip would lay them out in site-packages."""
    try:
        wheel = sglang_wheels.wheel_path(version)
    except sglang_wheels.WheelUnavailable as exc:
        pytest.fail(str(exc))
    with zipfile.ZipFile(str(wheel)) as zf:
        for name in zf.namelist():
            if (name.startswith('sglang/srt/') and name.endswith('.py')) or '.dist-info/' in name or name in (
                    'sglang/__init__.py', 'sglang/version.py', 'sglang/_version.py'):
                zf.extract(name, str(dest))
    return dest / 'sglang'


@pytest.fixture(scope='module')
def pkg_0_5_14(tmp_path_factory):
    return extract('0.5.14', tmp_path_factory.mktemp('site-packages'))


def test_lists_flags_of_a_package_dir(capsys, pkg_0_5_14):
    res = run_module(capsys, {'sglang_path': str(pkg_0_5_14)})
    assert res['changed'] is False
    assert res['sglang_version'] == '0.5.14'
    assert res['version_source'].startswith('dist-info METADATA (') and 'sglang-0.5.14.dist-info/METADATA' in res['version_source']
    assert '--flashinfer-allreduce-fusion-backend' in res['flags']
    assert '--enforce-disable-flashinfer-allreduce-fusion' in res['boolean_flags']
    assert '--enable-flashinfer-allreduce-fusion' in res['deprecated_flags']
    assert res['unknown'] == [] and res['did_you_mean'] == {} and res['invalid_values'] == []
    assert res['parser_warnings'] == []
    assert 'sglang/srt/server_args.py' in res['source_files']


def test_check_mode_is_the_same_read(capsys, pkg_0_5_14):
    plain = run_module(capsys, {'sglang_path': str(pkg_0_5_14)})
    checked = run_module(capsys, {'sglang_path': str(pkg_0_5_14), '_ansible_check_mode': True})
    assert checked['flags'] == plain['flags'] and checked['changed'] is False


def test_deprecated_flag_in_args_warns(capsys, pkg_0_5_14):
    res = run_module(capsys, {'sglang_path': str(pkg_0_5_14),
                              'args': {'enable-flashinfer-allreduce-fusion': True, 'tp_size': 2, 'disable-radix-cache': False}})
    assert 'failed' not in res or res['failed'] is False
    warnings = json.dumps(res.get('warnings', []))
    assert '--enable-flashinfer-allreduce-fusion is deprecated in SGLang 0.5.14' in warnings


def test_unknown_flag_fails_naming_flag_version_and_match(capsys, pkg_0_5_14):
    res = run_module(capsys, {'sglang_path': str(pkg_0_5_14), 'args': {'model-path': 'x', 'flashinfer-allreduce-backend': 'auto'}})
    assert res['failed'] is True
    assert res['unknown'] == ['--flashinfer-allreduce-backend']
    assert res['did_you_mean']['--flashinfer-allreduce-backend'][0] == '--flashinfer-allreduce-fusion-backend'
    assert res['msg'].startswith('the installed SGLang 0.5.14 does not define this flag: --flashinfer-allreduce-backend (did you mean '
                                 '--flashinfer-allreduce-fusion-backend')
    assert str(pkg_0_5_14) in res['msg']
    assert 'flags' not in res and res['sglang_version'] == '0.5.14'


def test_two_keys_for_one_flag_fail(capsys, pkg_0_5_14):
    res = run_module(capsys, {'sglang_path': str(pkg_0_5_14), 'args': {'tp_size': 4, 'model-path': 'x', 'tp-size': 8}})
    assert res['failed'] is True
    assert res['unknown'] == []
    assert res['invalid_values'] == [
        "'tp_size' and 'tp-size' both name --tp-size (keys are read without the leading -- and with _ as -), so --tp-size "
        "would be given 2 times and SGLang would silently use the last; keep one of them"]
    assert res['msg'].startswith(res['invalid_values'][0] + '. Fix the server arguments')


def test_two_keys_for_one_unknown_flag_name_it_once(capsys, pkg_0_5_14):
    res = run_module(capsys, {'sglang_path': str(pkg_0_5_14), 'args': {'--tp': 4, 'tp': 8}})
    assert res['failed'] is True
    assert res['unknown'] == ['--tp']
    assert res['invalid_values'] == [
        "'--tp' and 'tp' both name --tp (keys are read without the leading -- and with _ as -), so --tp "
        "would be given 2 times and SGLang would silently use the last; keep one of them"]


def test_not_a_package_dir(capsys, tmp_path):
    res = run_module(capsys, {'sglang_path': str(tmp_path)})
    assert res['failed'] is True
    assert res['msg'].startswith('%s is not an installed sglang package directory (no srt/server_args.py there)' % tmp_path)


def test_package_without_a_parser_definition(capsys, tmp_path):
    # a real release whose server_args.py lost ServerArgs.add_cli_args (a broken or foreign install)
    pkg = extract('0.5.9', tmp_path)
    text = (pkg / 'srt' / 'server_args.py').read_text('utf-8')
    (pkg / 'srt' / 'server_args.py').write_text(text.replace('def add_cli_args(', 'def add_cli_args_moved('))
    res = run_module(capsys, {'sglang_path': str(pkg)})
    assert res['failed'] is True
    assert res['msg'].startswith('Could not read the server flags of SGLang 0.5.9 at %s: sglang/srt/server_args.py has no '
                                 'ServerArgs.add_cli_args()' % pkg)
    assert 'pip install --force-reinstall --no-deps sglang==0.5.9' in res['msg']


def test_python_that_does_not_exist(capsys):
    res = run_module(capsys, {'python': '/nonexistent/bin/python'})
    assert res['failed'] is True
    assert '/nonexistent/bin/python does not exist or is not executable' in res['msg']


def test_python_without_sglang(capsys):
    res = run_module(capsys, {'python': sys.executable})
    assert res['failed'] is True
    assert 'SGLang is not installed for the interpreter %s' % sys.executable in res['msg']


def test_secret_values_are_masked_in_the_result(capsys, pkg_0_5_14):
    secret = 'sk-live-4f9a2c77e1'
    # the controller asks for the invocation (module_args) to be echoed in the result, as for a registered result
    res = run_module(capsys, {'sglang_path': str(pkg_0_5_14), '_ansible_inject_invocation': True,
                              'args': {'api-key': secret, 'admin_api_key': secret + '-admin', 'tp-size': 8, 'bogus-token': secret}})
    text = json.dumps(res)
    assert res['failed'] is True and res['unknown'] == ['--bogus-token']
    assert secret not in text
    # only the secret values are masked: other values and the flag names stay readable
    assert res['invocation']['module_args']['args']['tp-size'] == 8
    assert res['invocation']['module_args']['args']['api-key'] == 'VALUE_SPECIFIED_IN_NO_LOG_PARAMETER'
    assert res['did_you_mean']['--bogus-token'] == [] or all(f.startswith('--') for f in res['did_you_mean']['--bogus-token'])
