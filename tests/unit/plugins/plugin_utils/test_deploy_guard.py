# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_service role and issue 24: the guard's options the role fills in for its server (sglang_service_guard),
the pre-flight's GPU health options, and the unit's stop bound that sglang_service_unit_extra cannot loosen."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_facts import Facts
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_files import unit_text
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_guard import (
    guard_after_deploy, guard_args, guard_files, guard_unchanged, metrics_path, must_remove, state_path)
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import DIGESTED, Inputs
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_plan import Topology, plan
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_steps import (
    Context, StepFailed, may_exist, remove_key_file, run_preflight, stamp_args)


class Host:
    """The host a step runs modules on: records each module run and answers with the result given for its name."""

    name = 'h'
    check_mode = False

    def __init__(self, results=None):
        self.calls, self.results, self.said = [], results or {}, []

    def module(self, name, args, secret=False, read_only=False):
        self.calls.append((name, args, secret))
        return dict(self.results.get(name, {'changed': False}))

    def action(self, name, args):
        raise AssertionError('no action expected: %s' % name)

    def say(self, text, detail=False):
        self.said.append(text)


def context(topo=None, facts=None, host=None, **values):
    return Context(inputs=Inputs(**values), values={}, topo=topo or Topology(host='h'), facts=facts or Facts(server='sglang'),
                   peers={}, host=host or Host())


def test_the_guard_watches_this_server_with_the_settings_given_winning():
    ctx = context(api_key='sk-1', port=30001, history_metrics_path='/var/lib/node_exporter/textfile_collector/sglang.prom',
                  environment={'CUDA_VISIBLE_DEVICES': '4'}, guard=True, guard_settings={'interval': 5, 'hung_after': 3})
    args = guard_args(ctx)
    assert (args['unit'], args['url'], args['api_key'], args['interval'], args['hung_after']) == (
        'sglang.service', 'http://127.0.0.1:30001', 'sk-1', 5, 3)
    assert args['state_path'] == '/var/lib/sglang/sglang-guard.json'
    assert args['metrics_path'] == '/var/lib/node_exporter/textfile_collector/sglang-guard.prom'
    assert (args['run_file'], args['lock_path'], args['log_path']) == (
        '/var/lib/sglang/sglang.run.json', '/run/lock/llmops-sglang/sglang.lock', '/var/log/sglang/sglang.log')
    assert args['environment'] == {'CUDA_VISIBLE_DEVICES': '4'}
    assert guard_args(context(guard_settings={'metrics_path': '/x/y.prom'}))['metrics_path'] == '/x/y.prom'
    # a prefill or decode server's generation request needs bootstrap information (the guard sends SGLang's fake one)
    assert args['disaggregation_mode'] == 'null'
    assert guard_args(context(args={'model-path': 'm', 'disaggregation-mode': 'prefill'}))['disaggregation_mode'] == 'prefill'
    assert metrics_path(Inputs()) == '' and state_path(Inputs(name='b', working_directory='/srv/')) == '/srv/b-guard.json'


def test_the_guards_settings_never_restart_the_server():
    """Not inputs of the no-change check: a change of the guard's settings updates the guard, not the server."""
    assert not [name for name in DIGESTED if 'guard' in name or 'gpu_health' in name or name.endswith(('kernel_log', 'nvidia_smi'))]


def test_every_stop_of_the_unit_is_bounded():
    inputs = Inputs(timeout_stop_sec=90)
    text = unit_text(inputs, plan(inputs, Topology(host='h')), 'Ansible managed').splitlines()
    assert ['TimeoutStopSec=90', 'KillMode=control-group', 'SendSIGKILL=yes'] == [
        line for line in text if line.startswith(('TimeoutStopSec=', 'KillMode=', 'SendSIGKILL='))]


def test_unit_extra_cannot_loosen_the_stop_bound():
    refused = plan(Inputs(unit_extra={'KillMode': 'process', 'SendSIGKILL': False, 'LimitNOFILE': 1}), Topology(host='h')).refusals
    assert len(refused) == 1 and refused[0].startswith('sglang_service_unit_extra sets KillMode, SendSIGKILL: the role\'s unit sends SIGTERM')
    assert plan(Inputs(unit_extra={'LimitNOFILE': 1}), Topology(host='h')).refusals == ()


