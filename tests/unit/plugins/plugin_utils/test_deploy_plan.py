# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The deploy plan of the sglang_service role (plugins/plugin_utils/_deploy_plan.py), a pure function: replayed on the
facts recorded from real deploys of the demo inventory on test hosts (tests/fixtures/deploy_plan/), and its rule tables
(refusals, restart reasons, rollback) case by case."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_facts import Facts
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_files import environment_text, unit_text
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import (
    DIGESTED, Inputs, input_digests, input_problems, likely_typos, role_options)
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_plan import (
    Topology, plan, probe_url, schedulable)

FIXTURES = Path(__file__).resolve().parents[3] / 'fixtures' / 'deploy_plan'
ROLE = Path(__file__).resolve().parents[4] / 'roles' / 'sglang_service'

# demo/inventory.yml's settings (the recorded runs used them)
DEMO = {
    'sglang_service_version': '0.5.9', 'sglang_service_pip_extra_args': ['--no-deps'],
    'sglang_service_wheelhouse': '/var/tmp/fleet-plan/wheelhouse', 'sglang_service_sm120_patch': 'present',
    'sglang_service_args': {'model-path': 'zai-org/GLM-5-FP8', 'tp-size': 8, 'mem-fraction-static': 0.85, 'trust-remote-code': True},
    'sglang_service_environment': {'NCCL_P2P_DISABLE': '0', 'SGLANG_ENABLE_JIT_DEEPGEMM': '0', 'CUDA_VISIBLE_DEVICES': '0,1,2,3,4,5,6,7'},
    'sglang_service_secret_environment': {'HF_TOKEN': 'hf_demo_not_a_real_token'},
    'sglang_service_wait_timeout': 180, 'sglang_service_stall_timeout': 60,
}


def recorded(case):
    return json.loads((FIXTURES / ('%s.json' % case)).read_text())['hosts']


def replay(case, group=''):
    """(inputs, topology, facts, peers, what was recorded) per host of a recorded run."""
    hosts = recorded(case)
    names = sorted(hosts)
    facts = dict((h, Facts.from_json(hosts[h]['facts'])) for h in names)
    for host in names:
        argv = hosts[host]['plan']['argv']
        values = dict(DEMO, sglang_service_launch_command=argv[:argv.index('--host')], sglang_service_deployment_group=group)
        peers = tuple(names) if group else ()
        topo = Topology(host=host, peers=peers, rank0_address='10.213.0.11' if group else '', play_hosts=tuple(names),
                        batch=tuple(names), forks=10, batch_groups={group: peers} if group else {})
        yield Inputs.from_vars(values), topo, facts[host], facts, hosts[host]


@pytest.mark.parametrize('case, group', [('unchanged', ''), ('mn-first', 'mn'), ('mn-unchanged', 'mn'),
                                         ('mn-rank1-restarted', 'mn')])
def test_the_plan_of_recorded_runs(case, group):
    """What the role did on real hosts is what plan() says for the facts they recorded."""
    for inputs, topo, facts, everyone, seen in replay(case, group):
        got = plan(inputs, topo, facts, everyone).to_json()
        for key in ('argv', 'url', 'node_rank', 'deployment', 'nnodes', 'multinode_args', 'unchanged', 'deploy_reasons',
                    'restart_reasons'):
            assert got[key] == seen['plan'][key], (case, topo.host, key)
        assert got['refusals'] == [] and got['rollback_needed'] is False


def test_a_rank_restarted_by_hand_restarts_every_rank():
    hosts = {t.host: (i, t, f, e) for i, t, f, e, _s in replay('mn-rank1-restarted', 'mn')}
    inputs, topo, facts, everyone = hosts['plan2']
    assert plan(inputs, topo, facts, everyone).restart_reasons == ('unit restarted or stopped outside a deploy',)
    inputs, topo, facts, everyone = hosts['plan1']
    p = plan(inputs, topo, facts, everyone)
    assert (p.deploy_reasons, p.restart_reasons) == (('another rank of mn differs',), ('a rank of mn changed',))
    # the same facts on a single host: a restart by systemd is no reason to restart again (it is not current either)
    alone = plan(dataclasses.replace(inputs, deployment_group=''), Topology(host='plan2'), hosts['plan2'][2])
    assert alone.restart_reasons == () and alone.unchanged is False


