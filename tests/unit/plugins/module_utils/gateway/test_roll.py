# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rolling change's plan and its refusals, on inventories as Ansible hands them to the controller."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import GatewayWorker
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._roll import (
    Preview, RollInputError, RollSettings, WorkerOutcome, batch_verdict, change_drains, cleared_hosts, event_text, fleet_from_inventory,
    gateway_mode, judge,
    check_settings, may_go_on, plan, preview, report_rows, unchanged_outcome, worker_outcome)
from ansible_collections.llmops.sglang.plugins.plugin_utils._roll_table import render_roll

# What the sglang_service role's plan step registered on real test hosts (issue 21's recorded deploys)
DEPLOY_PLANS = Path(__file__).resolve().parents[4] / 'fixtures' / 'deploy_plan'

HOSTVARS = {
    'node1': {'ansible_host': '10.213.0.11'},
    'node2': {'ansible_host': '10.213.0.12', 'sglang_service_args': {'--port': 31000}},
    'node3': {'ansible_host': '10.213.0.13', 'sglang_service_port': 30001},
    'node4': {'ansible_host': '10.213.0.14'},
}


def gw(*urls, **states):
    return [GatewayWorker(url=u, status=states.get(u, 'ready'), healthy=states.get(u, 'ready') == 'ready') for u in urls]


def fleet3():
    return fleet_from_inventory({'regular': ['node1', 'node2', 'node3']}, {}, HOSTVARS)


URLS = ('http://10.213.0.11:30000', 'http://10.213.0.12:31000', 'http://10.213.0.13:30001')


def names(p):
    return [[w.name for w in batch] for batch in p.batches]


def test_worker_urls_come_from_the_inventory():
    assert [w.url for w in fleet3()] == list(URLS)
    hv = {'n': {'sglang_gateway_worker_url': 'https://lb.example:8443/'}, 'm': {'ansible_host': 'fd00::5'}}
    assert [w.url for w in fleet_from_inventory({'regular': ['n', 'm']}, {}, hv)] == ['https://lb.example:8443', 'http://[fd00::5]:30000']


def test_a_multi_node_deployment_is_one_worker_at_its_rank_0():
    groups = {'glm5': ['node3', 'node4']}
    hv = dict(HOSTVARS, node3=dict(HOSTVARS['node3'], sglang_service_deployment_group='glm5'),
              node4=dict(HOSTVARS['node4'], sglang_service_deployment_group='glm5', sglang_service_node_rank=0))
    fleet = fleet_from_inventory({'regular': ['node1', 'node3', 'node4']}, groups, hv)
    assert [(w.name, w.url, w.hosts) for w in fleet] == [
        ('node1', 'http://10.213.0.11:30000', ('node1',)), ('node4', 'http://10.213.0.14:30000', ('node3', 'node4'))]


def test_two_hosts_with_one_url_are_refused():
    with pytest.raises(RollInputError, match='both give the worker URL'):
        fleet_from_inventory({'regular': ['a', 'b']}, {}, {'a': {'ansible_host': 'x'}, 'b': {'ansible_host': 'x'}})


def test_canary_first_then_batches():
    p = plan(fleet3(), gw(*URLS), RollSettings(batch=1))
    assert names(p) == [['node1'], ['node2'], ['node3']]
    assert p.to_json()['batches'][0]['canary'] is True
    p = plan(fleet3() + fleet_from_inventory({'regular': ['node4']}, {}, HOSTVARS),
             gw(*URLS, 'http://10.213.0.14:30000'), RollSettings(batch='50%', min_in_service=1))
    assert names(p) == [['node1'], ['node2', 'node3'], ['node4']]
    assert names(plan(fleet3(), gw(*URLS), RollSettings(batch=1, canary=False))) == [['node1'], ['node2'], ['node3']]


