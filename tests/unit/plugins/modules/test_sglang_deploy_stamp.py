# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_deploy_stamp module in-process (AnsibleModule, run_command) against a real venv holding the real
SGLang 0.5.9 release files from PyPI (tests/sglang_wheels.py), and a real HTTP server on 127.0.0.1 for /health.

The unit option needs systemd as PID 1; it is covered by the molecule scenario sglang_service and by the
comparison tests in tests/unit/plugins/module_utils/test_deploy_stamp.py."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import sys
import threading
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _collection
from ansible_collections.llmops.sglang.plugins.modules import sglang_deploy_stamp

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position
from module_process import run_in_process  # noqa: E402  pylint: disable=wrong-import-position


def run_module(capsys, args, check_mode=False, diff=False):
    return run_in_process(sglang_deploy_stamp.main, capsys, args, check_mode, diff)


@pytest.fixture(scope='module')
def venv(tmp_path_factory):
    """A real venv (no pip) with SGLang 0.5.9's released files in its site-packages."""
    return sglang_wheels.make_venv(tmp_path_factory.mktemp('venv'), '0.5.9')


@pytest.fixture
def host(tmp_path):
    unit = tmp_path / 'sglang.service'
    env = tmp_path / 'sglang.env'
    unit.write_text('[Service]\nExecStart=/opt/sglang/venv/bin/python -m sglang.launch_server\n')
    env.write_text('NCCL_P2P_DISABLE=0\n')
    files = [str(unit), str(env), str(tmp_path / 'sglang.secret-args.yaml')]
    return {'path': str(tmp_path / 'sglang.deployed.json'), 'files': files,
            'inputs': {'sglang_service_args': 'f' * 64, 'role files': 'e' * 64}}


@pytest.fixture
def health_server():
    """/health answers with the status in state['status'] (SGLang: 503 until ready, then 200)."""
    state = {'status': 503}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(state['status'] if self.path == '/health' else 404)
            self.send_header('Content-Length', '0')
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state['url'] = 'http://127.0.0.1:%d' % server.server_address[1]
    yield state
    server.shutdown()
    server.server_close()


def test_first_query_has_no_record_and_writes_nothing(capsys, host):
    res = run_module(capsys, {'path': host['path'], 'inputs': host['inputs'], 'files': host['files']})
    assert (res['changed'], res['current'], res['reasons'], res['recorded_at']) == (False, False, ['no deployment record yet'], None)
    assert not os.path.exists(host['path'])


def test_the_query_reports_which_probed_paths_exist(capsys, host, tmp_path):
    """The role asks where a runtime guard left files, so that a deploy with the guard off removes one only there."""
    timer, gone, lib = tmp_path / 'sglang-guard.timer', tmp_path / 'sglang-guard.service', tmp_path / 'lib'
    timer.write_text('[Timer]\n')
    lib.mkdir()
    (tmp_path / 'dangling').symlink_to(tmp_path / 'nowhere')
    probe = [str(gone), str(timer), str(lib), str(tmp_path / 'dangling')]
    res = run_module(capsys, {'path': host['path'], 'inputs': host['inputs'], 'files': host['files'], 'probe_paths': probe})
    assert res['paths_present'] == [str(timer), str(lib), str(tmp_path / 'dangling')] and res['changed'] is False
    assert run_module(capsys, {'path': host['path'], 'inputs': host['inputs'], 'files': host['files']})['paths_present'] == []


def test_check_mode_and_diff_write_nothing(capsys, host):
    args = {'path': host['path'], 'state': 'present', 'inputs': host['inputs'], 'files': host['files']}
    res = run_module(capsys, args, check_mode=True, diff=True)
    assert res['changed'] is True
    assert res['diff']['before'] == ''
    inputs = json.loads(res['diff']['after'])['inputs']
    assert inputs == dict(host['inputs'], **{'llmops.sglang code': inputs['llmops.sglang code']})
    version, digest = inputs['llmops.sglang code'].split(' ')
    assert (version, len(digest)) == (_collection.VERSION, 64)
    assert not os.path.exists(host['path'])