def test_unchanged_needs_every_rank():
    hosts = {t.host: (i, t, f, e) for i, t, f, e, _s in replay('mn-unchanged', 'mn')}
    inputs, topo, facts, everyone = hosts['plan1']
    assert plan(inputs, topo, facts, everyone).unchanged is True
    # rank 1 not seen yet (its facts are another server's, or it did not report): not unchanged
    assert plan(inputs, topo, facts, {'plan1': facts}).unchanged is False
    drifted = dataclasses.replace(everyone['plan2'], stamp=dict(everyone['plan2'].stamp, current=False, reasons=['x']))
    p = plan(inputs, topo, facts, dict(everyone, plan2=drifted))
    assert (p.unchanged, p.deploy_reasons) == (False, ('another rank of mn differs',))
    # sglang_service_skip_unchanged: false always deploys, and says nothing about the record
    p = plan(dataclasses.replace(inputs, skip_unchanged=False), topo, facts, everyone)
    assert (p.unchanged, p.deploy_reasons) == (False, ())


def test_rank_problems_from_the_ranks_preflights():
    hosts = {t.host: (i, t, f, e) for i, t, f, e, _s in replay('mn-first', 'mn')}
    inputs, topo, facts, everyone = hosts['plan1']
    assert plan(inputs, topo, facts, everyone).rank_problems == ()
    other = everyone['plan2']
    newer = dataclasses.replace(other, preflight=dict(other.preflight, rank=dict(other.preflight['rank'], sglang_version='0.5.10')))
    problems = plan(inputs, topo, facts, dict(everyone, plan2=newer)).rank_problems
    assert problems[0] == 'SGLang version differs: plan1=0.5.9, plan2=0.5.10'
    assert problems[-1].startswith('ranks that differ hang at their first collective')
    failed = dataclasses.replace(other, preflight=dict(other.preflight, ok=False))
    assert plan(inputs, topo, facts, dict(everyone, plan2=failed)).rank_problems == ('the pre-flight failed on rank plan2',)


# ------------------------------------------------------------------------------------------------ refusals

GROUP = ('n1', 'n2')


def topo_of(host='n1', peers=GROUP, play=GROUP, batch=GROUP, forks=5, groups=None):
    return Topology(host=host, peers=peers, play_hosts=play, batch=batch, forks=forks, rank0_address='10.0.0.1',
                    batch_groups=groups if groups is not None else {'g': peers})


MN = Inputs(deployment_group='g', args={'model-path': 'm'})


def test_refusals_before_anything_is_touched():
    assert plan(MN, topo_of()).refusals == ()
    derived = plan(dataclasses.replace(MN, args={'model-path': 'm', '--nnodes': 2, 'node_rank': 1}), topo_of()).refusals
    assert derived[0].startswith('sglang_service_args sets --nnodes, --node-rank, which sglang_service_deployment_group=g derives')
    limited = plan(MN, topo_of(play=('n1',), batch=('n1',))).refusals
    assert limited[0].startswith('rank(s) n2 of the multi-node deployment g are not in this play')
    split = plan(MN, topo_of(batch=('n1',))).refusals
    assert split[0].startswith('serial puts rank(s) n2 of the multi-node deployment g into another batch than n1')
    few = plan(MN, topo_of(forks=1)).refusals
    assert few[0].startswith('forks=1 cannot run every rank of the multi-node deployment g at once (2 ranks')
    assert 'Run with -f 2 or more' in few[0]
    # a single host refuses none of these
    assert plan(dataclasses.replace(MN, deployment_group=''), Topology(host='n1', forks=1)).refusals == ()
    # arguments no command line can hold, on any host
    bad = plan(Inputs(args={'model-path': 'm', 'tp_size': 2, 'tp-size': 4}), Topology(host='n1'))
    assert bad.refusals[0].startswith("sglang_service_args: 'tp_size' and 'tp-size' both name --tp-size")
    assert plan(Inputs(args={'tp size': 2}), Topology(host='n1')).refusals[0].startswith(
        "sglang_service_args: 'tp size' is not a valid SGLang flag name")


def test_numbers_out_of_range_are_refused_before_anything_is_touched():
    """A newcomer's sglang_service_wait_timeout=-5 restarted the server; the wait then refused it and the run ended rc 0."""
    got = plan(Inputs(wait_timeout=-5, port=70000, cache_keep=0), Topology(host='n1')).refusals
    assert got == ('out of range: sglang_service_wait_timeout=-5 (give 0 or more), sglang_service_port=70000 (give a port, 1-65535)',)
    assert plan(Inputs(wait_timeout=0, stable_for=0), Topology(host='n1')).refusals == ()