def test_a_batch_that_leaves_no_worker_or_fewer_than_min_in_service_is_refused():
    with pytest.raises(RollInputError, match='would leave 0 workers in rotation, no worker to serve') as refused:
        plan(fleet3(), gw(*URLS), RollSettings(batch='100%', canary=False))
    # what to try comes before the URLs: the screen cuts a failure line at 240 characters (a newcomer never saw it)
    assert 'use a smaller sglang_roll_batch' in str(refused.value)[:120]
    with pytest.raises(RollInputError, match='fewer than sglang_roll_min_in_service=3'):
        plan(fleet3(), gw(*URLS), RollSettings(batch=1, min_in_service=3))
    # one worker already out of rotation counts: removing another of three leaves one
    with pytest.raises(RollInputError, match=r'would leave 1 worker in rotation, fewer than sglang_roll_min_in_service=2'):
        plan(fleet3(), gw(*URLS, **{URLS[2]: 'not_ready'}), RollSettings(batch=1, min_in_service=2))
    single = fleet_from_inventory({'regular': ['node1']}, {}, HOSTVARS)
    with pytest.raises(RollInputError, match='no worker to serve'):
        plan(single, gw(URLS[0]), RollSettings())


def test_unmanaged_gateway_workers_count_in_service_and_are_named():
    p = plan(fleet3(), gw(*URLS, 'http://10.9.9.9:30000'), RollSettings(batch='100%', canary=False, min_in_service=1))
    assert p.unmanaged == ['http://10.9.9.9:30000'] and 'no worker group names' in p.warnings[0]
    assert names(p) == [['node1', 'node2', 'node3']]


def test_only_names_managed_workers_or_is_refused():
    p = plan(fleet3(), gw(*URLS), RollSettings(only=[URLS[2], 'node2']))
    assert names(p) == [['node2'], ['node3']]
    with pytest.raises(RollInputError, match='http://10.213.0.99:30000 is not a managed worker'):
        plan(fleet3(), gw(*URLS), RollSettings(only=['http://10.213.0.99:30000']))


@pytest.mark.parametrize('bad', [0, '0', '101%', 'one', '-1', '2.5'])
def test_bad_batch_sizes_are_refused(bad):
    with pytest.raises(RollInputError, match='is not a batch size'):
        plan(fleet3(), gw(*URLS), RollSettings(batch=bad))


def pd_fleet(version='0.5.9'):
    hv = dict((h, dict(HOSTVARS[h], sglang_service_version=version)) for h in HOSTVARS)
    hv['node1']['sglang_gateway_bootstrap_port'] = 8998
    hv['node2']['sglang_service_args'] = {'port': 31000, 'disaggregation-bootstrap-port': 8999}
    return fleet_from_inventory({'prefill': ['node1', 'node2'], 'decode': ['node3', 'node4']}, {}, hv)


def test_the_gateways_mode_is_pd_with_any_prefill_or_decode_worker():
    # smg reads --pd-disaggregation at its start only: the role restarts a gateway whose mode changes
    assert (gateway_mode(fleet3()), gateway_mode(pd_fleet()), gateway_mode([])) == ('regular', 'pd', 'regular')
    assert gateway_mode(fleet3() + pd_fleet()[:1]) == 'pd'


def pd_gateway(*versions):
    urls = ('http://10.213.0.11:30000', 'http://10.213.0.12:31000', 'http://10.213.0.13:30001', 'http://10.213.0.14:30000')
    kinds = ('prefill', 'prefill', 'decode', 'decode')
    return [GatewayWorker(url=u, worker_type=k, status='ready', healthy=True, version=v) for u, k, v in zip(urls, kinds, versions)]


def test_prefill_and_decode_roll_as_pairs_on_one_release():
    fleet = pd_fleet()
    assert [(w.worker_type, w.bootstrap_port) for w in fleet] == [('prefill', 8998), ('prefill', 8999), ('decode', None), ('decode', None)]
    p = plan(fleet, pd_gateway('0.5.9', '0.5.9', '0.5.9', '0.5.9'), RollSettings(batch=1))
    assert names(p) == [['node1', 'node3'], ['node2', 'node4']]


