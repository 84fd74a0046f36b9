# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The unit and environment files of the sglang_service role: real files, a real full tmpfs (conftest.tiny_fs) and the
real systemd-analyze when the machine has it."""

from __future__ import annotations

import os
import shutil
import stat

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host import _config_file as cf
from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import NoSpaceError
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import local_run

OLD = b'[Service]\nExecStart=/bin/true\nRestartSec=10\n'
NEW = b'[Service]\nExecStart=/bin/true\nRestartSec=11\n'


def wanted(content, mode=0o644):
    return cf.Wanted(content=content, uid=os.getuid(), gid=os.getgid(), mode=mode)


def entries(directory):
    return sorted(os.listdir(str(directory)))


@pytest.mark.parametrize('now, want, plan', [
    (cf.FileState(None), wanted(NEW), cf.Plan(write=True, fix=False)),
    (cf.FileState(OLD, os.getuid(), os.getgid(), 0o644), wanted(NEW), cf.Plan(write=True, fix=False)),
    (cf.FileState(NEW, os.getuid(), os.getgid(), 0o644), wanted(NEW), cf.Plan(write=False, fix=False)),
    (cf.FileState(NEW, os.getuid(), os.getgid(), 0o644), wanted(NEW, 0o600), cf.Plan(write=False, fix=True)),
])
def test_decide_writes_only_what_differs(now, want, plan):
    assert cf.decide(now, want) == plan
    assert plan.changed == (plan.write or plan.fix)


def test_a_new_file_gets_its_mode_before_it_appears(tmp_path):
    target = tmp_path / 'sglang.secret.env'
    seen = []
    # the verifier runs on the complete temporary file right before the rename: its mode is already the wanted one
    cf.write(str(target), wanted(b'HF_TOKEN="x"\n', 0o600), verify=lambda tmp: seen.append(stat.S_IMODE(os.stat(tmp).st_mode)))
    assert seen == [0o600]
    assert target.read_bytes() == b'HF_TOKEN="x"\n'
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert cf.observe(str(target)) == cf.FileState(b'HF_TOKEN="x"\n', os.getuid(), os.getgid(), 0o600)
    assert entries(tmp_path) == ['sglang.secret.env']


def test_backup_is_the_old_file_and_the_new_one_replaces_it(tmp_path):
    target = tmp_path / 'sglang.service'
    target.write_bytes(OLD)
    kept = cf.write(str(target), wanted(NEW), backup=True)
    assert target.read_bytes() == NEW
    assert kept.startswith(str(target) + '.') and kept.endswith('~')
    with open(kept, 'rb') as handle:
        assert handle.read() == OLD
    assert entries(tmp_path) == sorted(['sglang.service', os.path.basename(kept)])
    assert cf.write(str(tmp_path / 'new.service'), wanted(NEW), backup=True) is None   # nothing to keep


def test_a_refused_unit_leaves_the_old_one(tmp_path):
    target = tmp_path / 'sglang.service'
    target.write_bytes(OLD)

    def refuse(tmp):
        raise cf.VerifyError('refused', 'sglang.service:3: bad')

    with pytest.raises(cf.VerifyError):
        cf.write(str(target), wanted(NEW), verify=refuse, backup=True)
    assert target.read_bytes() == OLD
    assert entries(tmp_path) == ['sglang.service']      # no temporary file, no backup of a file never replaced


def test_a_full_file_system_names_path_free_and_needed_and_keeps_the_old_file(tiny_fs):
    target = tiny_fs / 'sglang.service'
    target.write_bytes(OLD)
    with open(tiny_fs / 'filler', 'wb', buffering=0) as handle:
        try:
            handle.write(b'x' * (64 * 1024))
        except OSError:
            pass
    content = NEW * 200
    with pytest.raises(NoSpaceError) as info:
        cf.write(str(target), wanted(content), backup=True)
    assert info.value.to_json() == {'path': str(target), 'free': info.value.free, 'needed': len(content)}
    assert 0 <= info.value.free < len(content)
    assert target.read_bytes() == OLD
    assert entries(tiny_fs) == ['filler', 'sglang.service']


@pytest.mark.skipif(not shutil.which('systemd-analyze'), reason='needs systemd-analyze')
def test_unit_verifier_runs_systemd_analyze_under_the_unit_name(tmp_path):
    verify = cf.unit_verifier('sglang.service', local_run, shutil.which('systemd-analyze'))
    good = tmp_path / '.sglang.service.abc.tmp'
    good.write_bytes(b'[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n')
    verify(str(good))
    bad = tmp_path / '.sglang.service.def.tmp'
    bad.write_bytes(b'[Service]\nExecStart=/bin/true\nRestartSecs=3\n')
    with pytest.raises(cf.VerifyError) as info:
        verify(str(bad))
    assert info.value.output.startswith('sglang.service:3: ')
    assert "RestartSecs" in info.value.output and 'the unit file was left as it was' in info.value.msg