@pytest.mark.parametrize('args, host, refusal', [
    # a reviewer's port 70000 in sglang_service_args rewrote the unit of a serving host, which then could not bind
    ({'port': 70000}, '0.0.0.0', "cannot listen there: port 70000 in sglang_service_args (give a port, 1-65535, or leave "
                                 "it out for sglang_service_port=30000)"),
    ({'--port': '8000abc'}, '0.0.0.0', "cannot listen there: port '8000abc' in sglang_service_args (give a port, 1-65535, "
                                       "or leave it out for sglang_service_port=30000)"),
    ({'port': True}, '0.0.0.0', "cannot listen there: port True in sglang_service_args (give a port, 1-65535, or leave it "
                                "out for sglang_service_port=30000)"),
    ({'host': 'not a host!'}, '0.0.0.0', "cannot listen there: host 'not a host!' in sglang_service_args (give an IP "
                                         "address or a host name the server can listen on)"),
    ({}, 'bad_host name', "cannot listen there: host 'bad_host name' sglang_service_host (give an IP address or a host "
                          "name the server can listen on)"),
])
def test_where_the_server_listens_is_checked_whichever_variable_gives_it(args, host, refusal):
    got = plan(Inputs(args=dict({'model-path': 'm'}, **args), host=host), Topology(host='n1'))
    assert got.refusals == (refusal,)


@pytest.mark.parametrize('args, host', [
    ({'port': 8000}, '0.0.0.0'), ({'port': '8000'}, '::'), ({'host': '10.0.0.5'}, '0.0.0.0'), ({'host': '::1'}, '0.0.0.0'),
    ({'host': 'node-1.example.net'}, '0.0.0.0'), ({}, '127.0.0.1'), ({}, '[::]'),
])
def test_addresses_and_ports_a_server_listens_on_pass(args, host):
    assert plan(Inputs(args=dict({'model-path': 'm'}, **args), host=host), Topology(host='n1')).refusals == ()


def test_a_deployment_group_the_inventory_lacks_or_a_host_outside_it_is_refused():
    """A misspelled group started each rank as a server of its own (rc 0); a host outside its group crashed the plan."""
    names = ('gpu_nodes', 'sglang', 'gateway')
    typo = plan(dataclasses.replace(MN, deployment_group='gpu_node'), Topology(host='n1', group_hosts=None, group_names=names))
    assert typo.refusals == ('sglang_service_deployment_group=gpu_node is not a group of the inventory (did you mean '
                             'gpu_nodes?): give the group that holds every rank of the deployment, or leave the variable '
                             'unset for a server on one host',)
    outside = plan(MN, dataclasses.replace(topo_of(host='n3', groups={}), group_hosts=GROUP))
    assert outside.refusals[0] == ('n3 is not in its sglang_service_deployment_group g (n1, n2): set the variable on that '
                                   "group's hosts only (group_vars/g.yml), not on every host of the play")
    assert outside.node_rank == 0
    assert plan(MN, dataclasses.replace(topo_of(), group_hosts=GROUP)).refusals == ()
    # a group of one: a server on one host, as without the variable
    assert plan(MN, Topology(host='n1', group_hosts=('n1',))).refusals == ()


def test_a_throttle_below_the_ranks_is_refused_naming_it():
    """A reviewer's block with throttle: 1 around include_role: both ranks restarted, rank 0 waited 257 s for its peer."""
    throttled = plan(MN, dataclasses.replace(topo_of(forks=5), throttle=1)).refusals
    assert throttled == ('throttle=1 cannot run every rank of the multi-node deployment g at once (2 ranks of multi-node '
                         'deployments in this batch): a rank waits in its worker for the others, which would wait for a '
                         'free worker. Remove the throttle from the task, block or play that includes the role, or set it '
                         'to 2 or more',)
    assert plan(MN, dataclasses.replace(topo_of(forks=5), throttle=2)).refusals == ()
    # forks is the smaller bound: the refusal names forks
    assert plan(MN, dataclasses.replace(topo_of(forks=1), throttle=4)).refusals[0].startswith('forks=1 cannot run')


