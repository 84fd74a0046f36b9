# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""sglang_service_result, the role's one public result: every outcome (the run report's RUN column) and status from what
the role's steps observed (plugins/plugin_utils/_deploy_result.py), and the row each one gives in the deploy table."""

from __future__ import annotations

import base64
import datetime
import json

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_result import (
    OUTCOMES, Facts, Server, ServiceResult, service_result)
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_steps import deployed_over, recorded_at
from ansible_collections.llmops.sglang.plugins.plugin_utils._run_rows import DEPLOY_PARTS, build_row

SERVER = Server('sglang', 'http://127.0.0.1:30000', 0, None)
CURRENT = {'current': True, 'reasons': [], 'health': {'status': 200}, 'recorded_at': '2026-12-01T13:02:11Z',
           'sglang_version': '0.5.9', 'unit_changed': False, 'stale_process': False}
STALE = {'current': False, 'reasons': ['inputs changed: sglang_service_args'], 'health': None, 'recorded_at': '2026-12-01T13:02:11Z',
         'sglang_version': '0.5.9', 'unit_changed': False, 'stale_process': False}
READY = {'status': 'ready', 'ready': True, 'stage': 'ready', 'elapsed': 4.1, 'signature': None, 'models': ['glm-5']}
CRASH = {'status': 'crashed', 'ready': False, 'stage': 'cuda_graph', 'elapsed': 3.0, 'signature': 'cuda_oom',
         'msg': 'SGLang on n crashed after 3.0s at stage cuda_graph: cuda_oom'}
RESTART = {'invocation': 'b2', 'previous_invocation': 'a1', 'log_size': 100}
FIRST_START = {'invocation': 'b2', 'previous_invocation': '', 'log_size': 0}
DEPLOY = dict(stamp=STALE, deploy_reasons=STALE['reasons'], restart_reasons=['unit file'], changed=True)

# (facts, check mode) -> (outcome, status, ok, restarted): one case per outcome, and the statuses that go with them
CASES = [
    (dict(stamp=CURRENT, unchanged=True), False, ('unchanged', 'ready', True, False)),
    (dict(DEPLOY, restart=FIRST_START, wait=READY), False, ('started', 'ready', True, True)),
    (dict(DEPLOY, restart=RESTART, wait=READY), False, ('restarted', 'ready', True, True)),
    (dict(DEPLOY, restart=RESTART, wait=CRASH), False, ('restarted', 'crashed', False, True)),
    (dict(DEPLOY, restart=RESTART, wait=READY, rollback={'msg': 'new configuration: crashed (cuda_oom), rolled back',
                                                         'status': 'crashed'}), False, ('rolled back', 'crashed', False, True)),
    (dict(DEPLOY, restart=RESTART, wait=READY, rollback={'msg': 'fusion: 236 tok/s against 1867, rolled back',
                                                         'status': 'regressed'}), False, ('rolled back', 'regressed', False, True)),
    (dict(DEPLOY, startable=False), True, ('would deploy', 'dry run', True, False)),
    (dict(DEPLOY, startable=True), True, ('would restart', 'dry run', True, False)),
    (dict(stamp=CURRENT, unchanged=True), True, ('unchanged', 'ready', True, False)),
    (dict(DEPLOY, failure={'step': 'configure', 'msg': 'pre-flight failed: GPU 0 is held by pid 4242. sglang.service was not touched'}),
     False, ('not started', 'failed', False, False)),
    (dict(DEPLOY, startable=False, failure={'step': 'install', 'msg': 'the installed SGLang 0.5.9 does not define --x'}),
     True, ('not started', 'failed', False, False)),
    (dict(DEPLOY, restart=FIRST_START), False, ('started', 'not run', False, True)),
    (dict(DEPLOY, restart=RESTART, wait=READY, smoke={'ok': False, 'error': 'no complete answer within 10s'}), False,
     ('restarted', 'failed', False, True)),
    (dict(DEPLOY, restart=RESTART, wait=READY, gate={'status': 'regressed', 'failed': True, 'change': 'fusion',
                                                     'headline': '236 tok/s against 1867 (-87 %)'}), False,
     ('restarted', 'regressed', False, True)),
]


