# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The nvidia_driver role's steps (plugins/action/nvidia_driver_deploy.py) in --check and after a failed step, over a
scripted host: what each step asks of the host and what it leaves in the role's result.

Found by the Red Hat --check run of tests/integration/test_nvidia_fix_dnf.py (2026-12-03): an earlier step's failure
left ``reboot`` null, so the role's reboot task's condition raised instead of the role failing with the step's message;
a --check run on a host without the driver failed verification (nothing installed yet) instead of saying what it would
install; the module stream query wrote dnf's cache and logs on the host."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ansible_collections.llmops.sglang.plugins.action.nvidia_driver_deploy import ActionModule, Failed
from ansible_collections.llmops.sglang.plugins.plugin_utils._nvidia_plan import NvidiaInputs


class ScriptedHost:
    """ActionHost's surface for the steps: modules answered from a script, lines kept, dnf commands as check mode
    sends them."""

    def __init__(self, check_mode: bool, answers: Dict[str, Dict[str, Any]]):
        self.check_mode = check_mode
        self.answers = answers
        self.ran: List[Any] = []
        self.lines: List[str] = []
        self.name = 'gpu1'

    def module(self, name, args, secret=False, read_only=False):
        self.ran.append((name, dict(args), self.check_mode and not read_only))
        return dict(self.answers.get(name, {}))

    @staticmethod
    def scratch(name):
        return '/tmp/t/' + name

    def say(self, line):
        self.lines.append(line)


def step(name, host, state, **values):
    action = ActionModule.__new__(ActionModule)
    inputs = NvidiaInputs.from_vars(dict(('nvidia_driver_' + k, v) for k, v in values.items()))
    return getattr(action, '_step_' + name)(host, inputs, state, {'ansible_connection': 'ssh'})


def test_verify_in_check_mode_says_what_the_install_would_do_and_does_not_fail():
    host = ScriptedHost(True, {})
    state = {'plan': {'expected_version': '535.261.03'}, 'reboot': {'reboot': False},
             'installed': {'fix_packages': ['nvidia-driver-cuda-535.261.03', 'nvidia-driver-libs-535.261.03'], 'changed': True}}
    assert step('verify', host, state) is False
    assert state['status'] == 'would install'
    assert state['msg'].startswith('--check: would install nvidia-driver-cuda-535.261.03, nvidia-driver-libs-535.261.03')
    assert host.ran == []  # nothing installed, so nothing to compare yet
    assert host.lines == [state['msg']]


def test_verify_in_check_mode_with_nothing_to_install_compares_as_a_real_run_does():
    found = {'match': False, 'kernel_module': {'version': '535.261.03'}, 'reason': 'user space 535.309.01'}
    host = ScriptedHost(True, {'llmops.sglang.nvidia_driver_match': found})
    state = {'plan': {'expected_version': '535.261.03'}, 'reboot': {'reboot': False}, 'installed': {'fix_packages': []}}
    # a mismatch that no install would fix fails --check too
    with pytest.raises(Failed, match='could not be proved to match'):
        step('verify', host, state)
    # the comparison ran in check mode (its dnf queries keep off the host's cache and logs)
    assert host.ran == [('llmops.sglang.nvidia_driver_match', {'expected_version': '535.261.03'}, True)]


def test_streams_query_in_check_mode_keeps_dnfs_cache_and_logs_off_the_host():
    listing = 'Name           Stream      Profiles\nnvidia-driver  535-dkms    default\nnvidia-driver  latest-dkms [d] default\n'
    host = ScriptedHost(True, {'ansible.legacy.command': {'rc': 0, 'stdout': listing}})
    state = {'plan': {'streams_wanted': ['535-dkms']}}
    step('streams', host, state)
    query = host.ran[0]
    assert query[0] == 'ansible.legacy.command' and query[2] is False  # a read: it runs in check mode too
    assert query[1]['argv'] == ['dnf', '--setopt=cachedir=/tmp/t/dnf/cache', '--setopt=system_cachedir=/tmp/t/dnf/cache',
                                '--setopt=logdir=/tmp/t/dnf', '--disableplugin=generate_completion_cache',
                                '-q', 'module', 'list', 'nvidia-driver']
    assert state['stream'] == '535-dkms'


def test_a_failed_plan_leaves_a_reboot_decision_the_role_can_read():
    """The plan step starts the result with 'nothing to reboot': when a later step is skipped after a failure, the
    role's reboot task reads reboot.reboot (false) and the role ends with the failing step's message."""
    host = ScriptedHost(False, {'ansible.legacy.setup': {'ansible_facts': {}},
                                'llmops.sglang.nvidia_driver_info': {'failed': True, 'msg': 'cannot read the host'}})
    state: Dict[str, Any] = {}
    with pytest.raises(Failed, match='cannot read the host'):
        step('plan', host, state, manage=True)
    assert state['reboot']['reboot'] is False and state['reboot']['kernel_changed'] is False


def test_check_mode_with_a_stream_to_enable_says_so_and_leaves_the_dry_run_to_the_real_run():
    """dnf filters the branch's versions out until its module stream is enabled (modular filtering), so --check cannot
    dry-run the install before the stream would be enabled: the streams step says it would enable it, the install step
    says what a real run installs, verification says 'would install', and nothing ran on the host after the listing."""
    listing = 'Name           Stream      Profiles\nnvidia-driver  535-dkms    default\nnvidia-driver  latest-dkms [d][e] default\n'
    host = ScriptedHost(True, {'ansible.legacy.command': {'rc': 0, 'stdout': listing}})
    state = {'plan': {'streams_wanted': ['535-dkms'], 'names': ['nvidia-driver-cuda', 'nvidia-driver-libs'], 'version': '535.261.03',
                      'expected_version': '535.261.03'}, 'reboot': {'reboot': False}}
    assert step('streams', host, state) is True
    assert step('install', host, state) is True
    assert step('verify', host, state) is False
    assert [name for name, _args, _check in host.ran] == ['ansible.legacy.command']  # the listing alone
    assert state['stream_pending'] == '535-dkms' and state['status'] == 'would install'
    assert host.lines == ['--check: would enable the module stream nvidia-driver:535-dkms',
                          "--check: the install's dry run needs the module stream nvidia-driver:535-dkms enabled; a run without "
                          '--check enables it, then installs nvidia-driver-cuda, nvidia-driver-libs at 535.261.03',
                          '--check: would install nvidia-driver-cuda, nvidia-driver-libs; a run without --check installs them '
                          'and proves the match']


def test_without_check_mode_the_stream_is_listed_reset_and_enabled_with_dnfs_own_cache():
    listing = 'nvidia-driver  535-dkms    default\nnvidia-driver  latest-dkms [d][e] default\n'
    host = ScriptedHost(False, {'ansible.legacy.command': {'rc': 0, 'stdout': listing}})
    state = {'plan': {'streams_wanted': ['535-dkms']}}
    assert step('streams', host, state) is True
    assert [args['argv'] for _name, args, _check in host.ran] == [
        ['dnf', '-q', 'module', 'list', 'nvidia-driver'], ['dnf', '-q', '-y', 'module', 'reset', 'nvidia-driver'],
        ['dnf', '-q', '-y', 'module', 'enable', 'nvidia-driver:535-dkms']]
    assert state['stream'] == '535-dkms' and 'stream_pending' not in state
