# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Deployment records (module_utils/deploy/_stamp.py): digests, comparison, atomic writes, on real files."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _stamp as ds
from ansible_collections.llmops.sglang.plugins.module_utils.host._systemd import parse_show as parse_systemctl_show

NOW = datetime.datetime(2026, 11, 30, 11, 0, 0, tzinfo=datetime.timezone.utc)

# `systemctl show sglang.service --property=...` of a running, enabled unit (systemd 252, Debian 12).
RUNNING = parse_systemctl_show('ActiveState=active\nSubState=running\nUnitFileState=enabled\nNeedDaemonReload=no\n'
                               'InvocationID=0f5c3e0d6a2b4b8e9d1c2b3a4f5e6d7c\n')
SGLANG = {'path': '/opt/sglang/venv/lib/python3.11/site-packages/sglang', 'version': '0.5.9', 'tree': 'a' * 64, 'files': 3338}
UNIT = {'name': 'sglang.service', 'invocation': RUNNING['InvocationID']}


@pytest.fixture
def files(tmp_path):
    unit = tmp_path / 'sglang.service'
    env = tmp_path / 'sglang.env'
    unit.write_text('[Service]\nExecStart=/bin/true\n')
    env.write_text('NCCL_P2P_DISABLE=0\n')
    return [str(unit), str(env), str(tmp_path / 'sglang.secret-args.yaml')]


INPUTS = {'sglang_service_args': 'a' * 64, 'sglang_service_environment': 'b' * 64, 'role files': 'c' * 64}


def record(files, **kw):
    args = dict(inputs=INPUTS, files=files, sglang=SGLANG, unit=UNIT, now=NOW)
    args.update(kw)
    return ds.build(**args)


def test_file_digest_is_sha256_and_none_for_absent(tmp_path):
    path = tmp_path / 'x'
    path.write_bytes(b'hello\n')
    assert ds.file_digest(str(path)) == hashlib.sha256(b'hello\n').hexdigest()
    assert ds.file_digest(str(tmp_path / 'missing')) is None


def test_unchanged_host_is_current(files):
    assert ds.compare(record(files), INPUTS, files, SGLANG, RUNNING) == ([], False)


def test_every_difference_is_named(files):
    rec = record(files)
    with open(files[1], 'a', encoding='utf-8') as handle:
        handle.write('NCCL_DEBUG=INFO\n')
    os.unlink(files[0])
    with open(files[2], 'w', encoding='utf-8') as handle:
        handle.write('api-key: x\n')
    unit = dict(RUNNING, ActiveState='failed', SubState='failed', UnitFileState='disabled', NeedDaemonReload='yes',
                InvocationID='11111111111111111111111111111111')
    sglang = dict(SGLANG, version='0.5.10')
    inputs = dict(INPUTS, sglang_service_args='d' * 64, sglang_service_api_key='e' * 64)
    del inputs['role files']
    reasons, unit_changed = ds.compare(rec, inputs, files, sglang, unit, {'url': 'http://127.0.0.1:30000/health', 'status': 503})
    assert unit_changed is True
    assert reasons == [
        'inputs changed: role files, sglang_service_api_key, sglang_service_args',
        # in path order
        '%s was changed on the host' % files[1],
        '%s appeared' % files[2],
        '%s was removed' % files[0],
        'SGLang 0.5.9 was replaced by 0.5.10',
        'sglang.service is failed (failed), not active',
        'sglang.service is disabled, not enabled',
        'sglang.service has a daemon-reload pending (its unit file changed on disk)',
        'sglang.service was restarted since the deployment (InvocationID 11111111111111111111111111111111, recorded '
        '0f5c3e0d6a2b4b8e9d1c2b3a4f5e6d7c)',
        'GET http://127.0.0.1:30000/health answered 503',
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason='chown to another user needs root')
def test_mode_and_owner_count_for_files_and_directories(files, tmp_path):
    secret = tmp_path / 'sglang.secret.env'
    secret.write_text('HF_TOKEN=x\n')
    os.chmod(str(secret), 0o600)
    os.chmod(str(tmp_path), 0o750)
    managed = files + [str(secret), str(tmp_path)]
    rec = record(managed)
    assert rec['files'][str(tmp_path)]['sha256'] is None
    os.chmod(str(secret), 0o644)
    os.chown(str(tmp_path), 65534, -1)
    reasons = ds.compare(rec, INPUTS, managed, SGLANG, RUNNING)[0]
    assert reasons == [
        'mode or owner of %s changed on the host (0750 65534:0, recorded 0750 0:0)' % tmp_path,
        'mode or owner of %s changed on the host (0644 0:0, recorded 0600 0:0)' % secret,
    ]