def test_a_release_change_of_pd_workers_in_batches_is_refused():
    with pytest.raises(RollInputError, match=r'changes the SGLang release of prefill/decode workers \(0.5.9 -> 0.5.10'):
        plan(pd_fleet('0.5.10'), pd_gateway('0.5.9', '0.5.9', '0.5.9', '0.5.9'), RollSettings(batch=1))
    with pytest.raises(RollInputError, match='run different SGLang releases now'):
        plan(pd_fleet(), pd_gateway('0.5.9', '0.5.10', '0.5.9', '0.5.9'), RollSettings(batch=1))


def test_a_batch_stops_on_a_failed_drain_a_rollback_or_a_worker_that_did_not_return():
    ok = WorkerOutcome('node1', drain='idle', change='changed', returned=True)
    assert batch_verdict([ok])[0] == 'continue'
    assert batch_verdict([ok, WorkerOutcome('node2', drain='fail', reason='3 running')]) == ('stop', 'node2: drain failed: 3 running')
    assert batch_verdict([WorkerOutcome('n', drain='idle', change='rolled back', returned=True)])[0] == 'stop'
    assert batch_verdict([WorkerOutcome('n', drain='idle', change='changed', returned=False)])[0] == 'stop'
    assert batch_verdict([WorkerOutcome('n', drain='proceed', change='unchanged', returned=True)])[0] == 'continue'


WORKER = {'name': 'node1', 'url': 'http://10.213.0.11:30000', 'hosts': ['node1']}
IDLE = {'outcome': 'idle', 'seconds': 1.2, 'drained': 2, 'still_running': 0, 'reason': 'nothing in flight'}


def result(outcome, status, **more):
    """The sglang_service role's public result (sglang_service_result) as the roll reads it."""
    return dict({'outcome': outcome, 'status': status, 'msg': '', 'reasons': [], 'elapsed': None}, **more)


def test_worker_outcome_reads_the_drain_and_the_roles_public_result():
    facts = {'node1': {'result': result('restarted', 'ready', reasons=['inputs changed: sglang_service_environment'],
                                        elapsed=16.5)}}
    out = worker_outcome(WORKER, 1, IDLE, facts, 80.0)
    assert (out.drain, out.drained, out.change, out.serves, out.start, out.start_seconds, out.change_seconds) == (
        'idle', 2, 'changed', True, 'ready', 16.5, 80.0)
    assert out.change_detail == 'inputs changed: sglang_service_environment'
    unchanged = worker_outcome(WORKER, 1, IDLE, {'node1': {'result': result('unchanged', 'ready')}})
    assert (unchanged.change, unchanged.serves, unchanged.start) == ('unchanged', True, '')


def test_worker_outcome_of_a_rollback_a_failure_and_a_failed_drain():
    rolled = worker_outcome(WORKER, 1, IDLE, {'node1': {
        'result': result('rolled back', 'crashed', elapsed=4.2, rollback={
            'msg': 'new configuration: crashed (cuda_oom), rolled back', 'status': 'crashed', 'after': {'status': 'ready'}}),
        'failure': {'task': 'Report the failed start and the rollback', 'msg': 'The new configuration failed: crashed'}}})
    assert (rolled.change, rolled.serves, rolled.start) == ('rolled back', True, 'crashed')
    assert rolled.reason == 'the change failed (crashed) and was rolled back; the previous configuration is ready'
    lost = worker_outcome(WORKER, 1, IDLE, {'node1': {'result': result('rolled back', 'crashed', rollback={
        'status': 'crashed', 'after': {'status': 'crashed'}})}})
    assert (lost.change, lost.serves) == ('rolled back', False)
    failed = worker_outcome(WORKER, 1, IDLE, {'node1': {'result': result('not started', 'failed', msg='pip failed'),
                                                        'failure': {'task': 'Install SGLang', 'msg': 'pip: no such version'}}})
    assert (failed.change, failed.serves, failed.reason) == ('failed', False, 'Install SGLang: pip failed')
    silent = worker_outcome(WORKER, 1, IDLE, {})
    assert (silent.change, silent.serves, silent.reason) == ('failed', False, 'the sglang_service role published no result')
    drain_failed = worker_outcome(WORKER, 1, dict(IDLE, outcome='fail', still_running=3, reason='still 3'), {})
    assert (drain_failed.change, drain_failed.serves, drain_failed.status) == ('not run', True, 'untouched')
    never_out = worker_outcome(WORKER, 1, {}, {})
    assert (never_out.drain, never_out.serves) == (None, False)


