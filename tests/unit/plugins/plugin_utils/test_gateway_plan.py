# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang_gateway role's plan and steps (plugin_utils/_gateway_plan.py, _gateway_steps.py) over recorded module
results: why the gateway restarts (release, launcher, keys, unit; only when active), that it starts when it is not
running, what check mode says, that every refusal comes before the unit, the keys or the workers are touched, and the
result's fields and line (the gateway playbook's and the molecule scenarios' words)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils import _gateway_plan as plan
from ansible_collections.llmops.sglang.plugins.plugin_utils import _gateway_steps as steps
from ansible_collections.llmops.sglang.plugins.plugin_utils._gateway_plan import GatewayFacts, GatewayInputs

FIXTURES = Path(__file__).resolve().parents[3] / 'fixtures' / 'gateway'
WORKERS = [{'url': 'http://10.213.0.11:30000', 'worker_type': 'regular'}, {'url': 'http://10.213.0.12:30000', 'worker_type': 'regular'}]
# What the modules returned on a gateway host (shapes of ansible.builtin.pip/systemd_service and the collection's own
# modules as they return them; the secret is left out by the host's no_log)
SYSTEMD = {
    'active': {'changed': False, 'name': 'smg.service',
               'status': {'ActiveState': 'active', 'SubState': 'running', 'LoadState': 'loaded', 'UnitFileState': 'enabled'}},
    'fresh': {'changed': False, 'name': 'smg.service', 'status': {'ActiveState': 'inactive', 'SubState': 'dead', 'LoadState': 'not-found'}},
    'failed': {'changed': False, 'name': 'smg.service', 'status': {'ActiveState': 'failed', 'SubState': 'failed', 'LoadState': 'loaded'}},
}
RELEASE = {'changed': False, 'distribution': 'smg', 'version': '1.13.0', 'control_plane': True,
           'launch_module': 'smg.launch_router', 'package_dir': '/opt/smg/venv-smg-1.13.0/lib/python3.11/site-packages/smg'}
REFUSED = {'failed': True, 'changed': False, 'distribution': 'sglang-router', 'version': '0.3.0', 'control_plane': False,
           'msg': 'sglang-router 0.3.0 has no control-plane worker API (POST/DELETE /workers): use smg, or sglang-router 0.3.2 or later'}
IN_ROTATION = {'changed': True, 'added': [w['url'] for w in WORKERS], 'removed': [], 'in_rotation': 2, 'ok': True, 'waited': 2.1,
               'verdict': {'done': True, 'waiting': {}, 'failed': {}},
               'workers': [{'url': w['url'], 'worker_type': 'regular', 'status': 'ready', 'in_rotation': True} for w in WORKERS],
               'msg': '2 worker(s) in rotation'}
SMOKE = {'changed': False, 'ok': True, 'ttft': 0.12, 'total': 0.41, 'tokens': 8, 'url': 'http://127.0.0.1:30080/v1/chat/completions'}


class RecordedHost:
    """A host that answers each module with a recorded result; CHANGED names what the modules change."""

    name = 'gw1'

    def __init__(self, unit='active', changed=(), release=None, workers=None):
        self.unit, self.changed, self.calls, self.lines = unit, set(changed), [], []
        self.release, self.workers = release or RELEASE, workers or IN_ROTATION

    def _what(self, name, args):
        if name.endswith('sglang_config_file'):
            return {'/opt/smg/gateway_launch.py': 'launcher', '/etc/smg/smg.workers.json': 'workers',
                    '/etc/smg/smg.secret.json': 'keys'}.get(args['dest'], 'unit')
        return {'ansible.builtin.pip': 'release', 'ansible.builtin.user': 'user', 'ansible.builtin.group': 'group'}.get(name, name)

    def module(self, name, args, secret=False, read_only=False):
        self.calls.append((name, dict(args), secret, read_only))
        if name == 'ansible.builtin.systemd_service' and 'state' not in args:
            return json.loads(json.dumps(SYSTEMD[self.unit]))
        if name == 'ansible.builtin.systemd_service':
            return {'changed': args['state'] == 'restarted' or self.unit != 'active', 'name': args['name'], 'state': args['state']}
        if name.endswith('sglang_gateway_release'):
            return dict(self.release)
        if name.endswith('sglang_gateway_workers'):
            return dict(self.workers)
        if name.endswith('sglang_smoke'):
            return dict(SMOKE)
        return {'changed': self._what(name, args) in self.changed}

    def action(self, name, args):
        self.calls.append((name, dict(args), False, False))
        return {'changed': 'wheelhouse' in self.changed}

    def say(self, text, detail=False):
        self.lines.append(text)

    def touched(self):
        """The paths and units the steps wrote or (re)started."""
        return [a.get('dest') or a.get('name') for n, a, _s, r in self.calls
                if n.endswith('sglang_config_file') or (n.endswith('systemd_service') and 'state' in a)]


def inputs(**over):
    values = {'sglang_gateway_admin_key': 'adm-key', 'sglang_gateway_api_key': 'client-key'}
    values.update(('sglang_gateway_' + k, v) for k, v in over.items())
    return GatewayInputs.from_vars(values)