def test_only_a_stopped_or_restarted_unit_is_a_unit_change(files):
    rec = record(files)
    assert ds.compare(rec, INPUTS, files, SGLANG, dict(RUNNING, ActiveState='inactive', SubState='dead'))[1] is True
    assert ds.compare(rec, INPUTS, files, SGLANG, dict(RUNNING, InvocationID='1' * 32))[1] is True
    assert ds.compare(rec, INPUTS, files, SGLANG, dict(RUNNING, NeedDaemonReload='yes'))[1] is False
    assert ds.compare(rec, {}, files, SGLANG, RUNNING)[1] is False


def test_package_tree_and_location_changes(files):
    rec = record(files)
    assert ds.compare(rec, INPUTS, files, dict(SGLANG, tree='b' * 64), RUNNING)[0] == [
        'the installation of SGLang 0.5.9 at %s changed (an SM120-patched source, its dist-info or the installed '
        'distributions beside it)' % SGLANG['path']]
    assert ds.compare(rec, INPUTS, files, dict(SGLANG, path='/srv/venv/sglang'), RUNNING)[0] == [
        'SGLang moved from %s to /srv/venv/sglang' % SGLANG['path']]
    assert ds.compare(rec, INPUTS, files, None, RUNNING) == (['SGLang was removed'], False)
    assert ds.compare(record(files, sglang=None), INPUTS, files, SGLANG, RUNNING) == (['SGLang was installed'], False)


def test_health_refused_is_a_reason(files):
    health = {'url': 'http://127.0.0.1:30000/health', 'status': None, 'error': '[Errno 111] Connection refused'}
    assert ds.compare(record(files), INPUTS, files, SGLANG, RUNNING, health) == (
        ['GET http://127.0.0.1:30000/health answered [Errno 111] Connection refused'], False)


def test_set_of_managed_files_changed(files, tmp_path):
    extra = files + [str(tmp_path / 'sglang.secret.env')]
    assert ds.compare(record(files), INPUTS, extra, SGLANG, RUNNING)[0] == [
        'the set of managed files changed (%s)' % (tmp_path / 'sglang.secret.env')]


def test_no_damaged_or_foreign_record(tmp_path, files):
    path = str(tmp_path / 'sglang.deployed.json')
    assert ds.read(path) is None
    assert ds.compare(None, INPUTS, files) == (['no deployment record yet'], False)

    def damaged(text):
        """(why, kept) of compare()'s one reason for a damaged record, the kept file holding ``text``."""
        reasons, unit_changed = ds.compare(ds.read(path), INPUTS, files)
        match = re.match(r'the deployment record was damaged \((.*); kept as (\S+)\)$', reasons[0])
        assert (len(reasons), unit_changed, open(match.group(2)).read()) == (1, False, text)
        assert match.group(2).startswith(path + '.damaged-') and not os.path.exists(path)
        return match.group(1)
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write('{"inputs": ')
    assert damaged('{"inputs": ') == 'not JSON: Expecting value: line 1 column 12 (char 11)'
    # valid JSON of the wrong shape (a hand edit): damaged, never a Python error
    good = record(files)
    for key, value, why in (('sglang', 'garbage', 'sglang is not a mapping or null'), ('unit', 5, 'unit is not a mapping or null'),
                            ('files', ['x'], 'files is not a mapping'), ('inputs', 'x', 'inputs is not a mapping'),
                            ('files', {files[0]: 'x'}, 'files[%r] is not a file state' % files[0])):
        text = json.dumps(dict(good, **{key: value}))
        with open(path, 'w', encoding='utf-8') as handle:
            handle.write(text)
        assert damaged(text) == why, (key, value)
    with open(path, 'w', encoding='utf-8') as handle:
        json.dump({'format': 1, 'fingerprint': 'x'}, handle)
    assert ds.compare(ds.read(path), INPUTS, files) == (['the deployment record has format 1, this collection writes 2'], False)
    # at most three damaged records are kept
    assert len([p for p in tmp_path.iterdir() if '.damaged-' in p.name]) == 3


