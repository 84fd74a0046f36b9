# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which modules a step runs on the host (issue 21: each module run costs the controller a worker, a payload and a
round trip per host). The restart step: a restart is one run of sglang_restart (it resets the start-rate counter,
measures the log, starts, records the run and enables: no stat, command, systemd_service or sglang_run_offset after
it); only a start without a restart runs those. The install step takes the previous release from the no-change query,
and sends a wheelhouse the query saw missing without the copy action's stat of each file."""

from __future__ import annotations

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_facts import Facts
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import Inputs
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_plan import Topology
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_steps import (
    Context, StepFailed, install_sglang, none_there, offset_after_restart, probe_paths, read_previous_version, step_configure,
    step_install, step_restart, version_seen, wheel_copies)


class RecordingHost:
    """A host that records the modules run on it and answers each from a table (module name -> result)."""

    name, check_mode = 'h', False

    def __init__(self, answers=None):
        self.answers, self.runs = dict(answers or {}), []

    def module(self, name, args, secret=False, read_only=False):
        self.runs.append((name, dict(args)))
        return dict(self.answers.get(name) or {})

    def action(self, name, args):
        return self.module(name, args)

    def put(self, src, dest_dir, mode, directory_mode):
        self.runs.append(('put', {'src': src, 'dest': dest_dir, 'mode': mode, 'directory_mode': directory_mode}))
        return dict(self.answers.get('put') or {'changed': True})

    def say(self, text, detail=False):
        pass


def context(host, facts, wheels=(), **values):
    values.setdefault('sglang_service_version', '0.5.9')
    topo = Topology(host='h', wheelhouse_files=tuple(wheels))
    return Context(inputs=Inputs.from_vars(values), values=values, topo=topo, facts=facts, peers={}, host=host)


def names(host):
    return [name.rsplit('.', 1)[-1] for name, _args in host.runs]


RESTARTED = {'changed': True, 'log_size': 1234, 'invocation': 'b' * 32, 'active_state': 'active', 'failed_step': None}


def test_a_restart_is_one_module_run_that_also_resets_the_start_rate_counter():
    host = RecordingHost({'llmops.sglang.sglang_restart': RESTARTED})
    ctx = context(host, Facts(changes=['unit file']))
    step_restart(ctx)
    assert names(host) == ['sglang_restart']
    assert host.runs[0][1]['reset_failed'] is True and host.runs[0][1]['run_file']
    # the offset sglang_restart recorded with the new run (what sglang_run_offset would read back)
    assert (ctx.facts.run_offset, ctx.facts.started, ctx.facts.restart_reasons) == (1234, False, ['unit file'])


def test_a_restart_without_the_preflights_enforcement_leaves_the_counter():
    host = RecordingHost({'llmops.sglang.sglang_restart': RESTARTED})
    step_restart(context(host, Facts(changes=['unit file']), sglang_service_preflight_enforce=False))
    assert names(host) == ['sglang_restart'] and host.runs[0][1]['reset_failed'] is False


def test_a_start_without_a_restart_resets_the_counter_measures_the_log_starts_and_reads_the_offset():
    host = RecordingHost({'ansible.legacy.stat': {'stat': {'size': 77}}, 'ansible.legacy.systemd_service': {'changed': True},
                          'llmops.sglang.sglang_run_offset': {'offset': 77}})
    ctx = context(host, Facts())
    step_restart(ctx)
    assert names(host) == ['command', 'stat', 'systemd_service', 'sglang_run_offset']
    assert host.runs[0][1]['argv'] == ['systemctl', 'reset-failed', 'sglang.service'] and host.runs[3][1]['log_size'] == 77
    assert (ctx.facts.run_offset, ctx.facts.started) == (77, True)


@pytest.mark.parametrize('stderr, fails', [('Failed to reset failed state of unit sglang.service: Unit sglang.service not loaded.', False),
                                           ('Failed to connect to bus: No such file or directory', True)])
def test_a_start_refuses_a_counter_it_cannot_reset_but_not_a_unit_not_loaded(stderr, fails):
    host = RecordingHost({'ansible.legacy.command': {'failed': True, 'rc': 1, 'stderr': stderr}})
    ctx = context(host, Facts())
    if fails:
        with pytest.raises(StepFailed, match='reset-failed sglang.service: Failed to connect'):
            step_restart(ctx)
        assert names(host) == ['command']
    else:
        step_restart(ctx)
        assert names(host) == ['command', 'stat', 'systemd_service', 'sglang_run_offset']


def test_check_mode_runs_nothing_in_the_restart_step():
    host = RecordingHost()
    host.check_mode = True
    step_restart(context(host, Facts(changes=['unit file'], startable=True)))
    assert host.runs == []


