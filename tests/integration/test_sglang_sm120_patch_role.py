# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The role llmops.sglang.sglang_sm120_patch through real ansible-playbook on a real pip-installed SGLang.

For each release a fresh venv gets ``pip install --no-deps sglang==X`` (the wheel comes from PyPI,
cached under ${LLMOPS_SGLANG_CACHE:-~/.cache/llmops-sglang}/wheels; the files the patch sites can touch byte-compiled,
so each has bytecode that goes stale), then the role runs with connection local:

  check mode (present) writes nothing -> apply -> apply again unchanged -> the patched files
  byte-compile with the venv's python -> check mode (absent) writes nothing -> revert, byte-exact
  against the wheel's files -> revert again unchanged.

Run:  PYTHONPATH=<dir above ansible_collections> python -m pytest tests/integration/test_sglang_sm120_patch_role.py
Needs PyPI (fails, never skips, without it) and Python 3.12 for the platform wheel (0.5.11+ wheels are cp3xx).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position

# 0.5.9: pure wheel, operator era (C3/A2/G1); 0.5.20: platform wheel, get_platform() forms + resolver (C4/A4/G3/F2)
VERSIONS = ['0.5.9', '0.5.20']


def _collections_path():
    import ansible_collections.llmops.sglang as coll  # pylint: disable=import-outside-toplevel
    return str(Path(list(coll.__path__)[0]).parents[2])


def _ansible_playbook():
    here = Path(sys.executable).parent / 'ansible-playbook'
    found = str(here) if here.exists() else shutil.which('ansible-playbook')
    if not found:
        pytest.fail('ansible-playbook is not installed next to %s nor in PATH' % sys.executable)
    return found


def _run(argv, **kw):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kw)
    return proc


@pytest.fixture
def venv(tmp_path, request):
    """A venv with the real SGLang release request.param pip-installed (no deps); returns (python, package dir)."""
    version = request.param
    if sglang_wheels.is_platform_release(version) and sys.version_info[:2] != (3, 12):
        pytest.fail('SGLang %s ships only cp3xx platform wheels; run this test with Python 3.12 (have %s)' % (version, sys.version))
    try:
        wheel = sglang_wheels.wheel_path(version)
    except sglang_wheels.WheelUnavailable as exc:
        pytest.fail(str(exc))
    # The venv without a pip of its own (ensurepip: 5.5 CPU-s), SGLang installed into it by this pip (--python); its
    # 1404 files not byte-compiled (5.7 CPU-s) but those the patch sites can touch (SITE_FILES): their stale bytecode is
    # what the role must remove, and the test says it was there before.
    env_dir = tmp_path / 'venv'
    proc = _run([sys.executable, '-m', 'venv', '--without-pip', str(env_dir)])
    assert proc.returncode == 0, proc.stderr
    python = env_dir / 'bin' / 'python'
    proc = _run([sys.executable, '-m', 'pip', '--python', str(python), 'install', '--no-deps', '--no-compile',
                 '--disable-pip-version-check', '--no-index', '--find-links', str(wheel.parent), 'sglang==%s' % version])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _run([str(python), '-c', 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("sglang").origin))'],
                cwd='/')
    assert proc.returncode == 0, proc.stderr
    pkg = Path(proc.stdout.strip())
    sources = [str(pkg.parent / name) for name in sglang_wheels.SITE_FILES if (pkg.parent / name).is_file()]
    proc = _run([str(python), '-m', 'compileall', '-q'] + sources)
    assert proc.returncode == 0 and sources, proc.stdout + proc.stderr
    return version, python, pkg, wheel


def _py_files(pkg):
    out = {}
    for base, _dirs, files in os.walk(str(pkg)):
        for name in files:
            if name.endswith('.py'):
                path = os.path.join(base, name)
                with open(path, 'rb') as handle:
                    out[os.path.relpath(path, str(pkg))] = hashlib.sha256(handle.read()).hexdigest()
    return out


def _bytecode(pkg, rel):
    """The byte-compiled files of PKG/REL (__pycache__/<name>.cpython-*.pyc)."""
    return list((pkg / rel).parent.glob('__pycache__/%s.cpython-*.pyc' % Path(rel).stem))


def _playbook(tmp_path):
    book = tmp_path / 'sm120.yml'
    book.write_text('''---
- name: SM120 patch role
  hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: llmops.sglang.sglang_sm120_patch
  post_tasks:
    - name: Save what the role recorded
      ansible.builtin.copy:
        content: "{{ {'changed': sglang_sm120_patch_result is changed, 'result': sglang_sm120_patch_result} | to_json }}"
        dest: "{{ result_file }}"
        mode: "0600"
      check_mode: false
''')
    return book


def _env():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=_collections_path(), ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0',
               ANSIBLE_LOCALHOST_WARNING='0')
    env.pop('PYTHONPATH', None)  # the role must find SGLang through the venv's python, nothing else
    return env


def _run_role_raw(tmp_path, extra_vars):
    extra_vars = dict(extra_vars, ansible_python_interpreter=sys.executable)
    argv = [_ansible_playbook(), '-i', 'localhost,', str(_playbook(tmp_path)), '-e', json.dumps(extra_vars)]
    return _run(argv, env=_env(), cwd=str(tmp_path))