def test_a_damaged_record_is_left_in_place_in_check_mode(tmp_path, files):
    path = tmp_path / 'sglang.deployed.json'
    path.write_text('{"inputs": ')
    assert ds.compare(ds.read(str(path), check_mode=True), INPUTS, files) == (
        ['the deployment record was damaged (not JSON: Expecting value: line 1 column 12 (char 11); left in place in check '
         'mode)'], False)
    assert path.read_text() == '{"inputs": ' and [p for p in os.listdir(str(tmp_path)) if '.damaged-' in p] == []


def test_write_is_atomic_0600_and_round_trips(tmp_path, files):
    path = str(tmp_path / 'sglang.deployed.json')
    rec = record(files)
    ds.write(path, rec)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert ds.read(path) == rec
    assert [p for p in os.listdir(str(tmp_path)) if p.startswith('.')] == []


def test_failed_write_keeps_the_old_record(tmp_path, files, monkeypatch):
    path = str(tmp_path / 'sglang.deployed.json')
    ds.write(path, record(files))

    def full_disk(src, dst):
        raise OSError(28, 'No space left on device')
    monkeypatch.setattr(ds.os, 'replace', full_disk)
    with pytest.raises(ds.StampError) as info:
        ds.write(path, record(files, inputs={}))
    assert info.value.msg == 'Cannot write the deployment record %s: [Errno 28] No space left on device' % path
    assert ds.read(path)['inputs'] == INPUTS
    assert [p for p in os.listdir(str(tmp_path)) if p.startswith('.')] == []


def test_write_into_a_missing_directory_says_what_to_do(tmp_path, files):
    with pytest.raises(ds.StampError) as info:
        ds.write(str(tmp_path / 'nope' / 'x.json'), record(files))
    assert 'Create the directory first' in info.value.msg


def test_same_record_ignores_only_the_time(files):
    later = record(files, now=NOW + datetime.timedelta(hours=1))
    assert ds.same_record(record(files), later)
    assert not ds.same_record(record(files), record(files, inputs={}))
    assert not ds.same_record(None, later)


