# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller side of llmops.sglang.sglang_gateway_deploy: a step takes the facts the step before it left in
sglang_gateway_result, returns the role's result with them, fails its task with one line when it cannot go on, and no
key reaches the result."""

from __future__ import annotations

import json

from ansible.plugins.action import ActionBase

from ansible_collections.llmops.sglang.plugins.action.sglang_gateway_deploy import ActionModule

WORKERS = [{'url': 'http://10.213.0.11:30000', 'worker_type': 'prefill', 'bootstrap_port': 8998},
           {'url': 'http://10.213.0.12:30000', 'worker_type': 'decode'}]


class _Task:
    def __init__(self, check_mode):
        self.check_mode, self.no_log = check_mode, False


class _Templar:
    @staticmethod
    def template(value):
        return value


class _Shell:
    tmpdir = None


class _Connection:
    _shell = _Shell()


def action(monkeypatch, step, answers, check_mode=False):
    """An ActionModule for STEP whose module runs are answered from ANSWERS (module name -> result)."""
    act = ActionModule.__new__(ActionModule)
    act.calls = []
    act._task, act._templar, act._connection = _Task(check_mode), _Templar(), _Connection()

    def execute(module_name, module_args, task_vars):
        act.calls.append((module_name, dict(module_args), act._task.no_log))
        return dict(answers.get(module_name, {'changed': False}))

    act._execute_module = execute
    act._remove_tmp_path = lambda path: None
    monkeypatch.setattr(act, '_find_needle', lambda folder, name: __file__, raising=False)
    monkeypatch.setattr(act, 'validate_argument_spec', lambda argument_spec: (None, {'step': step}), raising=False)
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    return act


def role_vars(**over):
    values = {'inventory_hostname': 'gw1', 'sglang_gateway_admin_key': 'adm-secret', 'sglang_gateway_api_key': 'client-secret'}
    values.update(over)
    return values


def test_the_configure_step_writes_the_workers_the_install_step_read_and_restarts_for_the_unit(monkeypatch):
    earlier = {'facts': {'mode': 'pd', 'api_workers': WORKERS, 'changed_files': {'release': False}, 'release_version': '1.13.0'}}
    answers = {'llmops.sglang.sglang_config_file': {'changed': True},
               'ansible.builtin.systemd_service': {'changed': False, 'status': {'ActiveState': 'active'}}}
    act = action(monkeypatch, 'configure', answers)
    got = act.run(task_vars=role_vars(sglang_gateway_result=earlier))
    written = dict((args['dest'], args) for name, args, _no_log in act.calls if name == 'llmops.sglang.sglang_config_file')
    assert json.loads(written['/etc/smg/smg.workers.json']['content']) == {'mode': 'pd', 'workers': WORKERS}
    assert '--mode pd' in written['/etc/systemd/system/smg.service']['content']
    # the keys file alone goes with no_log
    assert [args['dest'] for name, args, no_log in act.calls if no_log] == ['/etc/smg/smg.secret.json']
    assert (got['restarted'], got['reasons'], got['mode'], got['step'], got['changed']) == (True, ['launcher', 'keys', 'unit'], 'pd',
                                                                                            'configure', True)
    assert got['facts']['reasons'] == ['launcher', 'keys', 'unit'] and 'failed' not in got
    assert 'adm-secret' not in json.dumps(dict(got, facts={})) and 'client-secret' not in json.dumps(dict(got, facts={}))


def test_an_install_step_without_an_admin_key_fails_its_task_with_one_line_and_runs_nothing(monkeypatch):
    act = action(monkeypatch, 'install', {})
    got = act.run(task_vars=role_vars(sglang_gateway_admin_key=''))
    assert got['failed'] is True and got['msg'].startswith('sglang_gateway_admin_key is empty')
    assert got['status'] == 'failed' and got['failure']['step'] == 'install' and act.calls == []


def test_the_install_step_starts_afresh_and_reads_the_workers_from_the_inventory(monkeypatch):
    answers = {'ansible.builtin.pip': {'changed': False}, 'llmops.sglang.sglang_gateway_release': {'changed': False, 'version': '1.13.0'}}
    act = action(monkeypatch, 'install', answers)
    stale = {'facts': {'reasons': ['unit'], 'restarted': True}}  # an earlier include's result is not this run's
    inventory = {'groups': {'sglang': ['w1']}, 'hostvars': {'w1': {'ansible_host': '10.213.0.11'}}}
    got = act.run(task_vars=role_vars(sglang_gateway_result=stale, **inventory))
    assert got['facts']['api_workers'] == [{'url': 'http://10.213.0.11:30000', 'worker_type': 'regular'}]
    assert (got['restarted'], got['release'], got['changed']) == (False, 'smg 1.13.0', False)