def test_a_full_deploy_installs_the_guard_on_rank_0_and_removes_one_turned_off():
    on = context(guard=True, guard_settings={'interval': 5})
    guard_after_deploy(on)
    [(name, args, secret)] = on.host.calls
    assert (name, args['state'], args['interval'], args['unit'], secret) == ('llmops.sglang.sglang_guard', 'present', 5, 'sglang.service', True)
    off = context()
    guard_after_deploy(off)
    assert off.host.calls == [('llmops.sglang.sglang_guard', {
        'state': 'absent', 'unit': 'sglang.service', 'state_path': '/var/lib/sglang/sglang-guard.json', 'metrics_path': ''}, False)]


def test_rank_1_of_a_multi_node_server_has_no_guard():
    topo = Topology(host='n2', peers=('n1', 'n2'))
    ctx = context(topo=topo, guard=True, deployment_group='g', args={'model-path': 'm'})
    assert ctx.plan.node_rank == 1
    guard_after_deploy(ctx)
    assert ctx.host.calls == []


@pytest.mark.parametrize('unchanged, guard, failure, present, runs', [
    (True, True, None, [], ['present']),      # the no-change path keeps the guard's code and settings current
    (True, False, None, [], []),              # the query saw no guard: nothing to remove
    (True, False, None, ['/opt/sglang/wheelhouse/sglang-0.5.9-py3-none-any.whl'], []),  # ... only a wheel's copy
    (True, False, None, ['/etc/systemd/system/sglang-guard.timer'], ['absent']),  # turned off since the last deploy
    (True, True, {'step': 'ranks', 'msg': 'x'}, [], []),
    (True, False, {'step': 'ranks', 'msg': 'x'}, ['/etc/sglang/sglang-guard.json'], []),
    (False, True, None, [], []),              # the full deploy's finish step installs it
    (False, False, None, ['/etc/sglang/sglang-guard.json'], []),  # ... or removes it
])
def test_the_no_change_path_runs_the_guard_only_when_it_is_on_or_one_is_there(unchanged, guard, failure, present, runs):
    ctx = context(facts=Facts(server='sglang', unchanged=unchanged, failure=failure, stamp=stamp(*present)), guard=guard)
    guard_unchanged(ctx)
    assert [args['state'] for dummy, args, dummy_secret in ctx.host.calls] == runs


def test_a_guard_that_cannot_be_installed_fails_the_run_unless_the_run_failed_already():
    failed = {'llmops.sglang.sglang_guard': {'failed': True, 'msg': 'sglang_guard: interval must be longer than smoke_timeout'}}
    ctx = context(host=Host(failed), guard=True)
    with pytest.raises(StepFailed) as err:
        guard_after_deploy(ctx)
    assert (err.value.what, str(err.value.msg)) == ('the runtime guard', 'sglang_guard: interval must be longer than smoke_timeout')
    earlier = context(host=Host(failed), facts=Facts(server='sglang', failure={'step': 'restart', 'msg': 'crashed'}), guard=True)
    guard_after_deploy(earlier)
    assert earlier.warnings == ['the runtime guard was not installed: sglang_guard: interval must be longer than smoke_timeout']


@pytest.mark.parametrize('gpu_health, sent, checks_health', [('fail', 'fail', True), ('warn', 'warn', True), ('off', 'fail', False)])
def test_the_preflight_gets_the_gpu_health_settings(gpu_health, sent, checks_health):
    ctx = context(host=Host({'llmops.sglang.sglang_preflight': {'ok': True, 'summary': 'ok'}}), gpu_health=gpu_health,
                  kernel_log='/var/log/kern.log')
    run_preflight(ctx)
    [(name, args, dummy)] = ctx.host.calls
    assert (name, args['gpu_health'], args['kernel_log'], args['nvidia_smi']) == ('llmops.sglang.sglang_preflight', sent, '/var/log/kern.log', None)
    assert ('gpu_health' in args['checks']) is checks_health and 'gpus' in args['checks']