# The removal that left the drain to the change (sglang_gateway_rotation drain=false): 5 in flight when it left
LEFT = {'url': WORKER['url'], 'outcome': 'left', 'seconds': 0.0, 'in_flight_at_start': 5, 'drained': None, 'still_running': 5,
        'policy': 'fail', 'at_timeout': None, 'reason': 'left to its change: 5 in flight'}


def test_a_drain_left_to_the_change_is_the_changes_and_its_wait_is_not_the_changes_time():
    # the role drained 2.5 s after the removal: the 5 requests of the removal had ended but 1, waited for 0.4 s
    role_drain = {'outcome': 'idle', 'seconds': 0.4, 'in_flight_at_start': 1, 'drained': 1, 'still_running': 0,
                  'policy': 'fail', 'at_timeout': None, 'reason': 'nothing in flight in 2 readings in a row'}
    facts = {'node1': {'result': result('restarted', 'ready', elapsed=16.5, drain=role_drain)}}
    out = worker_outcome(WORKER, 1, LEFT, facts, 30.0)
    assert (out.drain, out.drained, out.still_running, out.drain_seconds, out.change_seconds, out.serves) == (
        'idle', 5, 0, 0.4, 29.6, True)
    assert cleared_hosts({'workers': [WORKER]}, {'drains': [LEFT]}) == ['node1']
    assert may_go_on([out])
    assert '5 req 0.4s' in render_roll([out])


def test_each_worker_left_to_its_change_gets_its_drain_on_its_serving_host_only():
    pair = {'name': 'mn0', 'url': 'http://10.213.0.21:30000', 'hosts': ['mn0', 'mn1']}
    batch = {'workers': [WORKER, pair]}
    rotation = {'drain_timeout': 5.0, 'drain_policy': 'wait'}
    drains = change_drains(batch, {'drains': [LEFT, dict(LEFT, url=pair['url'])]}, rotation)
    assert sorted(drains) == ['mn0', 'node1']  # rank 1 (mn1) serves no HTTP: no drain there
    assert drains['mn0'] == {'url': pair['url'], 'timeout': 5.0, 'policy': 'wait', 'interval': 0.1, 'idle_spacing': 0.25}
    # drained by the removal itself, or never out: nothing for the change
    assert change_drains(batch, {'drains': [dict(LEFT, outcome='idle')]}, rotation) == {}
    assert change_drains(batch, {}, rotation) == {}


def test_a_drain_the_change_could_not_finish_leaves_the_server_untouched_and_stops_the_roll():
    role_drain = {'outcome': 'fail', 'seconds': 120.1, 'still_running': 2, 'policy': 'fail', 'at_timeout': 2,
                  'reason': 'still 2 request(s) (2 running, 0 waiting) after 120s (drain_timeout 120s, policy fail)'}
    facts = {'node1': {'result': result('not started', 'failed', drain=role_drain),
                       'failure': {'task': 'Take the host lock, install SGLang', 'msg': 'the server still has requests in flight'}}}
    out = worker_outcome(WORKER, 1, LEFT, facts, 125.0)
    assert (out.drain, out.drained, out.serves, out.status, out.change) == ('fail', 3, True, 'untouched', 'not run')
    assert out.reason == role_drain['reason']
    assert batch_verdict([out])[0] == 'stop' and not may_go_on([out])


def test_a_change_that_stopped_before_its_drain_keeps_the_removals_reading():
    facts = {'node1': {'result': result('not started', 'failed', msg='pip: no such version'),
                       'failure': {'task': 'Take the host lock, install SGLang', 'msg': 'pip: no such version'}}}
    out = worker_outcome(WORKER, 1, LEFT, facts, 3.0)
    assert (out.drain, out.still_running, out.change, out.serves, out.change_seconds) == ('left', 5, 'failed', False, 3.0)
    assert '5 req, not drained' in render_roll([out])
    # a change that found nothing to do needed no drain: the roll goes on
    same = worker_outcome(WORKER, 1, LEFT, {'node1': {'result': result('unchanged', 'ready')}}, 1.0)
    assert (same.drain, same.change, same.serves) == ('left', 'unchanged', True) and may_go_on([same])


