# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the steps of llmops.sglang.sglang_deploy pass on to the terminal: the modules' warnings reach ansible-core's task
executor as the modules returned them (a bug printed `[WARNING]: WarningSummary(event=Event(msg=...` on ansible-core
2.19), and a host's detail lines are -v only."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ansible.utils.display import Display

from ansible_collections.llmops.sglang.plugins.plugin_utils._action_host import ActionHost
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_steps import Context, say_decision

_messages = pytest.importorskip('ansible.module_utils._internal._messages')  # ansible-core 2.19+

FUSION = 'SM120 FlashInfer allreduce fusion is enabled in SGLang 0.5.9: benchmark it'


class ModuleHost:
    """A host whose modules return one recorded result (the step's executor, without a connection)."""

    name, check_mode = 'node1', False

    def __init__(self, result):
        self.result = result

    def module(self, name, args, secret=False, read_only=False):
        return dict(self.result)


def context(host):
    return Context(inputs=None, values={}, topo=None, facts=None, peers={}, host=host)


def test_a_modules_warning_reaches_the_task_result_as_the_module_returned_it():
    summary = _messages.WarningSummary(event=_messages.Event(msg=FUSION))
    ctx = context(ModuleHost({'changed': True, 'warnings': [summary]}))
    ctx.run('llmops.sglang.sglang_patch_sm120', {}, 'SM120 patches present')
    ctx.warnings.append('the SGLang lock /run/sglang.lock was not released: gone')  # a step's own warning
    # the object itself: the task executor takes a WarningSummary as it is (its str() is its repr, which was printed)
    assert ctx.warnings == [summary, 'the SGLang lock /run/sglang.lock was not released: gone'] and ctx.warnings[0] is summary
    assert ctx.changed


def test_a_plain_warning_of_an_older_module_result_stays_its_text():
    ctx = context(ModuleHost({'warnings': ['flashinfer-python was not found beside SGLang']}))
    ctx.run('llmops.sglang.sglang_patch_sm120', {})
    assert ctx.warnings == ['flashinfer-python was not found beside SGLang']


def test_only_a_change_brings_its_diff_to_the_screen():
    # seen with --check --diff: every full deploy showed the log file's touch ("state": "file" -> "touch") unchanged
    touch = {'before': {'path': '/var/log/sglang/sglang.log', 'state': 'file'},
             'after': {'path': '/var/log/sglang/sglang.log', 'state': 'touch'}}
    unit = {'before_header': '/etc/systemd/system/sglang.service', 'before': 'a\n', 'after': 'b\n'}
    ctx = context(ModuleHost({'changed': False, 'diff': touch}))
    ctx.run('ansible.legacy.file', {'state': 'touch'}, 'log file')
    ctx.host = ModuleHost({'changed': True, 'diff': [unit]})
    ctx.run('llmops.sglang.sglang_config_file', {}, 'unit file')
    assert ctx.diffs == [unit]


@pytest.mark.parametrize('verbosity, expected', [(0, ['node1: restarting sglang.service: unit file']),
                                                 (1, ['node1: restarting sglang.service: unit file',
                                                      'node1: pre-flight ok: gpus ok'])])
def test_a_detail_line_is_for_verbose_runs_only(capsys, verbosity, expected):
    display = Display()
    saved = display.verbosity
    display.verbosity = verbosity
    try:
        host = ActionHost(SimpleNamespace(_task=SimpleNamespace(check_mode=False)), {}, 'node1')
        host.say('restarting sglang.service: unit file')
        host.say('pre-flight ok: gpus ok', detail=True)
    finally:
        display.verbosity = saved
    out = capsys.readouterr()
    assert [line for line in (out.out + out.err).splitlines() if line] == expected


class SayingHost(ModuleHost):
    """A host that keeps the lines a step says."""

    def __init__(self, check_mode=False):
        super().__init__({})
        self.check_mode, self.lines = check_mode, []

    def say(self, text, detail=False):
        self.lines.append(text)


@pytest.mark.parametrize('check_mode, preview, word', [(False, False, 'full deploy'), (True, False, 'would deploy'),
                                                       (False, True, 'would deploy')])
def test_the_plan_line_says_would_deploy_when_nothing_is_deployed_by_this_step(check_mode, preview, word):
    # found by a newcomer: llmops.sglang.roll asks each worker's plan before the roll, and every worker said "full deploy"
    host = SayingHost(check_mode)
    ctx = Context(inputs=SimpleNamespace(skip_unchanged=True), values={}, topo=None, peers={}, host=host, preview=preview,
                  facts=SimpleNamespace(unchanged=False, deploy_reasons=['sglang_service_environment changed'], stamp=None))
    say_decision(ctx)
    assert host.lines == ['%s: sglang_service_environment changed' % word]
