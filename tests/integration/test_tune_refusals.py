# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tune playbook refuses, before anything is touched, an extra var that would override every variant and a
variant key it does not know (breaker report of issue 21, finding 8), run by the real ansible-playbook.

The inventory's hosts do not exist (192.0.2.x): a refusal happens in the first tasks, which need no connection; a run
that got past them would try to reach the host and fail differently.

Run:  PYTHONPATH=<dir above ansible_collections> python -m pytest tests/integration/test_tune_refusals.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.sglang.tests.integration.test_playbooks_no_hosts import run

PLAYBOOKS = Path(__file__).resolve().parents[2] / 'playbooks'
LOAD = {'sglang_service_benchmark': {'concurrency': [8], 'repeats': 1}}


def tune(tmp_path, variants, *extra):
    (tmp_path / 'variants.yml').write_text(yaml.safe_dump(dict(LOAD, sglang_tune_variants=variants)))
    return run(tmp_path, 'tune', '-e', '@%s' % (tmp_path / 'variants.yml'), '-e', 'sglang_tune_hosts=gpu', '--limit', 'gpu1',
               *extra)


def refused_before_anything(out):
    assert 'UNREACHABLE' not in out and 'Remember the inventory' not in out, out
    assert 'Nothing was deployed' in out, out


def guarded():
    """The names tune.yml sets to 'per variant' for its guard, and the advice the guard has for each."""
    play = yaml.safe_load((PLAYBOOKS / 'tune.yml').read_text())[0]
    include = next(t for t in play['tasks'] if t['name'] == 'Refuse an extra var that would override every variant')
    advice = yaml.safe_load((PLAYBOOKS / 'tasks' / 'tune_extra_vars.yml').read_text())[0]['vars']['__advice']
    return include['vars'], advice


def test_the_guard_covers_every_variable_the_variant_step_sets():
    sentinels, advice = guarded()
    assert set(sentinels.values()) == {'per variant'} and set(sentinels) == set(advice)
    step = yaml.safe_load((PLAYBOOKS / 'tasks' / 'tune_variant.yml').read_text())
    block = step[0]
    names = set(block['vars']) | set(block['block'][0]['vars']) | {'sglang_tune_variant', 'sglang_tune_final'}
    for task in block['block'][1:] + block['rescue'] + step[1:]:
        names |= set(task.get('ansible.builtin.set_fact', {}))
    play = yaml.safe_load((PLAYBOOKS / 'tune.yml').read_text())[0]
    for task in play['tasks']:
        names |= set(task.get('ansible.builtin.set_fact', {}))
    assert names - set(sentinels) == set(), names - set(sentinels)


@pytest.mark.parametrize('extra, said', [
    ('sglang_service_benchmark_policy=fail', 'sglang_service_benchmark_policy is given as an extra var (-e), which '
     'would override it for every variant: the tune always deploys a variant with the policy rollback'),
    ('sglang_service_change_name=EXTRA', 'sglang_service_change_name is given as an extra var (-e)'),
    ('sglang_service_benchmark_unchanged=false', 'sglang_service_benchmark_unchanged is given as an extra var (-e)'),
    ('sglang_service_args={"model-path": "x"}', 'sglang_service_args is given as an extra var (-e), which would override '
     'it for every variant: put the configuration every variant starts from in the inventory'),
    ('sglang_tune_rows=[]', 'sglang_tune_rows is given as an extra var (-e)'),
])
def test_an_extra_var_the_variant_step_sets_is_refused_by_name(tmp_path, extra, said):
    rc, out = tune(tmp_path, [{'name': 'fusion', 'args': {'enable-flashinfer-allreduce-fusion': True}}], '-e', extra)
    assert rc == 2, out
    assert ' '.join(said.split()) in ' '.join(out.split()), out
    refused_before_anything(out)


def test_two_extra_vars_are_both_named(tmp_path):
    rc, out = tune(tmp_path, [{'name': 'fusion'}], '-e', 'sglang_service_benchmark_policy=fail',
                   '-e', 'sglang_service_change_name=EXTRA')
    assert rc == 2 and 'sglang_service_change_name is given' in out and 'sglang_service_benchmark_policy is given' in out, out


def test_a_misspelled_variant_key_is_refused_with_the_nearest_one(tmp_path):
    rc, out = tune(tmp_path, [{'name': 'typo-variant', 'arg': {'a': 1}, 'enviroment': {'NCCL_ALGO': 'Tree'}}])
    assert rc == 2, out
    flat = ' '.join(out.split())
    assert "variant 'typo-variant' has the key 'arg', which the tune does not know: did you mean 'args'?" in flat, out
    assert "the key 'enviroment', which the tune does not know: did you mean 'environment'?" in flat, out
    refused_before_anything(out)


def test_good_variants_pass_both_checks(tmp_path):
    # past the refusals, the play reaches for the host (which does not exist)
    rc, out = tune(tmp_path, [{'name': 'fusion', 'sm120_patch': 'present', 'args': {'x': 1}, 'environment': {'A': 'b'}}])
    assert 'Nothing was deployed' not in out, out
    assert 'Remember the inventory' in out, out