def _role(tmp_path, python, state, check=False, extra=None):
    out = tmp_path / ('result-%s-%s.json' % (state, 'check' if check else 'run'))
    if out.exists():
        out.unlink()
    extra_vars = {
        'ansible_python_interpreter': sys.executable,
        'sglang_sm120_patch_state': state,
        'result_file': str(out),
    }
    if python is not None:
        extra_vars['sglang_sm120_patch_python'] = str(python)
    extra_vars.update(extra or {})
    argv = [_ansible_playbook(), '-i', 'localhost,', str(_playbook(tmp_path)), '-e', json.dumps(extra_vars)]
    if check:
        argv += ['--check', '--diff']
    proc = _run(argv, env=_env(), cwd=str(tmp_path))
    assert proc.returncode == 0, 'ansible-playbook failed:\n%s\n%s' % (proc.stdout[-6000:], proc.stderr[-3000:])
    data = json.loads(out.read_text())
    return data['changed'], data['result'], proc.stdout


@pytest.mark.parametrize('venv', VERSIONS, indirect=True)
def test_role_apply_idempotent_check_revert(venv, tmp_path):
    version, python, pkg, wheel = venv
    pristine = _py_files(pkg)
    with zipfile.ZipFile(str(wheel)) as zf:
        released = {n[len('sglang/'):]: zf.read(n) for n in zf.namelist() if n.startswith('sglang/') and n.endswith('.py')}

    changed, result, out = _role(tmp_path, python, 'present', check=True)
    assert changed is True and result['changed'] is True
    assert '+++ after: %s' % pkg in out  # --diff shows the would-be change
    assert _py_files(pkg) == pristine, 'check mode wrote to the venv'

    compiled = dict((rel, _bytecode(pkg, rel)) for rel in pristine)
    changed, result, out = _role(tmp_path, python, 'present')
    assert changed is True
    assert result['sglang_version'] == version
    assert result['version_source'].startswith('dist-info METADATA')
    assert Path(result['sglang_path']).resolve() == pkg.resolve()
    applied = [s for s in result['sites'] if s['status'] == 'applied']
    assert {s['name'] for s in applied} >= {'allreduce_fusion_gate', 'allreduce_fusion_auto_enable', 'glm5_moe_runner_backend'}
    patched = _py_files(pkg)
    touched = sorted(k for k in patched if patched[k] != pristine[k])
    assert all(compiled[rel] for rel in touched), 'no bytecode before the apply: nothing stale to remove'
    assert touched and all(Path(s['file']).resolve() in [(pkg / t).resolve() for t in touched] for s in applied)
    for rel in touched:
        st = os.stat(str(pkg / rel))
        assert oct(st.st_mode & 0o777) == '0o644'
        proc = _run([str(python), '-c', 'import sys; compile(open(sys.argv[1], "rb").read(), sys.argv[1], "exec")', str(pkg / rel)])
        assert proc.returncode == 0, proc.stderr
        assert not _bytecode(pkg, rel), 'stale bytecode left'

    changed, result, out = _role(tmp_path, python, 'present')
    assert changed is False and result['changed'] is False
    assert {s['status'] for s in result['sites'] if s['file']} == {'already_applied'}
    assert _py_files(pkg) == patched

    changed, result, out = _role(tmp_path, python, 'absent', check=True)
    assert changed is True
    assert _py_files(pkg) == patched, 'check mode (absent) wrote to the venv'

    changed, result, out = _role(tmp_path, python, 'absent')
    assert changed is True
    assert _py_files(pkg) == pristine
    for rel in touched:
        assert (pkg / rel).read_bytes() == released[rel], 'revert of %s is not byte-exact with the wheel' % rel

    changed, result, out = _role(tmp_path, python, 'absent')
    assert changed is False
    assert _py_files(pkg) == pristine


@pytest.mark.parametrize('venv', ['0.5.9'], indirect=True)
def test_role_explicit_sites_and_backup(venv, tmp_path):
    version, python, pkg, wheel = venv
    pristine = _py_files(pkg)
    # no sglang_sm120_patch_python: the default follows the service role's venv variable
    changed, result, out = _role(tmp_path, None, 'present', extra={
        'sglang_service_venv': str(python.parent.parent),
        'sglang_sm120_patch_sites': ['glm5_moe_runner_backend'], 'sglang_sm120_patch_glm5_only': False,
        'sglang_sm120_patch_backup': True})
    assert changed is True
    assert [s['name'] for s in result['sites']] == ['glm5_moe_runner_backend']
    assert len(result['backup_files']) == 1 and os.path.exists(result['backup_files'][0])
    text = (pkg / 'srt/server_args.py').read_text('utf-8')
    assert 'if is_sm100_supported() or is_sm120_supported():' in text
    now = _py_files(pkg)
    assert sorted(k for k in now if now[k] != pristine.get(k)) == ['srt/server_args.py']

    # a site that does not exist in 0.5.9, asked for explicitly: the play fails and nothing is written
    proc = _run_role_raw(tmp_path, {'sglang_service_venv': str(python.parent.parent), 'sglang_sm120_patch_state': 'present',
                                    'sglang_sm120_patch_sites': ['allreduce_fusion_backend_resolver'], 'result_file': '/dev/null'})
    assert proc.returncode != 0
    assert 'allreduce_fusion_backend_resolver is not_present' in proc.stdout
    assert _py_files(pkg) == now