def test_a_misspelled_input_is_named_and_a_variable_of_the_users_own_is_left_alone():
    """A reviewer's sglang_service_arg deployed the role's default model without a word."""
    names = ['sglang_service_arg', 'sglang_service_enviroment', 'sglang_service_site_note', 'sglang_service_args',
             'sglang_service_result', 'sglang_service_version', 'other_var', 42]
    assert likely_typos(names) == [
        'sglang_service_arg is not a variable of the sglang_service role and changes nothing: did you mean sglang_service_args?',
        'sglang_service_enviroment is not a variable of the sglang_service role and changes nothing: did you mean '
        'sglang_service_environment?']


@pytest.mark.parametrize('batch, groups, forks, ok', [
    (('a1', 'a2'), {'a': ('a1', 'a2')}, 2, True),
    (('a1', 'a2'), {'a': ('a1', 'a2')}, 1, False),
    # two deployments one after the other in play order: the first finishes and frees its workers
    (('a1', 'a2', 'b1', 'b2'), {'a': ('a1', 'a2'), 'b': ('b1', 'b2')}, 2, True),
    # interleaved: a1 and b1 hold both workers, each waiting for a peer queued behind them
    (('a1', 'b1', 'a2', 'b2'), {'a': ('a1', 'a2'), 'b': ('b1', 'b2')}, 2, False),
    (('a1', 'b1', 'a2', 'b2'), {'a': ('a1', 'a2'), 'b': ('b1', 'b2')}, 3, True),
    # single hosts finish on their own
    (('s1', 'a1', 's2', 'a2'), {'a': ('a1', 'a2')}, 2, True),
])
def test_schedulable(batch, groups, forks, ok):
    assert schedulable(batch, groups, forks) is ok


# ------------------------------------------------------------------------------------------------ restart and rollback

def test_restart_reasons_are_one_rule_each():
    one = Inputs(args={'model-path': 'm'})
    assert plan(one, Topology(host='h'), Facts(changes=['unit file', 'SM120 patches'])).restart_reasons == ('unit file', 'SM120 patches')
    stale = Facts(stamp={'current': False, 'stale_process': True, 'unit_changed': True, 'reasons': ['x']})
    assert plan(one, Topology(host='h'), stale).restart_reasons == (
        'the running server predates its files or SGLang (an earlier run ended before its restart)',)
    assert plan(one, Topology(host='h'), Facts()).restart_reasons == ()
    # another rank's reasons restart this rank; another server's do not
    peer = Facts(server='sglang', own_reasons=['unit file'])
    assert plan(MN, topo_of(), Facts(server='sglang'), {'n2': peer}).restart_reasons == ('a rank of g changed',)
    assert plan(MN, topo_of(), Facts(server='sglang'), {'n2': dataclasses.replace(peer, server='sglang-b')}).restart_reasons == ()


def test_a_server_that_runs_an_older_configuration_restarts_whatever_the_record_says():
    """Issue 25: files new, server old (a controller killed before its restart), rerun with skip_unchanged=false or
    a damaged record: only the process itself says so, and that restarts it once."""
    one = Inputs(args={'model-path': 'm'}, skip_unchanged=False)
    differs = ['arguments: --tp-size', 'environment: NCCL_P2P_DISABLE']
    older = Facts(stamp={'current': False, 'reasons': ['the deployment record was damaged (not JSON; kept as x)'],
                         'process': {'pid': 42, 'started_at': 1.0, 'differs': differs}})
    assert plan(one, Topology(host='h'), older).restart_reasons == (
        'the running server runs an older configuration (arguments: --tp-size; environment: NCCL_P2P_DISABLE)',)
    # a process that runs what is wanted, or no process at all: no reason of its own
    for process in ({'pid': 42, 'started_at': 1.0, 'differs': []}, {'pid': None, 'started_at': None, 'differs': []}, None):
        assert plan(one, Topology(host='h'), Facts(stamp={'process': process})).restart_reasons == ()
    # the record's own view (stale_process) gives way to the process's, which names what differs
    both = dataclasses.replace(older, stamp=dict(older.stamp, stale_process=True))
    assert plan(one, Topology(host='h'), both).restart_reasons == plan(one, Topology(host='h'), older).restart_reasons
    # a process read from /proc that runs what is wanted outweighs the record's stale_process (another deployment's
    # SM120 patch of a shared venv changed the record's SGLang digest, not this server's configuration)
    fine = Facts(stamp={'stale_process': True, 'process': {'pid': 42, 'started_at': 1.0, 'differs': []}})
    assert plan(one, Topology(host='h'), fine).restart_reasons == ()
    # said once: a run that changes files restarts for that reason alone
    changed = dataclasses.replace(older, changes=['environment file'])
    assert plan(one, Topology(host='h'), changed).restart_reasons == ('environment file',)