def test_install_digest_sees_versions_reinstalls_and_patches(tmp_path):
    site = tmp_path / 'site-packages'
    pkg = site / 'sglang'
    (pkg / 'srt').mkdir(parents=True)
    (site / 'sglang-0.5.9.dist-info').mkdir()
    (site / 'sglang-0.5.9.dist-info' / 'RECORD').write_text('sglang/__init__.py,,\n')
    (site / 'flashinfer_python-0.6.17.dist-info').mkdir()
    source = pkg / 'srt' / 'server_args.py'
    source.write_text('x = 1\n')
    watched = ['srt/server_args.py', 'srt/layers/communicator.py']
    before = ds.install_digest(str(pkg), watched)
    # two distributions, one dist-info file, two watched sources (one absent)
    assert before[1] == 5
    assert ds.install_digest(str(pkg), watched) == before
    # byte code and files outside the watched set are not what a deploy controls
    (pkg / 'srt' / '__pycache__').mkdir()
    (pkg / 'srt' / '__pycache__' / 'server_args.cpython-311.pyc').write_bytes(b'\0' * 16)
    (pkg / 'srt' / 'other.py').write_text('y = 1\n')
    assert ds.install_digest(str(pkg), watched) == before
    # an SM120 patch: same size, other content
    source.write_text('x = 2\n')
    patched = ds.install_digest(str(pkg), watched)
    assert patched[0] != before[0]
    source.write_text('x = 1\n')
    assert ds.install_digest(str(pkg), watched) == before
    # pip install of another flashinfer-python beside it
    os.rename(str(site / 'flashinfer_python-0.6.17.dist-info'), str(site / 'flashinfer_python-0.6.18.dist-info'))
    assert ds.install_digest(str(pkg), watched)[0] != before[0]
    os.rename(str(site / 'flashinfer_python-0.6.18.dist-info'), str(site / 'flashinfer_python-0.6.17.dist-info'))
    # a reinstall of the same version rewrites sglang's RECORD
    record = site / 'sglang-0.5.9.dist-info' / 'RECORD'
    st = record.stat()
    os.utime(str(record), ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
    assert ds.install_digest(str(pkg), watched)[0] != before[0]


def test_stale_process_only_while_the_recorded_start_runs_with_changed_files(files):
    """A run that wrote new files and was killed before its restart leaves the recorded start running: a deploy must
    restart it although it changes no file. A later start, or nothing changed, is not stale."""
    rec = record(files)
    assert ds.stale_process(rec, files, SGLANG, RUNNING) is False
    with open(files[1], 'a', encoding='utf-8') as handle:
        handle.write('NCCL_ALGO=Tree\n')
    assert ds.stale_process(rec, files, SGLANG, RUNNING) is True
    restarted = dict(RUNNING, InvocationID='2' * 32)
    assert ds.stale_process(rec, files, SGLANG, restarted) is False          # started after the change
    stopped = dict(RUNNING, ActiveState='inactive', SubState='dead')
    assert ds.stale_process(rec, files, SGLANG, stopped) is False            # nothing runs: a start follows anyway
    assert ds.stale_process(None, files, SGLANG, RUNNING) is False           # no record: nothing to compare with
    assert ds.stale_process(rec, files, SGLANG, None) is False               # no unit checked


def test_stale_process_sees_sglang_and_a_pending_unit_reload(files):
    rec = record(files)
    assert ds.stale_process(rec, files, dict(SGLANG, version='0.5.10'), RUNNING) is True
    assert ds.stale_process(rec, files, dict(SGLANG, tree='b' * 64), RUNNING) is True
    assert ds.stale_process(rec, files, SGLANG, dict(RUNNING, NeedDaemonReload='yes')) is True
    # inputs alone (a role setting) do not say what the process runs
    assert ds.compare(rec, dict(INPUTS, sglang_service_args='d' * 64), files, SGLANG, RUNNING)[0]
    assert ds.stale_process(rec, files, SGLANG, RUNNING) is False


def test_a_restored_deployment_is_recorded_again_only_as_recorded(files):
    """After a rollback (breaker report of issue 21, finding 9): the record may take the unit's new run only where the
    host runs what it recorded (files, SGLang) and the unit is active."""
    rec = record(files)
    restarted = dict(RUNNING, InvocationID='3' * 32)
    assert ds.restore_reasons(rec, files, SGLANG, restarted) == []
    assert ds.restore_reasons(rec, files, dict(SGLANG, version='0.5.10'), restarted) == ['SGLang 0.5.9 was replaced by 0.5.10']
    assert ds.restore_reasons(rec, files, SGLANG, dict(restarted, ActiveState='failed')) == ['sglang.service is failed, not active']
    assert ds.restore_reasons(None, files, SGLANG, restarted) == ['no deployment record of the restored configuration']
    assert ds.restore_reasons({'format': None, 'damaged': {'why': 'not JSON'}}, files, SGLANG, restarted)
    with open(files[1], 'a', encoding='utf-8') as handle:
        handle.write('NCCL_DEBUG=INFO\n')
    assert ds.restore_reasons(rec, files, SGLANG, restarted) == ['%s was changed on the host' % files[1]]