@pytest.mark.parametrize('log_path, res, offset', [('/var/log/sglang/sglang.log', {'log_size': 5}, 5),
                                                   ('/var/log/sglang/sglang.log', {'log_size': None}, 0),
                                                   ('', {'log_size': None}, None)])
def test_offset_after_restart(log_path, res, offset):
    assert offset_after_restart(log_path, res) == offset


@pytest.mark.parametrize('facts, seen', [
    (Facts(stamp={'sglang_version': '0.5.8'}), '0.5.8'),
    (Facts(stamp={'sglang_version': None}), ''),                          # nothing installed yet
    (Facts(stamp={'sglang_version': '0.5.8'}, lock_waited=True), None),   # another run may have installed since
    (Facts(stamp={'current': False}), None),                              # an older query that did not say
    (Facts(), None),                                                      # no query
])
def test_version_seen(facts, seen):
    assert version_seen(facts) == seen


def test_the_previous_release_comes_from_the_query_else_from_one_command():
    host = RecordingHost({'ansible.legacy.command': {'rc': 0, 'stdout': '0.5.7\n'}})
    assert read_previous_version(context(host, Facts(stamp={'sglang_version': '0.5.8'}))) == '0.5.8' and host.runs == []
    assert read_previous_version(context(host, Facts(stamp={'sglang_version': '0.5.8'}, lock_waited=True))) == '0.5.7'
    assert names(host) == ['command']


WHEELS = ('sglang-0.5.9-py3-none-any.whl', 'sgl_kernel-0.3.1-cp310-abi3-manylinux2014_x86_64.whl')
COPIES = ['/opt/sglang/wheelhouse/' + w for w in WHEELS]


def test_the_query_looks_for_the_wheelhouses_copies():
    ctx = context(RecordingHost(), Facts(), WHEELS, sglang_service_wheelhouse='/srv/wheels/')
    assert wheel_copies(ctx.inputs, ctx.topo) == COPIES and probe_paths(ctx)[-2:] == COPIES
    assert wheel_copies(context(RecordingHost(), Facts(), WHEELS).inputs, ctx.topo) == []  # no wheelhouse


@pytest.mark.parametrize('facts, paths, missing', [
    (Facts(stamp={'paths_present': []}), COPIES, True),
    (Facts(stamp={'paths_present': COPIES[1:]}), COPIES, False),                # one is there: the copy action compares
    (Facts(stamp={'paths_present': []}, lock_waited=True), COPIES, False),      # another run may have copied since
    (Facts(stamp={'current': False}), COPIES, False),                           # the query did not look
    (Facts(stamp={'paths_present': []}), [], False),                            # nothing to copy
])
def test_none_there(facts, paths, missing):
    assert none_there(facts, paths) is missing


def test_a_wheelhouse_seen_missing_is_sent_file_by_file_without_a_stat():
    host = RecordingHost({'ansible.legacy.pip': {'changed': True}})
    ctx = context(host, Facts(stamp={'paths_present': []}), WHEELS, sglang_service_wheelhouse='/srv/wheels/')
    install_sglang(ctx)
    assert names(host) == ['put', 'put', 'pip']
    assert [args['src'] for _n, args in host.runs[:2]] == ['/srv/wheels/' + w for w in WHEELS]
    assert host.runs[0][1]['dest'] == '/opt/sglang/wheelhouse/' and ctx.changed


def test_a_wheelhouse_seen_on_the_host_is_compared_by_the_copy_action():
    host = RecordingHost({'ansible.legacy.pip': {'changed': False}})
    install_sglang(context(host, Facts(stamp={'paths_present': COPIES}), WHEELS, sglang_service_wheelhouse='/srv/wheels/'))
    assert names(host) == ['copy', 'pip'] and host.runs[0][1]['src'] == '/srv/wheels/'


def test_a_failed_send_stops_the_install():
    host = RecordingHost({'put': {'failed': True, 'msg': 'No space left on device'}})
    with pytest.raises(StepFailed, match='No space left'):
        install_sglang(context(host, Facts(stamp={'paths_present': []}), WHEELS, sglang_service_wheelhouse='/srv/wheels/'))
    assert names(host) == ['put']


def test_check_mode_counts_a_wheelhouse_seen_missing_as_a_change_without_a_stat():
    host = RecordingHost()
    host.check_mode = True
    ctx = context(host, Facts(stamp={'paths_present': []}), WHEELS, sglang_service_wheelhouse='/srv/wheels/')
    install_sglang(ctx)
    assert names(host) == ['pip'] and ctx.changed