def run(host, check_mode=False, names=('install', 'configure', 'workers'), **over):
    """The role's steps one after the other, the facts carried in the result as the role does (JSON in between)."""
    facts = GatewayFacts()
    for name in names:
        ctx = steps.GatewayContext(inputs=inputs(**over), facts=facts, host=host, check_mode=check_mode,
                                   read_fleet=lambda i: ('regular', WORKERS), launcher=lambda: 'launcher\n')
        steps.STEPS[name](ctx)
        facts = GatewayFacts.from_json(json.loads(json.dumps(facts.to_json())))
    return facts, plan.gateway_result(inputs(**over), facts, check_mode)


@pytest.mark.parametrize('changed, state, reasons', [
    ({'release': True, 'launcher': True, 'keys': True, 'unit': True, 'workers': True}, 'active', ['release', 'launcher', 'keys', 'unit']),
    ({'unit': True, 'release': False}, 'active', ['unit']),
    ({'workers': True}, 'active', []),  # applied live through the control plane
    ({'release': True, 'unit': True}, 'inactive', []),  # it starts instead
    ({'release': True, 'unit': True}, 'failed', []),
    ({'keys': True}, '', []),
])
def test_restart_reasons_are_what_changed_of_a_running_gateway(changed, state, reasons):
    assert plan.restart_reasons(changed, state) == reasons


def test_a_fresh_host_in_check_mode_would_start_and_nothing_is_asked_of_a_release_not_installed():
    wrote = {'release', 'launcher', 'workers', 'keys', 'unit', 'user', 'group', 'ansible.builtin.file'}
    host = RecordedHost(unit='fresh', changed=wrote)
    facts, res = run(host, check_mode=True)
    names = [c[0] for c in host.calls]
    assert 'llmops.sglang.sglang_gateway_release' not in names  # the dry run installed nothing to ask
    # the unit it would write is not there to start; the workers and the smoke request need a serving gateway
    assert not [c for c in host.calls if c[0].endswith('systemd_service') and 'state' in c[1]]
    assert 'llmops.sglang.sglang_gateway_workers' not in names and 'llmops.sglang.sglang_smoke' not in names
    assert (res.started, res.restarted, res.status, res.check_mode) == (True, False, 'not checked', True)
    assert res.msg == 'smg 1.13.0 at http://127.0.0.1:30080, 0 worker(s) in rotation (would start; dry run, check mode: nothing was changed)'
    assert facts.reasons == []


def test_a_serving_host_in_check_mode_would_restart_with_its_reasons():
    host = RecordedHost(unit='active', changed={'release', 'unit'}, workers=dict(IN_ROTATION, changed=False, added=[]))
    facts, res = run(host, check_mode=True, version='1.14.0')
    assert 'llmops.sglang.sglang_gateway_release' not in [c[0] for c in host.calls]
    assert (res.restarted, res.reasons, res.release) == (True, ['release', 'unit'], 'smg 1.14.0')
    assert '(would restart: release, unit changed; dry run, check mode: nothing was changed)' in res.msg
    assert host.lines == ['would restart smg.service: release, unit changed']
    # a serving gateway is asked what it would change (the module runs in check mode)
    assert facts.workers['in_rotation'] == 2 and res.status == 'ready'


def test_a_real_first_run_starts_registers_and_sends_one_request():
    host = RecordedHost(unit='fresh', changed={'release', 'launcher', 'workers', 'keys', 'unit'})
    facts, res = run(host)
    start = [c for c in host.calls if c[0].endswith('systemd_service') and 'state' in c[1]]
    assert [c[1] for c in start] == [{'name': 'smg.service', 'state': 'started', 'enabled': True, 'daemon_reload': True}]
    assert (res.started, res.restarted, res.changed, res.status, res.in_rotation) == (True, False, True, 'ready', 2)
    assert res.added == [w['url'] for w in WORKERS] and res.smoke['ok']
    assert res.msg == ('smg 1.13.0 at http://127.0.0.1:30080, 2 worker(s) in rotation (started); '
                       'request through it answered in 0.41s')
    # the keys went with no_log, and only the keys
    assert [c[1]['dest'] for c in host.calls if c[2]] == ['/etc/smg/smg.secret.json']
    assert facts.release_version == '1.13.0'


def test_a_changed_worker_set_is_applied_live_without_a_restart():
    host = RecordedHost(unit='active', changed={'workers'}, workers=dict(IN_ROTATION, added=['http://10.213.0.12:30000']))
    _facts, res = run(host)
    assert [c[1]['state'] for c in host.calls if c[0].endswith('systemd_service') and 'state' in c[1]] == ['started']
    assert (res.restarted, res.started, res.changed, res.reasons) == (False, False, True, [])
    assert res.added == ['http://10.213.0.12:30000'] and '(not restarted)' in res.msg


def test_a_changed_unit_restarts_a_running_gateway_once():
    host = RecordedHost(unit='active', changed={'unit'})
    _facts, res = run(host)
    restarts = [c[1] for c in host.calls if c[0].endswith('systemd_service') and 'state' in c[1]]
    assert restarts == [{'name': 'smg.service', 'state': 'restarted', 'enabled': True, 'daemon_reload': True}]
    assert '2 worker(s) in rotation (restarted: unit changed)' in res.msg