def test_a_worker_whose_change_failed_before_the_restart_goes_back_and_stops_the_roll():
    """Found by a newcomer's run: a misspelled server flag failed the canary's change in its install step (the server
    never stopped), and the canary was left out of rotation - a third of the fleet's capacity gone."""
    typo = result('not started', 'failed', msg='the server arguments: SGLang 0.5.9 does not define this flag: --enable-metrix',
                  failure={'step': 'install', 'what': 'server arguments', 'msg': '...'})
    facts = {'node1': {'result': typo, 'failure': {'task': 'Take the host lock, install SGLang', 'msg': 'failed'}}}
    out = worker_outcome(WORKER, 1, IDLE, facts, 4.0)
    assert (out.change, out.serves) == ('failed', True)
    assert out.reason.endswith('node1 was not restarted and still runs its previous configuration')
    proven = {'verdict': {'done': True}, 'waited': 0.2, 'proofs': [{'worker': WORKER['url'], 'ok': True, 'seconds': 0.3}]}
    action, why, take_out = judge([out], proven)
    assert (action, take_out, out.returned, out.status) == ('stop', [], True, 'stopped')
    assert why.startswith('node1: change failed: ') and not may_go_on([out])
    # a failed restart, a prefill worker or a result without its failed step: not put back on a guess
    for worker, res in ((WORKER, dict(typo, failure={'step': 'restart'})), (dict(WORKER, worker_type='prefill'), typo),
                        (WORKER, dict(typo, failure=None))):
        assert not worker_outcome(worker, 1, IDLE, {'node1': {'result': res}}).serves


@pytest.mark.parametrize('values, refusal', [
    ({'drain_policy': 'bogus'}, "sglang_roll_drain_policy='bogus': give wait, proceed or fail"),
    ({'drain_timeout': 'abc'}, "sglang_roll_drain_timeout='abc': give a number of seconds, 0 or more"),
    ({'drain_timeout': -1}, 'sglang_roll_drain_timeout=-1: give a number of seconds, 0 or more'),
    ({'canary': 'maybe'}, "sglang_roll_canary='maybe': give true or false"),
    ({'min_in_service': '1.5'}, "sglang_roll_min_in_service='1.5': give a whole number, 0 or more"),
    ({'return_timeout': 'nan'}, "sglang_roll_return_timeout='nan': give a number of seconds, 0 or more"),
])
def test_the_rolls_own_variables_are_refused_by_name(values, refusal):
    with pytest.raises(RollInputError) as refused:
        check_settings(values)
    assert str(refused.value) == refusal


def test_the_rolls_own_variables_as_the_playbook_templates_them():
    assert check_settings({'canary': 'False', 'min_in_service': '2', 'drain_timeout': '2', 'drain_policy': 'Wait',
                           'return_timeout': 120}) == {
        'canary': False, 'min_in_service': 2, 'drain_timeout': 2.0, 'drain_policy': 'wait', 'return_timeout': 120.0}


def test_judge_marks_workers_that_did_not_return_and_stops():
    good = worker_outcome(WORKER, 1, IDLE, {'node1': {'result': result('restarted', 'ready')}})
    proven = {'verdict': {'done': True}, 'waited': 1.0,
              'proofs': [{'worker': WORKER['url'], 'ok': True, 'seconds': 0.4, 'reason': 'routed'}]}
    assert judge([good], proven) == ('continue', 'every worker of the batch is back in rotation', [])
    assert (good.returned, good.status, good.return_seconds) == (True, 'rolled', 1.4)
    again = worker_outcome(WORKER, 1, IDLE, {'node1': {'result': result('restarted', 'ready')}})
    stuck = {'verdict': {'done': False, 'waiting': {WORKER['url']: 'not ready'}}, 'waited': 20.0, 'proofs': []}
    action, why, take_out = judge([again], stuck)
    assert (action, take_out, again.returned, again.status) == ('stop', [WORKER['url']], False, 'stopped')
    assert 'the gateway reports it not ready' in why
    unproven = worker_outcome(WORKER, 1, IDLE, {'node1': {'result': result('restarted', 'ready')}})
    action, _why, take_out = judge([unproven], {'verdict': {'done': True}, 'proofs': [
        {'worker': WORKER['url'], 'ok': False, 'reason': 'none reached it'}]})
    assert (action, take_out, unproven.reason) == ('stop', [WORKER['url']], 'did not return to rotation: none reached it; left out of rotation')