def test_check_mode_does_not_count_an_install_of_the_release_the_host_has():
    """ansible's pip says "changed" in check mode whenever it has extra arguments (--no-index, --find-links): a newcomer's
    --check of an argument change said "would restart: SGLang install, unit file"."""
    host = RecordingHost({'ansible.legacy.pip': {'changed': True}})
    host.check_mode = True
    same = context(host, Facts(stamp={'sglang_version': '0.5.9'}), sglang_service_pip_extra_args=['--no-deps'])
    install_sglang(same)
    assert names(host) == [] and same.facts.changes == [] and not same.facts.sglang_pending
    other = context(host, Facts(stamp={'sglang_version': '0.5.8'}), sglang_service_pip_extra_args=['--no-deps'])
    install_sglang(other)  # another release: pip's answer counts (and the flags are read from the wheel)
    assert names(host) == ['pip'] and other.facts.changes == ['SGLang install'] and other.facts.sglang_pending


# sglang_service_drain (llmops.sglang.roll): the drain waits where the run first changes what the server runs - in the
# restart, as its first step (no module run of its own), unless the install changes the server's code first, or the
# server is multi-node (every rank's configure step must see rank 0's drain)
DRAINED = {'outcome': 'idle', 'seconds': 0.3, 'in_flight_at_start': 0, 'drained': 0, 'still_running': 0, 'policy': 'fail',
           'reason': 'nothing in flight in 2 readings in a row', 'msg': 'idle after 0.3s', 'readings': [{'at': 0.0}]}
DRAIN_FAILED = {'failed': True, 'outcome': 'fail', 'seconds': 30.1, 'still_running': 2, 'policy': 'fail', 'at_timeout': 2,
                'reason': 'still 2 request(s) after 30s', 'msg': 'http://127.0.0.1:30000: fail after 30.1s: still 2 request(s)'}
ONLY_INSTALL = dict(sglang_service_lock=False, sglang_service_check_args=False, sglang_service_preflight=False,
                    sglang_service_drain={'timeout': 30, 'policy': 'fail', 'idle_spacing': 0.25})
SAME_RELEASE = {'sglang_version': '0.5.9'}


def test_a_single_servers_drain_is_the_restarts_first_step():
    host = RecordingHost({'llmops.sglang.sglang_restart': dict(RESTARTED, drain=DRAINED)})
    ctx = context(host, Facts(stamp=SAME_RELEASE, changes=['unit file']), **ONLY_INSTALL)
    step_install(ctx)
    assert names(host) == ['pip'] and ctx.facts.drain is None
    step_restart(ctx)
    assert names(host) == ['pip', 'sglang_restart']
    assert host.runs[1][1]['drain'] == {'url': 'http://127.0.0.1:30000', 'api_key': None, 'timeout': 30, 'policy': 'fail',
                                        'idle_spacing': 0.25}
    assert (ctx.facts.drain['outcome'], ctx.facts.drain['waited']) == ('idle', 0.3) and 'readings' not in ctx.facts.drain
    assert 'drain' not in ctx.facts.restart
    # the roll names the server that runs (a change of port drains the old one, not the new)
    moved = RecordingHost({'llmops.sglang.sglang_restart': RESTARTED})
    step_restart(context(moved, Facts(stamp=SAME_RELEASE, changes=['unit file']), sglang_service_args={'port': 31000},
                         **{**ONLY_INSTALL, 'sglang_service_drain': {'url': 'http://10.0.0.5:30000', 'policy': 'wait'}}))
    assert (moved.runs[0][1]['drain']['url'], moved.runs[0][1]['drain']['policy']) == ('http://10.0.0.5:30000', 'wait')


@pytest.mark.parametrize('facts, more, order', [
    # pip would replace the package the running server serves from
    (Facts(stamp={'sglang_version': '0.5.8'}), {}, ['sglang_drain', 'pip']),
    (Facts(), {}, ['sglang_drain', 'pip']),  # the installed release is unknown
    # the SM120 patches edit the running server's sources
    (Facts(stamp=SAME_RELEASE), {'sglang_service_sm120_patch': 'present'}, ['pip', 'sglang_drain', 'sglang_patch_sm120']),
])
def test_the_drain_comes_first_where_the_install_changes_the_running_servers_code(facts, more, order):
    host = RecordingHost({'llmops.sglang.sglang_drain': DRAINED, 'llmops.sglang.sglang_restart': RESTARTED})
    ctx = context(host, facts, **dict(ONLY_INSTALL, **more))
    step_install(ctx)
    assert names(host) == order and ctx.facts.drain['outcome'] == 'idle' and ctx.facts.drain['waited'] >= 0
    ctx.facts.changes.append('unit file')
    step_restart(ctx)  # drained once
    assert 'drain' not in host.runs[-1][1]


