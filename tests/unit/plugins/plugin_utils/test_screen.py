# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the llmops.sglang.brief callback prints at verbosity 0: debug messages, grouped failures, and which failures a
rescue section handles (on real ansible-core Block and Task objects). The callback inside a real ansible-playbook is
tested in tests/integration/test_brief_callback.py."""

from __future__ import annotations

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play import Play
from ansible.plugins.loader import init_plugin_loader
from ansible.vars.manager import VariableManager

from ansible_collections.llmops.sglang.plugins.plugin_utils._screen import (
    Failures, debug_lines, failure_message, first_line, handled_by_rescue)


@pytest.mark.parametrize('result, lines', [
    ({'msg': 'hello'}, ['node1: hello']),
    # the role's messages name the host first: not twice
    ({'msg': 'node1: restarting sglang.service: unit file'}, ['node1: restarting sglang.service: unit file']),
    # a table keeps its lines, without a host
    ({'msg': 'A  B\n1  2\n'}, ['A  B', '1  2']),
    ({'msg': ['first', 'second']}, ['first', 'second']),
    ({'msg': {'a': 1}}, ['node1: {"a": 1}']),
    ({'rows': [1, 2], 'changed': False, '_ansible_verbose_always': True}, ['node1: rows = [1, 2]']),
])
def test_debug_lines(result, lines):
    assert debug_lines('node1', result) == lines


def test_first_line_is_bounded_and_skips_blank_lines():
    assert first_line('\n\n  crashed at stage start  \nTraceback ...') == 'crashed at stage start'
    long = first_line('x' * 1000, limit=20)
    assert len(long) == 20 and long.endswith('...')
    assert first_line(None) == ''


def test_a_first_line_that_ends_with_a_colon_gets_the_lines_after_it():
    # ansible-core's argument validation: the first line alone said only "Validation of arguments failed:"
    msg = ('Validation of arguments failed:\nvalue of sglang_service_sm120_patch must be one of: , present, absent, '
           'got: yes\nvalue of sglang_service_port must be an int\n')
    assert first_line(msg) == ('Validation of arguments failed: value of sglang_service_sm120_patch must be one of: , '
                               'present, absent, got: yes; value of sglang_service_port must be an int')
    # a first line that says something keeps the rest out
    assert first_line('crashed at stage start: cuda_oom\nTraceback (most recent call last):') == \
        'crashed at stage start: cuda_oom'
    assert first_line('nothing follows:') == 'nothing follows:'


@pytest.mark.parametrize('result, msg', [
    ({'msg': 'not serving; its row in the table above says why'}, 'not serving; its row in the table above says why'),
    ({'stderr': 'permission denied\nmore', 'rc': 1}, 'permission denied'),
    ({'rc': 3}, 'failed (rc=3)'),
    ({}, 'failed'),
])
def test_failure_message(result, msg):
    assert failure_message(result) == msg


def test_failures_of_one_task_share_a_line_per_message():
    failures = Failures()
    for host in ('node10', 'node2', 'node1'):  # as their results arrive
        failures.add('Fail the hosts that are not serving', host, 'not serving; its row in the table above says why')
    failures.add('Fail the hosts that are not serving', 'node4', 'another reason\nwith detail')
    assert failures.lines() == [
        'failed: [node1, node2, node10] Fail the hosts that are not serving: not serving; its row in the table above says why',
        'failed: [node4] Fail the hosts that are not serving: another reason']
    assert failures.lines() == []  # printed once


def test_a_new_task_starts_a_new_group():
    failures = Failures()
    failures.add('first', 'node1', 'x')
    failures.add('second', 'node2', 'x')
    assert failures.lines() == ['failed: [node2] second: x']


def _tasks(play_tasks):
    init_plugin_loader()  # resolves ansible.builtin.fail (a warning only when ansible-test configured it already)
    play = Play.load({'name': 'p', 'hosts': 'all', 'gather_facts': False, 'tasks': play_tasks},
                     variable_manager=VariableManager(loader=DataLoader()), loader=DataLoader())
    found = {}

    def walk(blocks):
        for block in blocks:
            for section in (block.block, block.rescue, block.always):
                for item in section:
                    if hasattr(item, 'block'):
                        walk([item])
                    elif item.name:  # not the meta tasks compile() adds
                        found[item.name] = item
    walk(play.compile())
    return found


def test_only_tasks_in_a_block_with_a_rescue_are_handled():
    tasks = _tasks([
        {'name': 'alone', 'ansible.builtin.fail': {'msg': 'x'}},
        {'name': 'guarded', 'block': [
            {'name': 'inside', 'ansible.builtin.fail': {'msg': 'x'}},
            {'name': 'nested', 'block': [{'name': 'deep inside', 'ansible.builtin.fail': {'msg': 'x'}}]},
        ], 'rescue': [{'name': 'in the rescue', 'ansible.builtin.fail': {'msg': 'x'}}],
            'always': [{'name': 'in always', 'ansible.builtin.fail': {'msg': 'x'}}]},
        {'name': 'no rescue', 'block': [{'name': 'inside a plain block', 'ansible.builtin.fail': {'msg': 'x'}}]},
    ])
    assert {name: handled_by_rescue(task) for name, task in tasks.items()} == {
        'alone': False, 'inside': True, 'deep inside': True, 'in the rescue': False, 'in always': False,
        'inside a plain block': False}