@pytest.mark.parametrize('facts, check_mode, expected', CASES)
def test_outcome_and_status(facts, check_mode, expected):
    result = service_result(Facts(**facts), SERVER, check_mode)
    assert (result.outcome, result.status, result.ok, result.restarted) == expected
    assert result.outcome in OUTCOMES


def test_every_outcome_has_a_case():
    outcomes = set(service_result(Facts(**f), SERVER, c).outcome for f, c, _e in CASES)
    assert outcomes == set(OUTCOMES)


@pytest.mark.parametrize('facts, check_mode, expected', CASES)
def test_each_outcome_is_the_row_kind_in_the_deploy_table(facts, check_mode, expected):
    """The run report's row reads the role's result only: its kind, status and changed are the result's."""
    result = service_result(Facts(**facts), SERVER, check_mode)
    row = build_row('n1', {'sglang_service_result': result.to_json()}, DEPLOY_PARTS, reached=True)
    assert (row.kind, row.status, row.ok, row.changed) == (result.outcome, result.status, result.ok, result.changed)


def test_messages_say_what_happened():
    def msg(check_mode=False, **facts):
        return service_result(Facts(**facts), SERVER, check_mode).msg
    assert msg(stamp=CURRENT, unchanged=True) == 'unchanged since 2026-12-01T13:02:11Z (SGLang 0.5.9, GET /health 200)'
    assert msg(True, **dict(DEPLOY, startable=False)) == 'would deploy: inputs changed: sglang_service_args'
    assert msg(True, **dict(DEPLOY, startable=True)) == 'would restart sglang.service: unit file'
    assert msg(**dict(DEPLOY, restart=RESTART, wait=READY)) == 'serving glm-5'
    # a failure says all of its message (what, why, what to try); the table's REASON is its first line
    assert msg(**dict(DEPLOY, failure={'step': 'configure', 'msg': 'refused\nsecond line'})) == 'refused\nsecond line'
    # a dry run that refuses (a misspelled flag on a fresh host) says why, not what it would have done
    assert msg(True, **dict(DEPLOY, startable=False, failure={'step': 'install', 'msg': 'does not define --x'})) == 'does not define --x'


def test_a_run_that_waited_for_another_controller_says_it_deployed_over_its_configuration():
    """Issue 25, finding 4: the second of two controllers replaces what the first reported ready 11 s earlier."""
    now = datetime.datetime(2026, 12, 2, 8, 0, 11, tzinfo=datetime.timezone.utc)
    holder = {'controller': 'ctl-1', 'user': 'awx', 'pid': 771, 'play': 'Deploy SGLang'}
    said = deployed_over(holder, '2026-12-02T07:00:00Z', '2026-12-02T08:00:00Z', now)
    assert said == 'deployed over a configuration from awx@ctl-1 (Deploy SGLang) 11 s earlier'
    # the other run recorded nothing while this one waited (it failed, or changed nothing): nothing to say
    assert deployed_over(holder, '2026-12-02T07:00:00Z', '2026-12-02T07:00:00Z', now) == ''
    assert deployed_over(holder, None, None, now) == ''
    result = service_result(Facts(**dict(DEPLOY, restart=RESTART, wait=READY, deployed_over=said)), SERVER, False)
    assert (result.msg, result.deployed_over) == ('serving glm-5; ' + said, said)
    assert build_row('h', {'sglang_service_result': result.to_json()}, DEPLOY_PARTS, True).reason.endswith(said)


def test_a_host_lost_during_a_step_is_unreachable_where_nobody_could_see():
    failure = {'step': 'restart', 'what': 'connection', 'unreachable': True, 'result': None,
               'msg': 'the host became unreachable during step restart: ssh: connect to host 10.0.0.5 port 22: timed out'}
    result = service_result(Facts(**dict(DEPLOY, failure=failure)), SERVER, False)
    assert (result.status, result.ok) == ('unreachable', False)
    row = build_row('h', {'sglang_service_result': result.to_json()}, DEPLOY_PARTS, True)
    assert (row.status, row.stage, row.reason) == ('unreachable', 'unknown', failure['msg'])