def test_a_multi_node_servers_rank_0_drains_before_any_ranks_configure_step():
    host = RecordingHost({'llmops.sglang.sglang_drain': DRAINED})
    rank0 = context(host, Facts(stamp=SAME_RELEASE), **dict(ONLY_INSTALL, sglang_service_deployment_group='pair'))
    rank0.topo = Topology(host='h', peers=('h', 'r1'), play_hosts=('h', 'r1'))
    step_install(rank0)
    assert names(host) == ['pip', 'sglang_drain']
    rank1 = context(host, Facts(stamp=SAME_RELEASE), **dict(ONLY_INSTALL, sglang_service_deployment_group='pair'))
    rank1.topo = Topology(host='h', peers=('r0', 'h'), play_hosts=('r0', 'h'))
    assert rank1.plan.node_rank == 1
    step_install(rank1)  # rank 1 serves no HTTP: no drain
    assert names(host) == ['pip', 'sglang_drain', 'pip']


def test_no_drain_without_the_option_or_in_check_mode():
    host = RecordingHost()
    step_install(context(host, Facts(stamp={'sglang_version': '0.5.8'}), **{**ONLY_INSTALL, 'sglang_service_drain': {}}))
    host.check_mode = True
    step_install(context(host, Facts(stamp={'sglang_version': '0.5.8'}), **ONLY_INSTALL))
    assert names(host) == ['pip', 'pip']


def test_a_failed_drain_before_pip_stops_the_run_before_anything_that_changes_the_server():
    host = RecordingHost({'llmops.sglang.sglang_drain': DRAIN_FAILED})
    ctx = context(host, Facts(stamp={'sglang_version': '0.5.8'}), **ONLY_INSTALL)
    with pytest.raises(StepFailed) as failed:
        step_install(ctx)
    assert names(host) == ['sglang_drain'] and failed.value.what == 'drain'
    assert failed.value.msg.endswith('sglang.service was not touched')
    assert (ctx.facts.drain['outcome'], ctx.facts.drain['still_running']) == ('fail', 2)


def test_a_failed_drain_in_the_restart_puts_the_previous_files_back_and_leaves_the_server_running():
    failed_restart = {'failed': True, 'changed': False, 'failed_step': 'drain', 'drain': DRAIN_FAILED,
                      'msg': 'the server still has requests in flight: still 2 request(s) after 30s; sglang.service was not touched'}
    host = RecordingHost({'llmops.sglang.sglang_restart': failed_restart})
    backup = {'dest': '/etc/systemd/system/sglang.service', 'backup_file': '/etc/systemd/system/sglang.service.1.bak', 'secret': False}
    ctx = context(host, Facts(stamp=SAME_RELEASE, changes=['unit file'], backups=[backup]), **ONLY_INSTALL)
    with pytest.raises(StepFailed) as failed:
        step_restart(ctx)
    assert failed.value.what == 'drain' and failed.value.msg.endswith('sglang.service was not touched')
    assert names(host) == ['sglang_restart', 'copy', 'file', 'slurp']  # the unit file back, nothing restarted
    assert host.runs[1][1]['src'] == backup['backup_file'] and host.runs[1][1]['dest'] == backup['dest']
    assert ctx.facts.drain['outcome'] == 'fail' and ctx.facts.restart is None


def test_the_files_are_kept_for_a_drain_and_their_copies_dropped_once_the_restart_ran():
    from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_steps import keeps_files
    from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_verify import step_finish

    assert keeps_files(Inputs(drain={'timeout': 5})) and not keeps_files(Inputs())
    host = RecordingHost()
    backups = [{'dest': '/etc/sglang/sglang.env', 'backup_file': '/etc/sglang/sglang.env.7.bak', 'secret': False}]
    ctx = context(host, Facts(stamp=SAME_RELEASE, backups=backups, restart={'invocation': 'b' * 32}),
                  **{**ONLY_INSTALL, 'sglang_service_wait': False})
    step_finish(ctx)
    assert host.runs[0] == ('ansible.legacy.command', {'argv': ['rm', '-f', '--', '/etc/sglang/sglang.env.7.bak']})
    # with sglang_service_rollback they are the rollback's: kept as before
    kept = RecordingHost()
    step_finish(context(kept, Facts(stamp=SAME_RELEASE, backups=backups, restart={'invocation': 'b' * 32}),
                        **{**ONLY_INSTALL, 'sglang_service_wait': False, 'sglang_service_rollback': True}))
    assert 'command' not in names(kept)