def test_present_is_idempotent_and_query_then_current(capsys, host, venv):
    args = {'path': host['path'], 'inputs': host['inputs'], 'files': host['files'], 'python': venv['python']}
    first = run_module(capsys, dict(args, state='present'))
    assert first['changed'] is True and first['sglang_version'] == '0.5.9'
    assert os.stat(host['path']).st_mode & 0o777 == 0o600
    recorded = json.loads(Path(host['path']).read_text())
    assert recorded['sglang']['version'] == '0.5.9'
    assert recorded['sglang']['path'] == str(venv['site'] / 'sglang')
    assert recorded['files'][host['files'][2]] is None
    assert recorded['files'][host['files'][1]]['sha256'] == hashlib.sha256(b'NCCL_P2P_DISABLE=0\n').hexdigest()
    assert run_module(capsys, dict(args, state='present'))['changed'] is False
    res = run_module(capsys, args)
    assert (res['current'], res['reasons'], res['changed']) == (True, [], False)


def test_hand_edits_and_sglang_changes_are_found(capsys, host, venv):
    args = {'path': host['path'], 'inputs': host['inputs'], 'files': host['files'], 'python': venv['python']}
    run_module(capsys, dict(args, state='present'))
    with open(host['files'][1], 'a', encoding='utf-8') as handle:
        handle.write('NCCL_DEBUG=TRACE\n')
    server_args = venv['site'] / 'sglang' / 'srt' / 'server_args.py'
    original = server_args.read_bytes()
    try:
        # what sglang_patch_sm120 does to this file: one line more
        server_args.write_bytes(original + b'# patched\n')
        res = run_module(capsys, args)
        assert res['current'] is False
        assert res['reasons'] == [
            '%s was changed on the host' % host['files'][1],
            'the installation of SGLang 0.5.9 at %s changed (an SM120-patched source, its dist-info or the installed '
            'distributions beside it)' % (venv['site'] / 'sglang'),
        ]
    finally:
        server_args.write_bytes(original)


def test_another_sglang_version_is_named(capsys, host, venv, tmp_path):
    args = {'path': host['path'], 'inputs': host['inputs'], 'files': host['files'], 'python': venv['python']}
    run_module(capsys, dict(args, state='present'))
    dist = venv['site'] / 'sglang-0.5.9.dist-info'
    moved = venv['site'] / 'sglang-0.5.10.dist-info'
    metadata = (dist / 'METADATA').read_text()
    os.rename(str(dist), str(moved))
    try:
        (moved / 'METADATA').write_text(metadata.replace('Version: 0.5.9\n', 'Version: 0.5.10\n', 1))
        res = run_module(capsys, args)
        assert res['sglang_version'] == '0.5.10'
        assert res['reasons'] == ['SGLang 0.5.9 was replaced by 0.5.10']
    finally:
        (moved / 'METADATA').write_text(metadata)
        os.rename(str(moved), str(dist))


def test_the_query_reads_the_recorded_sglang_without_starting_the_interpreter(capsys, host, venv, tmp_path):
    """A no-change query reads SGLang where the record found it; the interpreter (here a real wrapper that counts its
    starts and runs the venv's python) locates it only to write the record and once that directory no longer holds
    SGLang."""
    starts = tmp_path / 'starts'
    counted = Path(venv['python']).parent / 'python-counted'
    counted.write_text('#!/bin/sh\necho started >> %s\nexec %s "$@"\n' % (starts, venv['python']))
    counted.chmod(0o755)
    args = {'path': host['path'], 'inputs': host['inputs'], 'files': host['files'], 'python': str(counted)}
    run_module(capsys, dict(args, state='present'))
    res = run_module(capsys, args)
    assert (res['current'], res['sglang_version'], starts.read_text().count('started')) == (True, '0.5.9', 1)
    package = venv['site'] / 'sglang'
    os.rename(str(package), str(package) + '.away')
    try:
        res = run_module(capsys, args)
        assert (res['reasons'], res['sglang_version'], starts.read_text().count('started')) == (['SGLang was removed'], None, 2)
    finally:
        os.rename(str(package) + '.away', str(package))
        counted.unlink()


def test_interpreter_without_sglang_counts_as_not_installed(capsys, host, venv):
    args = {'path': host['path'], 'inputs': host['inputs'], 'files': host['files']}
    run_module(capsys, dict(args, state='present', python=venv['python']))
    res = run_module(capsys, dict(args, python='/nonexistent/venv/bin/python'))
    assert res['reasons'] == ['SGLang was removed'] and res['sglang_version'] is None


