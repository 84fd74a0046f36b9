# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The module llmops.sglang.sglang_server_flags through real ansible-playbook (connection local).

A fresh venv gets ``pip install --no-deps sglang==0.5.9`` (the PyPI wheel, cached by tests/sglang_wheels.py); the
module finds it through the venv's python, reads the flags from its source and checks server arguments. Its flag
list is compared with the REAL argparse parser of the same release (tests/sglang_argparse_env.py). A second
release (0.5.23, installed with ``--no-deps --target``) is read through ``sglang_path``.

Run:  PYTHONPATH=<dir above ansible_collections> python -m pytest tests/integration/test_sglang_server_flags_playbook.py
Needs PyPI on the first run (fails, never skips, without it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position
import sglang_argparse_env  # noqa: E402  pylint: disable=wrong-import-position

PLAYBOOK = '''---
- name: sglang_server_flags on a real SGLang install
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Read the flags of the installed release
      llmops.sglang.sglang_server_flags:
        python: "{{ venv_python }}"
      register: plain

    - name: Check arguments the release does not know (the failure is what this test checks)
      llmops.sglang.sglang_server_flags:
        python: "{{ venv_python }}"
        args:
          model-path: zai-org/GLM-5-FP8
          tp_size: 8
          enforce-disable-flashinfer-allreduce-fusion: true
          mem_fraction: 0.8
          trust-remote-code: "yes"
      register: bad
      ignore_errors: true

    - name: Check good arguments in check mode
      llmops.sglang.sglang_server_flags:
        python: "{{ venv_python }}"
        args:
          model-path: zai-org/GLM-5-FP8
          tensor_parallel_size: 8
          trust-remote-code: true
          enable-flashinfer-allreduce-fusion: false
      check_mode: true
      register: good

    - name: Render the command line with the flags the release defines
      ansible.builtin.set_fact:
        argv: >-
          {{ {'model-path': 'zai-org/GLM-5-FP8', 'tp_size': 8, 'trust-remote-code': true}
             | llmops.sglang.sglang_cli_args(known_flags=plain.flags, boolean_flags=plain.boolean_flags) }}

    - name: Render a flag the release does not define (the failure is what this test checks)
      ansible.builtin.set_fact:
        argv_bad: >-
          {{ {'enforce-disable-flashinfer-allreduce-fusion': true}
             | llmops.sglang.sglang_cli_args(known_flags=plain.flags) }}
      register: filter_bad
      ignore_errors: true

    - name: Read a newer release given by its package directory
      llmops.sglang.sglang_server_flags:
        sglang_path: "{{ newer_path }}"
        args:
          enforce-disable-flashinfer-allreduce-fusion: true
          flashinfer-allreduce-fusion-backend: trtllm
          enable-flashinfer-allreduce-fusion: true
      register: newer

    - name: An interpreter without SGLang (the failure is what this test checks)
      llmops.sglang.sglang_server_flags:
        python: "{{ ansible_python_interpreter }}"
      register: missing
      ignore_errors: true

    - name: Save the results
      ansible.builtin.copy:
        content: "{{ {'plain': plain, 'bad': bad, 'good': good, 'argv': argv, 'filter_bad': filter_bad,
                      'newer': newer, 'missing': missing} | to_json }}"
        dest: "{{ result_file }}"
        mode: "0600"
'''


# the file on one worker: its module-scoped set-up runs once (tests/run-all.sh: --dist loadgroup; docs/testing.md)
pytestmark = pytest.mark.xdist_group('test_sglang_server_flags_playbook')


def _run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800, **kw)


def _collections_path():
    import ansible_collections.llmops.sglang as coll  # pylint: disable=import-outside-toplevel
    return str(Path(list(coll.__path__)[0]).parents[2])


def _ansible_playbook():
    here = Path(sys.executable).parent / 'ansible-playbook'
    found = str(here) if here.exists() else shutil.which('ansible-playbook')
    if not found:
        pytest.fail('ansible-playbook is not installed next to %s nor in PATH' % sys.executable)
    return found


