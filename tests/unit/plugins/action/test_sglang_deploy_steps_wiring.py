# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How llmops.sglang.sglang_deploy wires its steps. Which step keeps the runtime guard current on the no-change path:
the role ends a single host's unchanged run after its plan step (meta end_role), so the plan step does it there; a
multi-node deployment decides in its ranks step, which does it there. Which steps one task runs: a single host's plan
task asked to deploy runs the whole deploy in the role's order, finish after a failure too."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ansible.errors import AnsibleConnectionFailure

from ansible_collections.llmops.sglang.plugins.action import sglang_deploy
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_facts import Facts


@pytest.mark.parametrize('multinode, step, kept', [
    (False, 'plan', True), (False, 'ranks', False), (True, 'plan', False), (True, 'ranks', True)])
def test_the_step_that_decides_unchanged_keeps_the_guard(monkeypatch, multinode, step, kept):
    calls = []
    monkeypatch.setattr(sglang_deploy.guard, 'guard_unchanged', calls.append)
    monkeypatch.setattr(sglang_deploy.verify, 'run_gate', lambda ctx, changed: None)
    monkeypatch.setattr(sglang_deploy.steps, 'step_plan', lambda ctx: None)
    monkeypatch.setattr(sglang_deploy.steps, 'step_ranks', lambda ctx: None)
    ctx = SimpleNamespace(plan=SimpleNamespace(multinode=multinode), facts=SimpleNamespace(unchanged=True))
    for part in sglang_deploy.STEPS[step][1:]:  # the step's own function was bound before the patch: only the rest
        part(ctx)
    assert calls == ([ctx] if kept else [])


# ---- a single host's deploy in its plan task (deploy=true): the steps of deploy.yml in one task, finish always

def recording_steps(monkeypatch, fails=None):
    """STEPS replaced by parts that record their step's name in order; the step FAILS raises StepFailed."""
    ran = []

    def part(name):
        def run(ctx):
            ran.append(name)
            if name == fails:
                raise sglang_deploy.steps.StepFailed('%s failed' % name, name)
        return run
    monkeypatch.setattr(sglang_deploy, 'STEPS', dict((name, (part(name),)) for name in sglang_deploy.STEPS))
    return ran


def single(multinode=False, unchanged=False):
    return SimpleNamespace(plan=SimpleNamespace(multinode=multinode, unchanged=unchanged), facts=Facts())


def test_a_single_hosts_plan_task_asked_to_deploy_runs_the_whole_deploy_in_the_roles_order(monkeypatch):
    ran = recording_steps(monkeypatch)
    ctx = single()
    assert sglang_deploy.run_task(ctx, 'plan', deploy=True, preview=False) == 'finish'
    assert ran == ['plan', 'install', 'configure', 'restart', 'verify', 'rollback', 'finish']
    assert ctx.facts.failure is None


def test_a_failed_step_stops_the_single_hosts_deploy_but_finish_still_runs_and_the_failure_names_the_step(monkeypatch):
    ran = recording_steps(monkeypatch, fails='configure')
    ctx = single()
    assert sglang_deploy.run_task(ctx, 'plan', deploy=True, preview=False) == 'finish'
    assert ran == ['plan', 'install', 'configure', 'finish']
    assert (ctx.facts.failure['step'], ctx.facts.failure['msg']) == ('configure', 'configure failed')


def test_a_refused_plan_runs_only_finish_after_it(monkeypatch):
    ran = recording_steps(monkeypatch, fails='plan')
    ctx = single()
    assert sglang_deploy.run_task(ctx, 'plan', deploy=True, preview=False) == 'finish'
    assert ran == ['plan', 'finish'] and ctx.facts.failure['step'] == 'plan'


@pytest.mark.parametrize('multinode, unchanged, deploy, preview', [
    (True, False, True, False),    # the ranks of a multi-node deployment: each step a task (the barrier between ranks)
    (False, True, True, False),    # unchanged: the role ends after the plan task
    (False, False, True, True),    # llmops.sglang.roll asks before it changes
    (False, False, False, False),  # tasks_from: plan, not asked to deploy
])
def test_the_plan_task_is_the_plan_alone_otherwise(monkeypatch, multinode, unchanged, deploy, preview):
    ran = recording_steps(monkeypatch)
    assert sglang_deploy.run_task(single(multinode, unchanged), 'plan', deploy, preview) == 'plan'
    assert ran == ['plan']


@pytest.mark.parametrize('step', ['ranks', 'install', 'finish'])
def test_deploy_adds_nothing_to_another_step(monkeypatch, step):
    ran = recording_steps(monkeypatch)
    assert sglang_deploy.run_task(single(), step, deploy=True, preview=False) == step
    assert ran == [step]


def test_a_lost_connection_is_a_failure_of_its_step_and_finish_is_still_tried(monkeypatch):
    ran = recording_steps(monkeypatch)
    lost = sglang_deploy.STEPS['verify']

    def verify(ctx):
        lost[0](ctx)
        raise AnsibleConnectionFailure('ssh: connection reset')
    monkeypatch.setitem(sglang_deploy.STEPS, 'verify', (verify,))
    ctx = single()
    assert sglang_deploy.run_task(ctx, 'plan', deploy=True, preview=False) == 'finish'
    assert ran == ['plan', 'install', 'configure', 'restart', 'verify', 'finish']
    assert ctx.facts.failure['unreachable'] is True and ctx.facts.failure['step'] == 'verify'


# ---- every step the plugin offers is one a task of the collection asks for (no step left that nothing runs)

def test_the_steps_offered_are_the_steps_the_role_and_playbooks_run():
    import re
    from pathlib import Path
    root = Path(sglang_deploy.__file__).resolve().parents[2]
    asked = set()
    for path in list((root / 'roles' / 'sglang_service' / 'tasks').glob('*.yml')) + [root / 'playbooks' / 'check.yml']:
        text = path.read_text()
        for block in re.split(r'\n(?=\s*- )', text):
            if 'llmops.sglang.sglang_deploy' in block:
                asked.update(re.findall(r'^\s+step: (\w+)$', block, re.M))
    assert asked == set(sglang_deploy.STEPS)
    assert set(sglang_deploy.ARGUMENT_SPEC['step']['choices']) == asked