def test_the_other_ranks_change_nothing_when_the_serving_ranks_drain_failed():
    host = RecordingHost()
    ctx = context(host, Facts(), **ONLY_INSTALL)
    ctx.peers = {'rank0': Facts(drain=dict(DRAIN_FAILED))}
    with pytest.raises(StepFailed) as failed:
        step_configure(ctx)
    assert host.runs == [] and failed.value.what == 'drain'
    assert failed.value.msg == 'rank rank0 could not drain its server: still 2 request(s) after 30s; sglang.service was not touched'


def test_a_wait_that_could_not_run_is_an_error_not_a_server_left_unwaited():
    """Its arguments refused (a negative timeout once got this far): status error, so the role fails the host."""
    from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_verify import wait

    host = RecordingHost({'llmops.sglang.wait_for_sglang': {'failed': True, 'msg': 'timeout must be 0 or more, got -5'}})
    res = wait(context(host, Facts()), '')
    assert (res['status'], res['msg']) == ('error', 'timeout must be 0 or more, got -5')
    ready = RecordingHost({'llmops.sglang.wait_for_sglang': {'status': 'ready', 'elapsed': 3.0}})
    assert wait(context(ready, Facts()), '')['status'] == 'ready'


def test_the_rollback_task_takes_rank_0s_verdict_first_and_a_rank_above_0_rolls_back_with_it():
    """One task per host fewer: the role runs judge inside its rollback step (every rank's verify, where rank 0
    measured, is done before that task starts on any rank)."""
    from ansible_collections.llmops.sglang.plugins.action.sglang_deploy import STEPS  # pylint: disable=import-outside-toplevel
    regressed = {'change': 'new configuration', 'status': 'regressed', 'headline': '-30 % output tok/s', 'rolled_back': False}
    for gate, rolls_back in ((dict(regressed, status='accepted'), False), (regressed, True)):
        host = RecordingHost()
        rank1 = context(host, Facts(wait={'status': 'ready'}, restart={'changed': True}),
                        **{'sglang_service_deployment_group': 'pair', 'sglang_service_benchmark': {'num_prompts': 8}})
        rank1.topo = Topology(host='h', peers=('r0', 'h'), play_hosts=('r0', 'h'))
        rank1.peers = {'r0': Facts(server='sglang', gate=dict(gate))}
        assert rank1.plan.node_rank == 1 and not rank1.plan.rollback_needed
        for part in STEPS['rollback']:
            part(rank1)
        assert rank1.facts.gate['status'] == gate['status']  # rank 0's verdict, taken in the same task
        assert bool(rank1.facts.rollback) is rolls_back
        assert ('sglang_restart' in names(host)) is rolls_back


CACHES = {'changed': True, 'path': '/var/cache/sglang/0.5.9-sm90', 'arch': 'sm90',
          'environment': {'TRITON_CACHE_DIR': '/var/cache/sglang/0.5.9-sm90/triton'},
          'dirs': {'triton': '/var/cache/sglang/0.5.9-sm90/triton'}, 'created': [], 'pruned': [], 'msg': '...'}


def test_the_compile_caches_are_made_in_the_layouts_run_and_reach_the_environment_file():
    """One module run and one payload fewer per first deploy: sglang_service_layout makes the caches (its compile_cache
    option), no sglang_compile_cache run; their environment goes into the environment file as before."""
    host = RecordingHost({'llmops.sglang.sglang_service_layout': {'changed': True, 'compile_cache': CACHES}})
    ctx = context(host, Facts())
    step_configure(ctx)
    assert names(host)[0] == 'sglang_service_layout' and 'sglang_compile_cache' not in names(host)
    assert host.runs[0][1]['compile_cache'] == {'root': '/var/cache/sglang', 'version': '0.5.9', 'owner': 'sglang',
                                                'group': 'sglang', 'keep': 3, 'environment': {}}
    assert ctx.facts.caches == {'environment': CACHES['environment'], 'dirs': CACHES['dirs'], 'state': None}
    [env_file] = [args['content'] for name, args in host.runs if name.endswith('sglang_config_file') and args['dest'] == ctx.plan.paths.env]
    assert 'TRITON_CACHE_DIR="/var/cache/sglang/0.5.9-sm90/triton"\n' in env_file


def test_without_warm_caches_the_layout_makes_no_caches():
    host = RecordingHost({'llmops.sglang.sglang_service_layout': {'changed': False}})
    ctx = context(host, Facts(), sglang_service_warm_caches=False)
    step_configure(ctx)
    assert 'compile_cache' not in host.runs[0][1] and ctx.facts.caches is None
