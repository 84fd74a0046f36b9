# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The deployment record after a rollback (breaker report of issue 21, finding 9): the rollback restarts the previous
configuration, so the unit runs a new invocation; unless the record says so, the next deploy of that same configuration
is a full deploy ('restarted since the deployment (InvocationID ...)', a second wait, changed=2). The steps rollback
and finish run here against a host that answers from a table, with the facts a crashed start leaves."""

from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_facts import Facts
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import Inputs
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_plan import Topology
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_steps import Context
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_verify import step_finish, step_rollback

STAMP = 'llmops.sglang.sglang_deploy_stamp'
CRASHED = {'status': 'crashed', 'signature': 'cuda_oom', 'msg': 'SGLang crashed after 0.6s at stage cuda_graph'}
BACKUP = {'dest': '/etc/sglang/sglang.env', 'backup_file': '/etc/sglang/sglang.env.7.bak', 'secret': False}
RESTARTED = {'changed': True, 'log_size': 1234, 'invocation': 'c' * 32, 'active_state': 'active', 'failed_step': None}
VALUES = dict(sglang_service_version='0.5.9', sglang_service_rollback=True, sglang_service_lock=False,
              sglang_service_check_args=False, sglang_service_preflight=False,
              sglang_service_environment={'NCCL_P2P_DISABLE': '1'})


class TableHost:
    """Records the modules run on it and answers each from a table (module name -> result)."""

    name, check_mode = 'h', False

    def __init__(self, answers):
        self.answers, self.runs, self.said = dict(answers), [], []

    def module(self, name, args, secret=False, read_only=False):
        self.runs.append((name, dict(args)))
        return dict(self.answers.get(name) or {})

    def action(self, name, args):
        return self.module(name, args)

    def say(self, text, detail=False):
        self.said.append(text)


def rolled_back(after_wait, stamp=None):
    """A crashed start with sglang_service_rollback: the steps rollback and finish; the host and the facts."""
    host = TableHost({'llmops.sglang.sglang_restart': RESTARTED, 'llmops.sglang.wait_for_sglang': after_wait,
                      STAMP: stamp or {'changed': True, 'current': True}})
    facts = Facts(stamp={'sglang_version': '0.5.9', 'current': False, 'reasons': ['inputs changed: sglang_service_environment']},
                  changes=['environment file'], backups=[dict(BACKUP)], restart={'invocation': 'b' * 32},
                  restart_reasons=['environment file'], wait=dict(CRASHED))
    ctx = Context(inputs=Inputs.from_vars(VALUES), values=dict(VALUES), topo=Topology(host='h'), facts=facts, peers={},
                  host=host)
    step_rollback(ctx)
    assert ctx.facts.rollback and ctx.facts.rollback['after'].get('status') == after_wait.get('status')
    step_finish(ctx)
    return host, ctx.facts


def stamp_runs(host):
    return [args for name, args in host.runs if name == STAMP]


def test_a_proven_rollback_records_the_restored_configuration_with_the_new_run():
    host, facts = rolled_back({'status': 'ready', 'elapsed': 2.0})
    runs = stamp_runs(host)
    assert len(runs) == 1, 'the rollback left the record of the run before it: the next identical deploy is a full deploy'
    args = runs[0]
    # the record that describes the restored configuration is written again for the unit's new invocation: its
    # inputs are those the record holds (the restored ones), not this run's, and the process is not compared with
    # what the rolled-back configuration wanted
    assert (args['state'], args['restored'], args['unit']) == ('present', True, 'sglang.service')
    assert not set(args) & {'process_argv', 'process_environment', 'process_sglang_sources'}
    assert facts.recorded
    # the record comes after the restart and the wait of the previous configuration
    names = [name for name, _args in host.runs]
    assert names.index(STAMP) > names.index('llmops.sglang.wait_for_sglang') > names.index('llmops.sglang.sglang_restart')


def test_a_failed_rollback_records_nothing():
    host, facts = rolled_back({'status': 'crashed', 'msg': 'crashed again'})
    assert stamp_runs(host) == [] and not facts.recorded


def test_a_record_the_host_no_longer_matches_is_left_and_said():
    host, facts = rolled_back({'status': 'ready', 'elapsed': 2.0},
                              stamp={'changed': False, 'current': False, 'reasons': ['/etc/sglang/sglang.env was changed on the host']})
    assert len(stamp_runs(host)) == 1 and not facts.recorded
    assert any('not renewed for the restored configuration (/etc/sglang/sglang.env was changed on the host)' in s for s in host.said)


def test_a_rollback_without_a_wait_records_nothing():
    host = TableHost({'llmops.sglang.sglang_restart': RESTARTED, STAMP: {'changed': True, 'current': True}})
    values = dict(VALUES, sglang_service_wait=False)
    facts = Facts(rollback={'msg': 'rolled back', 'status': 'crashed', 'restored': 'x', 'after': {}}, restart={'invocation': 'b' * 32})
    step_finish(Context(inputs=Inputs.from_vars(values), values=values, topo=Topology(host='h'), facts=facts, peers={}, host=host))
    assert stamp_runs(host) == []
