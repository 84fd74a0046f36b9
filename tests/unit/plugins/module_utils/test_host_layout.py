# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""host/_layout (llmops.sglang.sglang_service_layout): the account's commands decided from what is there, and the
directories and log file as wanted, in a temporary directory with the current user as owner (no root, no account
created on the machine that runs the tests)."""

from __future__ import annotations

import grp
import os
import pwd
import stat
import sys
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host import _layout as lay
from ansible_collections.llmops.sglang.plugins.modules import sglang_service_layout

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from module_process import run_in_process  # noqa: E402  pylint: disable=wrong-import-position

WANT = lay.Account('sglang', 'sglang', '/var/lib/sglang', '/usr/sbin/nologin', ('video', 'render'))
THERE = {'gid': 990, 'groups': ['video'], 'home': '/var/lib/sglang', 'shell': '/usr/sbin/nologin'}


def argvs(actions):
    return [a.argv for a in actions]


@pytest.mark.parametrize('gid, user, existing, commands', [
    # a fresh host: the group, then the user with the device groups the host has (no render group here)
    (None, None, {'video'}, [['groupadd', '--system', 'sglang'],
                             ['useradd', '--system', '--gid', 'sglang', '--shell', '/usr/sbin/nologin', '--home-dir',
                              '/var/lib/sglang', '--no-create-home', '--groups', 'video', 'sglang']]),
    (None, None, set(), [['groupadd', '--system', 'sglang'],
                         ['useradd', '--system', '--gid', 'sglang', '--shell', '/usr/sbin/nologin', '--home-dir',
                          '/var/lib/sglang', '--no-create-home', 'sglang']]),
    (990, THERE, {'video'}, []),                              # as wanted: nothing to run (idempotent)
    (990, THERE, {'video', 'render'}, [['usermod', '-a', '-G', 'render', 'sglang']]),   # appended, never removed
    (990, dict(THERE, groups=['video', 'docker']), {'video'}, []),                      # another group stays
    (990, dict(THERE, gid=100, shell='/bin/bash', home='/home/sglang'), {'video'},
     [['usermod', '-g', 'sglang', '-s', '/usr/sbin/nologin', '-d', '/var/lib/sglang', 'sglang']]),
])
def test_the_account_changes_only_what_differs(gid, user, existing, commands):
    assert argvs(lay.decide_account(WANT, gid, user, existing)) == commands


def me():
    return pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name


def test_a_missing_directory_is_made_with_its_parents_then_left_alone(tmp_path):
    owner, group = me()
    spec = lay.PathSpec(str(tmp_path / 'a' / 'b'), owner, group, 0o750)
    [action] = lay.plan_paths([spec])
    assert action.create and action.what == 'directory %s created' % spec.path
    lay.apply(action, run=None)
    for path in (tmp_path / 'a', tmp_path / 'a' / 'b'):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o750  # the parent made with the same owner and mode
    assert lay.plan_paths([spec]) == []
    os.chmod(spec.path, 0o755)
    [action] = lay.plan_paths([spec])
    assert (action.create, action.what, action.before['mode'], action.after) == (
        False, 'directory %s: mode' % spec.path, '0755', {'path': spec.path, 'state': 'directory', 'mode': '0750'})


def test_a_file_that_is_a_directory_is_refused(tmp_path):
    owner, group = me()
    with pytest.raises(lay.LayoutError, match='is not a file'):
        lay.plan_paths([lay.PathSpec(str(tmp_path), owner, group, 0o640, 'file')])


def test_the_module_makes_directories_and_log_once_and_check_mode_writes_nothing(capsys, tmp_path):
    owner, group = me()
    logs = tmp_path / 'log'
    args = {'paths': [{'path': str(logs), 'owner': owner, 'group': group, 'mode': '0750'},
                      {'path': str(logs / 'sglang.log'), 'state': 'file', 'owner': owner, 'group': group, 'mode': '0640'}]}
    dry = run_in_process(sglang_service_layout.main, capsys, args, True, True)
    assert dry['changed'] and dry['changes'] == ['directory %s created' % logs, 'file %s created' % (logs / 'sglang.log')]
    assert [d['before']['state'] for d in dry['diff']] == ['absent', 'absent']
    assert not logs.exists()
    done = run_in_process(sglang_service_layout.main, capsys, args, False, False)
    assert done['changed'] and stat.S_IMODE(os.stat(logs / 'sglang.log').st_mode) == 0o640
    (logs / 'sglang.log').write_text('a line\n')
    again = run_in_process(sglang_service_layout.main, capsys, args, False, False)
    assert (again['changed'], again['changes']) == (False, [])
    assert (logs / 'sglang.log').read_text() == 'a line\n'  # an existing log is never truncated


def test_the_module_makes_the_compile_caches_after_the_paths_in_the_same_run(capsys, tmp_path):
    """compile_cache: llmops.sglang.sglang_compile_cache's work in the layout's run (one module run and payload fewer
    per deploy): the caches under a root the paths made, check mode writes nothing, a second run changes nothing."""
    owner, group = me()
    root = tmp_path / 'cache'
    args = {'paths': [{'path': str(root), 'owner': owner, 'group': group, 'mode': '0755'}],
            'compile_cache': {'root': str(root), 'version': '0.5.9', 'arch': 'sm90', 'owner': owner, 'group': group,
                              'environment': {'TRITON_CACHE_DIR': '/srv/triton'}}}
    dry = run_in_process(sglang_service_layout.main, capsys, args, True, True)
    current = root / '0.5.9-sm90'
    assert dry['changes'] == ['directory %s created' % root, 'compile caches %s (GPU sm90)' % current]
    assert dry['compile_cache']['created'][0] == str(current) and not root.exists()
    assert dry['diff'][-1] == {'before': '', 'after': '0.5.9-sm90\n', 'before_header': str(root), 'after_header': str(root)}
    done = run_in_process(sglang_service_layout.main, capsys, args, False, False)
    cache = done['compile_cache']
    assert done['changed'] and cache['path'] == str(current) and cache['arch'] == 'sm90'
    assert 'TRITON_CACHE_DIR' not in cache['environment'] and cache['dirs']['triton'] == '/srv/triton'  # the user's own
    assert cache['environment']['SGLANG_DG_CACHE_DIR'] == str(current / 'deep_gemm')
    assert sorted(os.listdir(current)) == ['.llmops-sglang-cache.json', 'cuda', 'deep_gemm', 'flashinfer', 'inductor', 'sglang']
    again = run_in_process(sglang_service_layout.main, capsys, args, False, False)
    assert (again['changed'], again['changes'], again['compile_cache']['created']) == (False, [], [])
    plain = run_in_process(sglang_service_layout.main, capsys, {'paths': args['paths']}, False, False)
    assert 'compile_cache' not in plain  # none asked, none made or reported


def test_the_compile_caches_of_a_user_still_to_be_made(capsys, tmp_path):
    """Check mode before the account exists reports the caches; a real run with an unknown owner fails naming it and
    what was already done."""
    owner, group = me()
    spec = {'root': str(tmp_path / 'cache'), 'version': '0.5.9', 'arch': 'sm90', 'owner': 'no-such-user-4711', 'group': group}
    paths = [{'path': str(tmp_path / 'etc'), 'owner': owner, 'group': group, 'mode': '0755'}]
    dry = run_in_process(sglang_service_layout.main, capsys, {'paths': paths, 'compile_cache': spec}, True, False)
    assert dry['changed'] and dry['compile_cache']['created'][0] == str(tmp_path / 'cache' / '0.5.9-sm90')
    bad = run_in_process(sglang_service_layout.main, capsys, {'paths': paths, 'compile_cache': spec}, False, False)
    assert bad['failed'] and "owner 'no-such-user-4711'" in bad['msg'] and 'create the service user first' in bad['msg']
    assert bad['changes'] == ['directory %s created' % (tmp_path / 'etc')] and not (tmp_path / 'cache').exists()