def test_what_a_rollback_restores():
    inputs = Inputs(rollback=True, sm120_patch='present', version='0.5.10', args={'model-path': 'm'})
    facts = Facts(changes=['SGLang install', 'SM120 patches', 'unit file'], previous_version='0.5.9',
                  backups=[{'dest': '/etc/systemd/system/sglang.service', 'backup_file': '/etc/systemd/system/sglang.service.1~',
                            'secret': False}],
                  created=['/etc/sglang/sglang.secret-args.yaml'], key_file_kept=False)
    back = plan(inputs, Topology(host='h'), facts).rollback
    assert (back.version, back.patch, back.remove) == ('0.5.9', 'absent', ('/etc/sglang/sglang.secret-args.yaml',))
    assert back.describe() == ('/etc/systemd/system/sglang.service, removed /etc/sglang/sglang.secret-args.yaml, sglang 0.5.9, '
                               'SM120 patches absent')
    # a first deploy created the unit: there is no previous configuration, its files stay
    first = dataclasses.replace(facts, created=['/etc/systemd/system/sglang.service', '/etc/sglang/sglang.env'])
    assert plan(inputs, Topology(host='h'), first).rollback.remove == ()
    # an emptied API key's file was kept aside: the rollback puts it back
    kept = plan(inputs, Topology(host='h'), dataclasses.replace(facts, key_file_kept=True)).rollback
    assert kept.restore[-1] == {'dest': '/etc/sglang/sglang.secret-args.yaml',
                                'backup_file': '/etc/sglang/sglang.secret-args.yaml.rollback', 'secret': True}


@pytest.mark.parametrize('inputs, facts, check_mode, needed', [
    (dict(rollback=True), dict(wait={'status': 'crashed'}), False, True),
    (dict(rollback=True), dict(wait={'status': 'crashed'}), True, False),
    (dict(rollback=False), dict(wait={'status': 'crashed'}), False, False),
    (dict(rollback=True), dict(wait={'status': 'ready'}, smoke={'ok': False}), False, True),
    (dict(rollback=True), dict(wait={'status': 'ready'}, smoke={'ok': True}), False, False),
    # the gate with policy rollback rolls back a regression and a failed start
    (dict(benchmark={'concurrency': [4]}), dict(wait={'status': 'ready'}, gate={'status': 'regressed'}), False, True),
    (dict(benchmark={'concurrency': [4]}), dict(wait={'status': 'stalled'}), False, True),
    (dict(benchmark={'concurrency': [4]}, benchmark_policy='fail'), dict(wait={'status': 'ready'}, gate={'status': 'regressed'}),
     False, False),
    # never twice, never after a failure before the start
    (dict(rollback=True), dict(wait={'status': 'crashed'}, rollback={'msg': 'x'}), False, False),
    (dict(rollback=True), dict(failure={'step': 'configure', 'msg': 'x'}), False, False),
])
def test_rollback_needed(inputs, facts, check_mode, needed):
    p = plan(Inputs(args={'model-path': 'm'}, **inputs), Topology(host='h', check_mode=check_mode), Facts(**facts))
    assert p.rollback_needed is needed


# ------------------------------------------------------------------------------------------------ server and files

@pytest.mark.parametrize('args, url', [
    ({'host': '0.0.0.0', 'port': 30000}, 'http://127.0.0.1:30000'),
    ({'--host': '::', 'port': 8000}, 'http://127.0.0.1:8000'),
    ({'host': 'fd00::5', '--port': 30002}, 'http://[fd00::5]:30002'),
    ({'host': '10.1.2.3', 'port': '30001'}, 'http://10.1.2.3:30001'),
])
def test_probe_url(args, url):
    assert probe_url(args) == url


@pytest.mark.parametrize('args, mode', [
    ({'model-path': 'm'}, 'null'),
    ({'model-path': 'm', 'disaggregation-mode': 'prefill'}, 'prefill'),
    ({'model-path': 'm', '--disaggregation-mode': 'decode'}, 'decode'),
    ({'model-path': 'm', 'disaggregation-mode': 'null'}, 'null'),
])
def test_the_plan_knows_a_prefill_or_decode_server_in_any_spelling(args, mode):
    # the smoke request and the guard's generation request carry bootstrap information for prefill and decode servers
    assert plan(Inputs(args=args), Topology(host='h')).disaggregation_mode == mode