def test_the_batch_line_of_a_rolled_worker_leaves_out_what_its_change_already_said():
    changed = dict(result('restarted', 'ready'), reasons=['inputs changed: sglang_service_environment'])
    out = worker_outcome(WORKER, 1, IDLE, {'node1': {'result': changed}})
    proven = {'verdict': {'done': True}, 'waited': 0.1,
              'proofs': [{'worker': WORKER['url'], 'ok': True, 'seconds': 0.2, 'reason': '1 request(s) through the gateway answered'}]}
    judge([out], proven)
    # the row keeps why it changed (the table's REASON); the line says only what is new
    assert out.reason == 'inputs changed: sglang_service_environment; back in rotation, 1 request(s) through the gateway answered'
    assert event_text(out) == 'back in rotation, 1 request(s) through the gateway answered'
    # anything but a rolled worker keeps its whole reason on its line
    stuck = worker_outcome(WORKER, 1, IDLE, {'node1': {'result': changed}})
    judge([stuck], {'verdict': {'done': False, 'waiting': {WORKER['url']: 'not ready'}}, 'waited': 20.0, 'proofs': []})
    assert event_text(stuck) == stuck.reason and stuck.reason.startswith('did not return to rotation')


def recorded_results(case):
    """host -> the role's result after its plan steps, as the roll's first play keeps it (sglang_roll_preview)."""
    hosts = json.loads((DEPLOY_PLANS / ('%s.json' % case)).read_text())['hosts']
    return dict((h, {'outcome': r['outcome'], 'plan': r['plan'], 'failure': r['facts'].get('failure')}) for h, r in hosts.items())


def test_preview_reads_the_deploy_plan_of_recorded_runs():
    one = fleet_from_inventory({'regular': ['plan1']}, {}, {'plan1': {'ansible_host': '10.213.0.11'}})[0]
    assert preview(one, recorded_results('unchanged')) == Preview(unchanged=True)
    groups = {'mn': ['plan1', 'plan2']}
    hv = {'plan1': {'sglang_service_deployment_group': 'mn'}, 'plan2': {'sglang_service_deployment_group': 'mn'}}
    pair = fleet_from_inventory({'regular': ['plan1', 'plan2']}, groups, hv)[0]
    assert preview(pair, recorded_results('mn-unchanged')).unchanged is True
    # one rank restarted outside a deploy: the whole deployment changes (all ranks restart together)
    restarted = preview(pair, recorded_results('mn-rank1-restarted'))
    assert restarted.unchanged is False
    assert restarted.reasons[0] == 'another rank of mn differs'
    assert preview(pair, recorded_results('mn-first')).unchanged is False
    # a rank that registered nothing: no answer, the roll changes the worker
    assert preview(pair, {'plan1': recorded_results('mn-unchanged')['plan1']}) is None


def test_unchanged_workers_stay_in_rotation_out_of_every_batch():
    previews = {'node1': Preview(unchanged=True), 'node2': Preview(reasons=('inputs changed: sglang_service_environment',)),
                'node3': None}
    p = plan(fleet3(), gw(*URLS), RollSettings(batch=1), previews)
    assert names(p) == [['node2'], ['node3']]
    assert p.to_json()['batches'][0]['canary'] is True
    assert [w['name'] for w in p.to_json()['unchanged']] == ['node1']
    # the worker left alone keeps serving: a batch of every changed worker at once leaves it in rotation
    assert names(plan(fleet3(), gw(*URLS), RollSettings(batch='100%', canary=False), previews)) == [['node2', 'node3']]
    nothing = plan(fleet3(), gw(*URLS), RollSettings(batch='100%'), dict((n, Preview(unchanged=True)) for n in ('node1', 'node2', 'node3')))
    assert (nothing.batches, [w.name for w in nothing.unchanged]) == ([], ['node1', 'node2', 'node3'])


