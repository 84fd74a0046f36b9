# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared command runner and systemctl show reader (_command, _systemd): recorded systemctl output, real
subprocesses, and the real systemctl of this machine where systemd is not PID 1."""

from __future__ import annotations

import shutil
import sys

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host import _systemd as systemd
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import local_run

# systemctl show -p ActiveState,SubState,NRestarts,ExecMainStatus,InvocationID -- sglang.service (systemd 252), after
# the main process exited 1 and before it was ever started.
SHOW_FAILED = ('ActiveState=failed\nSubState=failed\nNRestarts=3\nExecMainStatus=1\n'
               'InvocationID=9a1c6b1c0f3e4b0c8d3f2b6e5a4d3c2b\n')
SHOW_NEVER_STARTED = 'ActiveState=inactive\nSubState=dead\nNRestarts=0\nExecMainStatus=0\nInvocationID=\nMainPID=[not set]\n'


def test_parse_show_types_numbers_and_keeps_text():
    expected = {'ActiveState': 'failed', 'SubState': 'failed', 'NRestarts': 3, 'ExecMainStatus': 1,
                'InvocationID': '9a1c6b1c0f3e4b0c8d3f2b6e5a4d3c2b'}
    assert systemd.parse_show(SHOW_FAILED) == expected
    never = systemd.parse_show(SHOW_NEVER_STARTED)
    assert never['InvocationID'] == '' and never['MainPID'] is None and never['NRestarts'] == 0


def test_parse_show_skips_lines_that_are_not_properties_and_keeps_equals_in_values():
    assert systemd.parse_show('garbage\n=x\nEnvironment=A=1 B=2\n') == {'Environment': 'A=1 B=2'}
    assert systemd.parse_show(None) == {}


def test_show_argv_ends_options_before_the_unit():
    assert systemd.show_argv('-x.service', ('InvocationID', 'ActiveState')) == [
        'systemctl', 'show', '--no-pager', '-p', 'InvocationID,ActiveState', '--', '-x.service']


def test_show_passes_the_argv_to_the_runner_and_parses_its_output():
    seen = []

    def run(argv, data=None):
        seen.append((argv, data))
        return 0, SHOW_FAILED, ''
    assert systemd.show('sglang.service', ('NRestarts',), run, '/usr/bin/systemctl')['NRestarts'] == 3
    assert seen == [(['/usr/bin/systemctl', 'show', '--no-pager', '-p', 'NRestarts', '--', 'sglang.service'], None)]


@pytest.mark.skipif(shutil.which('systemctl') is None, reason='no systemctl on this machine')
def test_show_without_systemd_as_pid1_raises_with_the_reason():
    with open('/proc/1/comm') as handle:
        if handle.read().strip() == 'systemd':
            pytest.skip('systemd is PID 1 here')
    with pytest.raises(systemd.SystemdError) as info:
        systemd.show('sglang.service', ('InvocationID',), local_run, shutil.which('systemctl'))
    assert info.value.rc != 0
    assert info.value.msg.startswith('systemctl show sglang.service failed (rc=%d): ' % info.value.rc)


def test_local_run_uses_the_c_locale_no_shell_and_feeds_stdin():
    rc, out, _err = local_run([sys.executable, '-c', 'import os, sys; print(os.environ["LC_ALL"], os.getcwd(), sys.stdin.read())'],
                              data=b'$HOME;')
    assert (rc, out) == (0, 'C / $HOME;\n')


def test_local_run_of_a_missing_program_is_rc_127():
    rc, out, err = local_run(['/nonexistent/systemctl', 'show'])
    assert (rc, out) == (127, '') and '/nonexistent/systemctl' in err