def test_health_must_answer_200(capsys, host, health_server):
    args = {'path': host['path'], 'inputs': host['inputs'], 'files': host['files']}
    run_module(capsys, dict(args, state='present'))
    res = run_module(capsys, dict(args, health_url=health_server['url']))
    assert res['reasons'] == ['GET %s/health answered 503' % health_server['url']]
    assert res['health']['status'] == 503
    health_server['status'] = 200
    res = run_module(capsys, dict(args, health_url=health_server['url']))
    assert (res['current'], res['health']['status']) == (True, 200)


def test_changed_inputs_are_named(capsys, host):
    args = {'path': host['path'], 'inputs': host['inputs'], 'files': host['files']}
    run_module(capsys, dict(args, state='present'))
    res = run_module(capsys, dict(args, inputs=dict(host['inputs'], sglang_service_args='0' * 64, sglang_service_port='1' * 64)))
    assert res['reasons'] == ['inputs changed: sglang_service_args, sglang_service_port']
    assert (res['current'], res['unit_changed']) == (False, False)


def test_a_record_of_other_collection_code_is_named(capsys, host):
    args = {'path': host['path'], 'inputs': host['inputs'], 'files': host['files']}
    run_module(capsys, dict(args, state='present'))
    record = json.loads(Path(host['path']).read_text())
    record['inputs']['llmops.sglang code'] = '0.1.0 ' + 'f' * 64
    Path(host['path']).write_text(json.dumps(record))
    assert run_module(capsys, args)['reasons'] == ['inputs changed: llmops.sglang code']


def test_damaged_record_is_reported_then_rewritten(capsys, host):
    Path(host['path']).write_text('{"format": 2, "inpu')
    args = {'path': host['path'], 'inputs': host['inputs'], 'files': host['files']}
    first = run_module(capsys, args)
    kept = [str(p) for p in Path(host['path']).parent.iterdir() if '.damaged-' in p.name]
    assert first['reasons'] == ['the deployment record was damaged (not JSON: Unterminated string starting at: line 1 column 15 '
                                '(char 14); kept as %s)' % kept[0]]
    warnings = [w['event']['msg'] for w in first['warnings']]
    assert warnings == ['The deployment record %s was damaged (not JSON: Unterminated string starting at: line 1 column 15 '
                        '(char 14)); it was kept as %s.' % (host['path'], kept[0])]
    assert run_module(capsys, dict(args, state='present'))['changed'] is True
    assert run_module(capsys, args)['current'] is True


def test_missing_directory_fails_with_advice(capsys, tmp_path):
    res = run_module(capsys, {'path': str(tmp_path / 'no' / 'such' / 'dir' / 'x.json'), 'state': 'present', 'inputs': {}})
    assert res['failed'] is True
    assert res['msg'].startswith('Cannot write the deployment record in %s' % (tmp_path / 'no' / 'such' / 'dir'))
    assert 'Create the directory first' in res['msg']


def test_restored_keeps_the_recorded_inputs_and_writes_only_what_was_recorded(capsys, host):
    """state=present with restored (after a proven rollback): the record keeps the restored deployment's inputs, not
    the ones given (the configuration that was rolled back); a host that no longer has the recorded files keeps its
    old record. (The unit's InvocationID, what the rollback renews, needs systemd: the integration test of the
    rollback.)"""
    args = {'path': host['path'], 'inputs': host['inputs'], 'files': host['files']}
    run_module(capsys, dict(args, state='present'))
    before = json.loads(Path(host['path']).read_text())
    rolled_back = dict(args, inputs=dict(host['inputs'], sglang_service_args='0' * 64), state='present', restored=True,
                       process_argv=['/bin/false'])
    res = run_module(capsys, rolled_back)
    assert (res['current'], res['reasons'], res['process']) == (True, [], None)
    assert json.loads(Path(host['path']).read_text())['inputs'] == before['inputs']
    assert run_module(capsys, args)['current'] is True
    with open(host['files'][1], 'a', encoding='utf-8') as handle:
        handle.write('NCCL_DEBUG=TRACE\n')
    res = run_module(capsys, rolled_back)
    assert (res['current'], res['changed'], res['reasons']) == (False, False, ['%s was changed on the host' % host['files'][1]])
    assert json.loads(Path(host['path']).read_text()) == before
    Path(host['path']).unlink()
    res = run_module(capsys, rolled_back)
    assert (res['current'], res['reasons']) == (False, ['no deployment record of the restored configuration'])
    assert not os.path.exists(host['path'])