def test_a_worker_whose_deploy_plan_refuses_refuses_the_roll():
    previews = {'node2': Preview(refusal="node2: sglang_service_args: unknown flag '--tp-szie' (did you mean --tp-size?)")}
    with pytest.raises(RollInputError, match=r"the deploy plan refuses the input of node2: sglang_service_args: unknown flag '--tp-szie'"):
        plan(fleet3(), gw(*URLS), RollSettings(), previews)
    failed = dict(recorded_results('unchanged')['plan1'], failure={'step': 'plan', 'msg': 'bad flag; sglang.service was not touched'})
    one = fleet_from_inventory({'regular': ['plan1']}, {}, {'plan1': {}})[0]
    assert preview(one, {'plan1': failed}).refusal == 'plan1: bad flag; sglang.service was not touched'


def test_the_row_of_an_unchanged_worker():
    row = unchanged_outcome({'name': 'node1', 'url': URLS[0]})
    assert (row.status, row.change, row.drain, row.returned, row.serves) == ('unchanged', 'unchanged', None, None, True)
    table = render_roll([row]).splitlines()
    assert table[0] == 'llmops.sglang roll: 1 worker, 1 unchanged'


def test_the_report_has_every_worker_once_in_the_inventorys_order():
    previews = {'node2': Preview(unchanged=True)}
    planned = plan(fleet3(), gw(*URLS), RollSettings(batch=1), previews).to_json()
    canary = WorkerOutcome('node1', URLS[0], 1, drain='fail', status='untouched', reason='drain failed')
    rows = report_rows(planned, [canary], stopped='node1: drain failed')
    assert [(r.name, r.batch, r.status) for r in rows] == [('node1', 1, 'untouched'), ('node2', 0, 'unchanged'),
                                                           ('node3', 2, 'untouched')]
    assert rows[2].reason == 'not reached: the roll stopped before batch 2'


def test_a_dry_run_reports_what_would_roll_and_says_it_changed_nothing():
    previews = {'node2': Preview(unchanged=True)}
    planned = plan(fleet3(), gw(*URLS), RollSettings(batch=1), previews).to_json()
    rows = report_rows(planned, [], dry_run=True)
    assert [(r.name, r.batch, r.status, r.change) for r in rows] == [
        ('node1', 1, 'would roll', 'not run'), ('node2', 0, 'unchanged', 'unchanged'), ('node3', 2, 'would roll', 'not run')]
    assert rows[2].reason == 'would roll in batch 2 (check mode: nothing touched)'
    head = render_roll(rows, dry_run=True).splitlines()[0]
    assert head == 'llmops.sglang roll (dry run, check mode: nothing was changed): 3 workers, 1 unchanged, 2 would roll'


def test_may_go_on_is_the_batch_verdict_less_the_return():
    from ansible_collections.llmops.sglang.plugins.module_utils.gateway._roll import WorkerOutcome, batch_verdict, may_go_on

    def outcome(**kw):
        return WorkerOutcome(**dict({'name': 'w1', 'url': 'http://10.0.0.11:30000', 'batch': 1, 'drain': 'idle',
                                     'change': 'changed', 'serves': True}, **kw))

    ok = [outcome(), outcome(name='w2', drain='proceed', change='unchanged')]
    assert may_go_on(ok)
    for bad in (outcome(drain='fail'), outcome(drain=None), outcome(change='rolled back'), outcome(change='failed', serves=False),
                outcome(change='not run')):
        assert not may_go_on(ok + [bad])
        # whatever comes back, batch_verdict stops on the same batch
        for o in ok + [bad]:
            o.returned = o.serves
        assert batch_verdict(ok + [bad])[0] == 'stop' or bad.change == 'not run'
    assert not may_go_on([])
    # every one of them back: the verdict goes on, as may_go_on said
    for o in ok:
        o.returned = True
    assert batch_verdict(ok)[0] == 'continue'
