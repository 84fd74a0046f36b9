# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_config_file module in-process (AnsibleModule) on real files: check mode and diff, idempotence, owner and
mode, a full file system (a real tmpfs, root only) and the real systemd-analyze when the machine has it."""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import human_bytes
from ansible_collections.llmops.sglang.plugins.modules import sglang_config_file

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from module_process import run_in_process  # noqa: E402  pylint: disable=wrong-import-position

UNIT = '[Unit]\nDescription=x\n[Service]\nExecStart=/bin/true\nRestartSec=%d\n[Install]\nWantedBy=multi-user.target\n'


def run_module(capsys, args, check_mode=False, diff=False):
    me = dict(owner=pwd.getpwuid(os.getuid()).pw_name, group=grp.getgrgid(os.getgid()).gr_name)
    return run_in_process(sglang_config_file.main, capsys, dict(me, **args), check_mode, diff)


def test_check_mode_and_diff_write_nothing_then_the_run_writes_once(tmp_path, capsys):
    dest = tmp_path / 'sglang.env'
    dest.write_text('A="1"\n')
    args = dict(dest=str(dest), content='A="2"\n', mode='0600')
    checked = run_module(capsys, args, check_mode=True, diff=True)
    assert (checked['changed'], checked['diff']['before'], checked['diff']['after']) == (True, 'A="1"\n', 'A="2"\n')
    assert dest.read_text() == 'A="1"\n'
    assert run_module(capsys, args)['changed'] is True
    assert (dest.read_text(), stat.S_IMODE(dest.stat().st_mode)) == ('A="2"\n', 0o600)
    assert run_module(capsys, args)['changed'] is False
    assert 'backup_file' not in run_module(capsys, dict(args, mode='0644'))           # only the mode: fixed in place
    assert stat.S_IMODE(dest.stat().st_mode) == 0o644


def test_created_says_whether_the_file_was_new(tmp_path, capsys):
    """The role's rollback removes the files a failed deploy created: ``created`` names them, in check mode too."""
    dest = tmp_path / 'sglang.secret.env'
    args = dict(dest=str(dest), content='A="1"\n')
    assert run_module(capsys, args, check_mode=True)['created'] is True and not dest.exists()
    assert run_module(capsys, args)['created'] is True
    assert run_module(capsys, dict(args, content='A="2"\n'))['created'] is False


def test_a_secret_file_never_shows_its_content_in_the_diff(tmp_path, capsys):
    dest = tmp_path / 'sglang.secret.env'
    token = 'hf_llmopsSecretToken0123456789'
    args = dict(dest=str(dest), content='HF_TOKEN="%s"\n' % token, mode='0600', secret=True)
    checked = run_module(capsys, args, check_mode=True, diff=True)
    assert checked['diff'] == {'before': '', 'after': '(content hidden - secret)\n', 'before_header': str(dest),
                               'after_header': str(dest)}
    first = run_module(capsys, args, diff=True)
    changed = run_module(capsys, dict(args, content='HF_TOKEN="%s-2"\n' % token), diff=True)
    assert changed['diff']['before'] == changed['diff']['after'] == '(content hidden - secret)\n'
    assert token not in json.dumps([checked, first, changed])
    assert dest.read_text() == 'HF_TOKEN="%s-2"\n' % token


def test_bad_mode_and_unknown_owner_fail_naming_the_file(tmp_path, capsys):
    dest = str(tmp_path / 'sglang.env')
    bad = run_module(capsys, dict(dest=dest, content='', mode='rw-r--r--'))
    assert bad['failed'] and bad['msg'] == "%s: mode 'rw-r--r--' is not an octal mode such as '0644'" % dest
    nobody = run_module(capsys, dict(dest=dest, content='', owner='llmops-no-such-user'))
    assert nobody['msg'].startswith('%s: user llmops-no-such-user does not exist on this host' % dest)
    assert not os.path.exists(dest)


@pytest.mark.skipif(not shutil.which('systemd-analyze'), reason='needs systemd-analyze')
def test_a_unit_systemd_analyze_refuses_is_not_installed(tmp_path, capsys):
    dest = tmp_path / 'sglang.service'
    dest.write_text(UNIT % 10)
    refused = run_module(capsys, dict(dest=str(dest), content=(UNIT % 11).replace('RestartSec', 'RestartSecs'),
                                      verify='systemd-unit', backup=True))
    assert refused['failed'] and refused['verify_output'].startswith('sglang.service:5: ')
    assert dest.read_text() == UNIT % 10 and sorted(os.listdir(str(tmp_path))) == ['sglang.service']
    taken = run_module(capsys, dict(dest=str(dest), content=UNIT % 11, verify='systemd-unit', backup=True))
    assert dest.read_text() == UNIT % 11 and Path(taken['backup_file']).read_text() == UNIT % 10


def test_a_full_file_system_fails_with_path_free_and_needed(tiny_fs, capsys):
    dest = tiny_fs / 'sglang.service'
    dest.write_text(UNIT % 10)
    subprocess.run(['dd', 'if=/dev/zero', 'of=%s' % (tiny_fs / 'filler'), 'bs=4k'], capture_output=True, check=False)
    content = UNIT % 11
    got = run_module(capsys, dict(dest=str(dest), content=content))
    assert got['no_space'] == {'path': str(dest), 'free': 0, 'needed': len(content)}
    assert got['msg'] == ('no space left on the file system of %s: 0 bytes free, %s needed to write it; it was left as it '
                          'was. Free space there and run again' % (dest, human_bytes(len(content))))
    assert dest.read_text() == UNIT % 10 and sorted(os.listdir(str(tiny_fs))) == ['filler', 'sglang.service']