def test_an_unchanged_gateway_is_not_restarted_and_the_result_is_unchanged():
    host = RecordedHost(unit='active', changed=(), workers=dict(IN_ROTATION, changed=False, added=[]))
    _facts, res = run(host)
    assert (res.changed, res.restarted, res.started, res.status) == (False, False, False, 'ready')


def test_an_empty_admin_key_is_refused_before_anything_runs():
    host = RecordedHost()
    ctx = steps.GatewayContext(inputs=GatewayInputs.from_vars({'sglang_gateway_admin_key': ''}), facts=GatewayFacts(), host=host,
                               check_mode=False)
    with pytest.raises(steps.StepFailed, match='sglang_gateway_admin_key is empty') as failed:
        steps.step_install(ctx)
    assert host.calls == [] and failed.value.to_json('install')['what'] == 'inputs'


def test_a_release_without_the_control_plane_api_is_refused_before_the_unit_keys_or_workers_are_touched():
    host = RecordedHost(unit='active', changed={'release'}, release=REFUSED)
    with pytest.raises(steps.StepFailed, match='sglang-router 0.3.0 has no control-plane worker API'):
        run(host, package='sglang-router', version='0.3.0')
    assert host.touched() == []


def test_the_result_of_a_failed_step_says_which():
    facts = GatewayFacts(failure={'step': 'install', 'what': 'inputs', 'msg': 'sglang_gateway_admin_key is empty'})
    res = plan.gateway_result(GatewayInputs(), facts, False)
    assert (res.status, res.started, res.msg) == ('failed', False, 'failed at step install: sglang_gateway_admin_key is empty')


def test_the_wheelhouse_is_copied_and_pip_installs_from_it_only():
    host = RecordedHost(unit='active')
    run(host, names=('install',), wheelhouse='/ctl/wheels', pip_extra_args=['--no-deps'])
    copy = [c for c in host.calls if c[0] == 'ansible.builtin.copy'][0][1]
    pip = [c for c in host.calls if c[0] == 'ansible.builtin.pip'][0][1]
    assert (copy['src'], copy['dest']) == ('/ctl/wheels/', '/opt/smg/wheelhouse/')
    assert pip == {'name': 'smg==1.13.0', 'virtualenv': '/opt/smg/venv-smg-1.13.0', 'virtualenv_command': '/usr/bin/python3 -m venv',
                   'extra_args': '--no-deps --no-index --find-links /opt/smg/wheelhouse'}


@pytest.mark.parametrize('mode, hardening, fixture', [('regular', True, 'role-0.3-unit-regular.service'),
                                                      ('pd', True, 'role-0.3-unit-pd.service'),
                                                      ('regular', False, 'role-0.3-unit-no-hardening.service')])
def test_the_unit_is_the_one_the_roles_template_wrote(mode, hardening, fixture):
    # same text as before: upgrading the collection restarts no gateway
    values = {'sglang_gateway_hardening': hardening, 'sglang_gateway_args': {'foo-bar': 'x%y', 'sw': True}}
    text = plan.unit_text(GatewayInputs.from_vars(values), mode, 'Ansible managed')
    assert text == (FIXTURES / fixture).read_text()


def test_the_keys_file_and_the_workers_file_are_as_before_and_no_key_reaches_the_inputs_json():
    i = inputs(control_plane_keys=['ci:ci:admin:k2'])
    assert json.loads(plan.secret_text(i)) == {'api_key': 'client-key',
                                               'control_plane_api_keys': ['ops:llmops.sglang:admin:adm-key', 'ci:ci:admin:k2']}
    assert json.loads(plan.secret_text(inputs(api_key='')))['api_key'] is None
    assert plan.workers_text('regular', WORKERS).endswith('}\n') and json.loads(plan.workers_text('pd', []))['mode'] == 'pd'
    assert 'adm-key' not in json.dumps(i.to_json()) and 'client-key' not in json.dumps(i.to_json())


def test_inputs_take_the_roles_types():
    i = GatewayInputs.from_vars({'sglang_gateway_port': '30081', 'sglang_gateway_smoke': 'no', 'sglang_gateway_args': None})
    assert (i.port, i.smoke, i.args, i.name) == (30081, False, {}, 'smg')
    with pytest.raises(ValueError):
        GatewayInputs.from_vars({'sglang_gateway_port': 'eighty'})


def test_a_number_in_a_list_input_reaches_pip_and_the_keys_file_as_text():
    # The role's spec (list of str) lets YAML's 60 through as a number; pip's quoting and the keys file want text.
    i = inputs(pip_extra_args=['--timeout', 60], control_plane_keys=['ci:ci:admin:k2'])
    assert i.pip_extra_args == ('--timeout', '60')
    assert plan.pip_args(i)['extra_args'] == '--timeout 60'
    assert json.loads(plan.secret_text(i))['control_plane_api_keys'][1] == 'ci:ci:admin:k2'