@pytest.fixture(scope='module')
def results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('flags')
    try:
        wheel = sglang_wheels.wheel_path('0.5.9')
        newer = sglang_argparse_env.release_dir('0.5.23') / 'pkg' / 'sglang'
    except (RuntimeError, sglang_wheels.WheelUnavailable) as exc:
        pytest.fail(str(exc))
    # the venv without a pip of its own (ensurepip: 5.5 CPU-s) and SGLang's files not byte-compiled (5.7 CPU-s): the
    # module reads the source; this pip installs into the venv (--python)
    venv = tmp / 'venv'
    proc = _run([sys.executable, '-m', 'venv', '--without-pip', str(venv)])
    assert proc.returncode == 0, proc.stderr
    python = venv / 'bin' / 'python'
    proc = _run([sys.executable, '-m', 'pip', '--python', str(python), 'install', '--no-deps', '--no-compile',
                 '--disable-pip-version-check', '--no-index', '--find-links', str(wheel.parent), 'sglang==0.5.9'])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    book = tmp / 'flags.yml'
    book.write_text(PLAYBOOK)
    result_file = tmp / 'result.json'
    extra = {'venv_python': str(python), 'newer_path': str(newer), 'result_file': str(result_file),
             'ansible_python_interpreter': sys.executable}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=_collections_path(), ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0',
               ANSIBLE_LOCALHOST_WARNING='0')
    env.pop('PYTHONPATH', None)  # the module must find SGLang through the venv's python, nothing else
    proc = _run([_ansible_playbook(), '-i', 'localhost,', str(book), '-e', json.dumps(extra)], env=env, cwd=str(tmp))
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    data = json.loads(result_file.read_text())
    data['venv_python'] = str(python)
    data['stdout'] = proc.stdout
    return data


def test_flags_equal_the_real_parser(results):
    plain = results['plain']
    assert plain['changed'] is False and plain['failed'] is False
    assert plain['sglang_version'] == '0.5.9'
    assert plain['version_source'].startswith('dist-info METADATA (') and 'sglang-0.5.9.dist-info' in plain['version_source']
    assert plain['sglang_path'].endswith('/site-packages/sglang')
    real = sglang_argparse_env.real_parser('0.5.9')
    assert plain['flags'] == sorted(f for a in real['actions'] for f in a['flags'])
    assert plain['boolean_flags'] == sorted(f for a in real['actions'] if a['nargs'] == 0 for f in a['flags'])
    assert plain['source_files'] == ['sglang/srt/server_args.py']
    assert plain['parser_warnings'] == [] and plain['unknown'] == []


def test_unknown_flags_fail_with_names_version_and_matches(results):
    bad = results['bad']
    assert bad['failed'] is True
    assert bad['unknown'] == ['--enforce-disable-flashinfer-allreduce-fusion', '--mem-fraction']
    assert bad['did_you_mean']['--enforce-disable-flashinfer-allreduce-fusion'][0] == '--enable-flashinfer-allreduce-fusion'
    assert '--mem-fraction-static' in bad['did_you_mean']['--mem-fraction']
    msg = bad['msg']
    assert msg.startswith('the installed SGLang 0.5.9 does not define these flags: --enforce-disable-flashinfer-allreduce-fusion (did you mean '
                          '--enable-flashinfer-allreduce-fusion')
    assert "--trust-remote-code takes no value (it is a switch); give it true or false, not 'yes'" in msg
    assert bad['invalid_values'] == ["--trust-remote-code takes no value (it is a switch); give it true or false, not 'yes'"]
    assert bad['sglang_version'] == '0.5.9'
    # the long flag lists are not repeated in a failure
    assert 'flags' not in bad


def test_check_mode_reads_the_same(results):
    good = results['good']
    assert good['failed'] is False and good['changed'] is False
    assert good['flags'] == results['plain']['flags'] and good['unknown'] == []


def test_filter_uses_the_module_result(results):
    assert results['argv'] == ['--model-path', 'zai-org/GLM-5-FP8', '--tp-size', '8', '--trust-remote-code']
    bad = results['filter_bad']
    assert bad['failed'] is True
    assert 'the installed SGLang does not define this flag: --enforce-disable-flashinfer-allreduce-fusion' in bad['msg']


def test_newer_release_by_path(results):
    newer = results['newer']
    assert newer['failed'] is False and newer['sglang_version'] == '0.5.23'
    assert '--flashinfer-allreduce-fusion-backend' in newer['flags']
    assert any(f.startswith('sglang/srt/arg_groups/fields/') for f in newer['source_files'])
    # the deprecated spelling still parses in 0.5.23, with a warning
    assert '--enable-flashinfer-allreduce-fusion' in newer['deprecated_flags']
    assert any('--enable-flashinfer-allreduce-fusion is deprecated in SGLang 0.5.23' in w for w in newer.get('warnings', []))


def test_interpreter_without_sglang_fails_clearly(results):
    missing = results['missing']
    assert missing['failed'] is True
    assert 'SGLang is not installed for the interpreter' in missing['msg']
    assert 'sglang_path' in missing['msg']