def test_host_and_port_in_the_arguments_win_in_any_spelling():
    p = plan(Inputs(args={'model-path': 'm', '--port': 30002}, port=30001), Topology(host='h'))
    assert (p.url, p.argv[3:]) == ('http://127.0.0.1:30002', ('--host', '0.0.0.0', '--model-path', 'm', '--port', '30002'))


def test_unit_and_environment_files():
    inputs = Inputs(args={'model-path': 'zai-org/GLM-5-FP8', 'json-model-override-args': {'a': 1}}, api_key='sk-1',
                    unit_extra={'LimitNOFILE': 65536}, log_path='')
    text = unit_text(inputs, plan(inputs, Topology(host='h')), 'Ansible managed')
    assert ('ExecStart=/opt/sglang/venv/bin/python -m sglang.launch_server --host 0.0.0.0 --port 30000 --model-path '
            'zai-org/GLM-5-FP8 --json-model-override-args "{\\"a\\":1}" --config %d/secret-args.yaml') in text
    assert 'LoadCredential=secret-args.yaml:/etc/sglang/sglang.secret-args.yaml' in text
    assert 'sk-1' not in text and 'StandardOutput' not in text and text.rstrip().endswith('WantedBy=multi-user.target')
    assert environment_text({'B': 'x y', 'A': 1}, 'Ansible managed') == '# Ansible managed\nA="1"\nB="x y"\n'


def test_the_inputs_are_the_documented_variables():
    """Every variable the role reads is in its argument spec (and the other way round, but for the SM120 patch role's
    three, documented there); a digest per input that changes what runs."""
    import yaml
    spec = yaml.safe_load((ROLE / 'meta' / 'argument_specs.yml').read_text())['argument_specs']['main']['options']
    own = [n for n in Inputs.names() if n.startswith('sglang_service_')]
    assert sorted(own) == sorted(spec)
    defaults = yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text())
    assert Inputs.from_vars(defaults) == Inputs()
    assert set(input_digests({})) == set(DIGESTED) and set(DIGESTED) <= set(Inputs.names())


def test_the_plan_step_validates_the_role_variables_as_the_role_would():
    """llmops.sglang.deploy includes the role with rolespec_validate false (one task fewer per host): the plan step
    checks the same argument spec, read from the role's meta/argument_specs.yml, with ansible-core's validator."""
    import yaml
    options = role_options()
    assert options == yaml.safe_load((ROLE / 'meta' / 'argument_specs.yml').read_text())['argument_specs']['main']['options']
    defaults = yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text())
    assert input_problems(options, defaults) == []
    problems = input_problems(options, dict(defaults, sglang_service_port='8000abc', sglang_service_args=['tp-size', 8],
                                            sglang_service_restart_policy='sometimes', other_variable=object()))
    named = [re.search(r'(sglang_service_\w+)', p).group(1) for p in problems]
    assert named == ['sglang_service_port', 'sglang_service_args', 'sglang_service_restart_policy'], problems
    assert 'must be one of: no, on-success' in problems[2]
    # a number given as text is what the role's validation accepts too
    assert input_problems(options, {'sglang_service_port': '8001', 'sglang_service_wait_timeout': 60}) == []


def test_a_number_in_a_list_of_text_is_accepted_and_taken_as_text():
    """YAML's ``[--timeout, 60]`` passes the validation of a list of str (ansible-core converts its own copy); the
    inputs take its text as well, so the install's quoting of the pip arguments gets strings only."""
    values = {'sglang_service_pip_extra_args': ['--timeout', 60], 'sglang_service_launch_command': ['python3', '-m', 7]}
    assert input_problems(role_options(), values) == []
    i = Inputs.from_vars(values)
    assert (i.pip_extra_args, i.launch_command) == (('--timeout', '60'), ('python3', '-m', '7'))


def test_the_deploy_playbook_leaves_the_validation_to_the_plan_step():
    """The validation the role would prepend is off in llmops.sglang.deploy only because the plan step does it."""
    import yaml
    play = yaml.safe_load((ROLE.parents[1] / 'playbooks' / 'deploy.yml').read_text())[0]
    includes = [t['ansible.builtin.include_role'] for b in play['tasks'] for t in b.get('block', [])
                if 'ansible.builtin.include_role' in t]
    service = [i for i in includes if i['name'] == 'llmops.sglang.sglang_service']
    assert service == [{'name': 'llmops.sglang.sglang_service', 'rolespec_validate': False}]