def stamp(*present):
    """What the no-change query (llmops.sglang.sglang_deploy_stamp) saw of the guard's files."""
    return {'current': False, 'reasons': [], 'paths_present': list(present)}


@pytest.mark.parametrize('facts, removes', [
    (Facts(server='sglang', stamp=stamp()), False),                     # seen: no guard on the host, nothing to remove
    (Facts(server='sglang', stamp=stamp('/etc/systemd/system/sglang-guard.timer')), True),
    (Facts(server='sglang', stamp=stamp('/var/lib/sglang/sglang-guard.json')), True),   # a state file left behind
    (Facts(server='sglang', stamp=None), True),                         # not observed: the removal runs (idempotent)
    (Facts(server='sglang', stamp={'current': False}), True),           # a query that did not report the guard's files
    (Facts(server='sglang', stamp=stamp(), lock_waited=True), True),    # another run held the lock since the query
    (Facts(server='sglang', stamp=stamp(), deployed_over='deployed over a configuration from a@b 3 s earlier'), True),
    # what else the query looks for is no guard: the API-key file, a key file kept for a rollback, the wheelhouse's copies
    (Facts(server='sglang', stamp=stamp('/etc/sglang/sglang.secret-args.yaml', '/etc/sglang/sglang.secret-args.yaml.rollback',
                                        '/opt/sglang/wheelhouse/sglang-0.5.9-py3-none-any.whl')), False),
])
def test_a_full_deploy_with_the_guard_off_removes_a_guard_only_where_one_was_seen(facts, removes):
    assert (must_remove(facts, guard_files(Inputs())) is not None) is removes
    ctx = context(facts=facts)
    guard_after_deploy(ctx)
    assert [args['state'] for dummy, args, dummy_secret in ctx.host.calls] == (['absent'] if removes else [])


def test_the_no_change_query_looks_for_what_a_deploy_would_remove():
    """The guard's files with the guard off (rank 0 only), the API-key file without an API key, the key file kept for a
    rollback: a deploy then runs a removal only where the query saw something to remove."""
    files = guard_files(Inputs(history_metrics_path='/var/lib/node_exporter/textfile_collector/sglang.prom'))
    assert files == ('/etc/systemd/system/sglang-guard.timer', '/etc/systemd/system/sglang-guard.service',
                     '/etc/sglang/sglang-guard.json', '/usr/local/lib/llmops-sglang/sglang-guard',
                     '/var/lib/sglang/sglang-guard.json', '/var/lib/sglang/sglang-guard.json.lock',
                     '/var/lib/node_exporter/textfile_collector/sglang-guard.prom')
    key, kept = '/etc/sglang/sglang.secret-args.yaml', '/etc/sglang/sglang.secret-args.yaml.rollback'
    assert stamp_args(context(), 'query')['probe_paths'] == list(guard_files(Inputs())) + [key, kept]
    assert stamp_args(context(guard=True, api_key='sk-1'), 'query')['probe_paths'] == [kept]
    assert 'probe_paths' not in stamp_args(context(), 'present')
    rank1 = context(topo=Topology(host='n2', peers=('n1', 'n2')), deployment_group='g', args={'model-path': 'm'})
    assert stamp_args(rank1, 'query')['probe_paths'] == [key, kept]


@pytest.mark.parametrize('facts, exists', [
    (Facts(server='sglang', stamp=stamp()), False),
    (Facts(server='sglang', stamp=stamp('/etc/sglang/sglang.secret-args.yaml')), True),
    (Facts(server='sglang', stamp=None), True),                        # not observed
    (Facts(server='sglang', stamp=stamp(), lock_waited=True), True),   # another run held the lock since
])
def test_the_api_key_file_is_removed_only_where_it_may_be(facts, exists):
    assert may_exist(facts, '/etc/sglang/sglang.secret-args.yaml') is exists
    ctx = context(facts=facts, rollback=True)
    remove_key_file(ctx)
    # with a rollback possible: a copy kept, then the removal
    assert [(name, args.get('state')) for name, args, dummy in ctx.host.calls] == (
        [('ansible.legacy.copy', None), ('ansible.legacy.file', 'absent')] if exists else [])