def test_the_result_is_plain_data_with_stable_fields():
    """Fields callers read (the roll playbook, the tune playbook, users): renaming one is a breaking change."""
    data = service_result(Facts(**dict(DEPLOY, restart=RESTART, wait=READY)), SERVER, False).to_json()
    assert set(data) >= {'server', 'outcome', 'status', 'changed', 'restarted', 'check_mode', 'msg', 'reasons',
                         'restart_reasons', 'stage', 'signature', 'elapsed', 'url', 'node_rank', 'deployment', 'smoke',
                         'startup', 'gate', 'benchmark', 'wait', 'rollback', 'failure'}
    assert (data['url'], data['stage'], data['elapsed']) == ('http://127.0.0.1:30000', 'ready', 4.1)
    assert ServiceResult(**data).to_json() == data


def test_facts_round_trip_and_ignore_unknown_keys():
    facts = Facts(**dict(DEPLOY, restart=RESTART))
    assert Facts.from_json(dict(facts.to_json(), something_new=1)) == facts


def test_the_preflight_and_the_sm120_patch_state_are_in_the_result():
    """Their lines are -v only: what they said is in the result."""
    preflight = {'ok': True, 'summary': 'gpus ok (no GPU device, no other holder), ports ok (30000 free)'}
    patch = {'state': 'present', 'sglang_version': '0.5.9',
             'sites': [{'name': 'allreduce_fusion_gate', 'status': 'applied'}, {'name': 'allreduce_fusion_backend_resolver',
                                                                                'status': 'not_present'}]}
    result = service_result(Facts(**dict(DEPLOY, restart=RESTART, wait=READY, preflight=preflight, sm120_patch=patch)), SERVER, False)
    assert (result.to_json()['preflight'], result.to_json()['sm120_patch']) == (preflight, patch)
    # the no-change path runs neither
    unchanged = service_result(Facts(stamp=CURRENT, unchanged=True), SERVER, False).to_json()
    assert (unchanged['preflight'], unchanged['sm120_patch']) == (None, None)
    # a Facts carried between the steps (to_json, from_json) keeps the patch state
    assert Facts.from_json(Facts(sm120_patch=patch).to_json()).sm120_patch == patch


@pytest.mark.parametrize('content, expected', [
    (base64.b64encode(json.dumps({'format': 3, 'recorded_at': '2026-12-02T08:00:00Z'}).encode()).decode(), '2026-12-02T08:00:00Z'),
    (base64.b64encode(b'{"format": 3, "recorded_at": 17}').decode(), None),   # the wrong type: not a time
    (base64.b64encode(b'[1, 2]').decode(), None),                              # not a record
    (base64.b64encode(b'{"form').decode(), None),                              # cut short by a full disk
    ('not base64!', None),
    (None, None),                                                              # no record (slurp failed)
])
def test_the_record_read_alone_after_a_wait_gives_its_time_of_recording_or_none(content, expected):
    """After waiting for another run's lock, the role reads the record alone (slurp), not the whole no-change query."""
    assert recorded_at(content) == expected


@pytest.mark.parametrize('facts', [
    Facts(**DEPLOY, wait=READY, smoke={'ok': True, 'ttft': 0.1}, preflight={'ok': True, 'summary': '8 checks'}, restart=RESTART),
    Facts(**DEPLOY, wait=CRASH, restart=RESTART, rollback={'msg': 'rolled back', 'status': 'crashed', 'after': {'status': 'ready'}}),
    Facts(**DEPLOY, failure={'step': 'install', 'msg': 'pip failed'}, preflight={}, wait={}),  # empty: not public, kept
    Facts(stamp=CURRENT, unchanged=True),
])
def test_the_registered_result_holds_what_the_public_fields_show_once_and_the_next_step_reads_the_same_facts(facts):
    """issue 21: the facts no longer repeat what the public result shows (a third of a 28 KB result after verify)."""
    from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_facts import IN_RESULT, pack, unpack  # pylint: disable=import-outside-toplevel
    public = service_result(facts, SERVER, False).to_json()
    packed = pack(facts.to_json(), public)
    registered = dict(public, facts=packed, plan={}, step='verify')
    assert Facts.from_json(unpack(json.loads(json.dumps(registered)))) == facts
    for key in packed.get(IN_RESULT, []):
        assert key not in packed and public[key] == getattr(facts, key) and public[key]
    if 'wait' in packed.get(IN_RESULT, []):
        assert len(json.dumps(registered)) < len(json.dumps(dict(public, facts=facts.to_json())))
    assert unpack({'outcome': 'unchanged'}) is None
