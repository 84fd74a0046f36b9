# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The steps of the sglang_gateway role (llmops.sglang.sglang_gateway_deploy): each runs the modules its plan names on
the gateway's host and records what they did in ``GatewayFacts``; what to do is decided by _gateway_plan.py.

Controller side only. The host is anything with ``module(name, args, secret=False, read_only=False)``,
``action(name, args)`` and ``say(text, detail=False)`` (plugin_utils/_action_host.py; a recorded stand-in in the unit
tests). A step that cannot go on raises ``StepFailed``; the action plugin records it in the result and fails the task,
so nothing after it is touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.llmops.sglang.plugins.plugin_utils import _gateway_plan as plan
from ansible_collections.llmops.sglang.plugins.plugin_utils._gateway_plan import GatewayFacts, GatewayInputs


class StepFailed(Exception):
    """A step that cannot go on: why, and the module's result that said so."""

    def __init__(self, msg: str, what: str, result: Optional[Dict[str, Any]] = None):
        super().__init__(msg)
        self.msg, self.what, self.result = msg, what, result

    def to_json(self, step: str) -> Dict[str, Any]:
        return {'step': step, 'what': self.what, 'msg': self.msg}


@dataclass
class GatewayContext:
    """One step on one host: the inputs, the facts so far, the host, and what the step changed."""

    inputs: GatewayInputs
    facts: GatewayFacts
    host: Any
    check_mode: bool
    # the inventory's workers (llmops.sglang.sglang_gateway_fleet's read_fleet, on the controller): (mode, api_workers)
    read_fleet: Callable[[GatewayInputs], Any] = lambda inputs: ('regular', [])
    # the launcher's text (the role's files/gateway_launch.py), read when the configure step writes it
    launcher: Callable[[], str] = lambda: ''
    managed: str = 'Ansible managed'
    changed: bool = False
    ran: List[str] = field(default_factory=list)
    warnings: List[Any] = field(default_factory=list)
    diffs: List[Dict[str, Any]] = field(default_factory=list)

    def run(self, what: str, name: str, args: Dict[str, Any], secret: bool = False, read_only: bool = False) -> Dict[str, Any]:
        """Run a module; its change counts as the step's; its failure stops the step, naming WHAT."""
        res = self.host.module(name, args, secret=secret, read_only=read_only)
        return self._took(what, name, res)

    def _took(self, what: str, name: str, res: Dict[str, Any]) -> Dict[str, Any]:
        self.ran.append(what)
        if res.get('failed') or res.get('unreachable'):
            raise StepFailed('%s (%s) failed: %s' % (what, name, res.get('msg') or 'no message'), what, res)
        self.changed = self.changed or bool(res.get('changed'))
        self.warnings.extend(res.get('warnings') or [])
        diff = res.get('diff')
        if diff and res.get('changed'):
            self.diffs.extend(diff if isinstance(diff, list) else [diff])
        return res


def step_install(ctx: GatewayContext) -> None:
    """Refuse an empty admin key, read the workers, install the release, refuse one without the control-plane API."""
    i = ctx.inputs
    why = plan.refusal(i)
    if why:
        raise StepFailed(why, 'inputs')
    try:
        ctx.facts.mode, ctx.facts.api_workers = ctx.read_fleet(i)
    except (ValueError, TypeError) as exc:
        raise StepFailed('the workers of the inventory: %s' % exc, 'workers') from exc
    if i.wheelhouse:
        copied = ctx.host.action('ansible.builtin.copy', {'src': i.wheelhouse.rstrip('/') + '/', 'dest': i.wheelhouse_dest + '/',
                                                          'mode': '0644', 'directory_mode': '0755'})
        ctx._took('wheelhouse', 'ansible.builtin.copy', copied)
    pip = ctx.run('release', 'ansible.builtin.pip', plan.pip_args(i))
    ctx.facts.changed_files['release'] = bool(pip.get('changed'))
    # Before the unit, the keys or the workers are touched: the running gateway uses another venv, if any.
    if plan.check_release(ctx.check_mode, bool(pip.get('changed'))):
        release = ctx.run('control-plane API', 'llmops.sglang.sglang_gateway_release', {'venv': i.venv, 'package': i.package})
        ctx.facts.release_version = release.get('version')


def step_configure(ctx: GatewayContext) -> None:
    """Account, directories, launcher, workers, keys and unit; then restart for the plan's reasons, or start."""
    i, f = ctx.inputs, ctx.facts
    p = plan.paths(i)
    ctx.run('group', 'ansible.builtin.group', {'name': i.group, 'system': True})
    ctx.run('user', 'ansible.builtin.user', {'name': i.user, 'group': i.group, 'system': True, 'shell': '/usr/sbin/nologin',
                                             'home': i.working_directory, 'create_home': False})
    ctx.run('configuration directory', 'ansible.builtin.file', {'path': i.config_dir, 'state': 'directory', 'owner': 'root',
                                                                'group': 'root', 'mode': '0755'})
    ctx.run('working directory', 'ansible.builtin.file', {'path': i.working_directory, 'state': 'directory', 'owner': i.user,
                                                          'group': i.group, 'mode': '0750'})
    # The workers file is read at the gateway's start only: a changed worker set is applied through the control plane
    # (the workers step), without a restart; a change of mode is on the unit's command line too (--mode pd).
    files = (('launcher', p.launcher, ctx.launcher(), '0644', False, None),
             ('workers', p.workers_file, plan.workers_text(f.mode, f.api_workers), '0644', False, None),
             ('keys', p.secret_file, plan.secret_text(i), '0600', True, None),
             ('unit', p.unit, plan.unit_text(i, f.mode, ctx.managed), '0644', False, 'systemd-unit'))
    for what, dest, content, mode, secret, verify in files:
        args = {'dest': dest, 'content': content, 'owner': 'root', 'group': 'root', 'mode': mode}
        if verify:
            args['verify'] = verify
        f.changed_files[what] = bool(ctx.run(what, 'llmops.sglang.sglang_config_file', args, secret=secret).get('changed'))
    unit = i.name + '.service'
    state = ctx.run('unit state', 'ansible.builtin.systemd_service', {'name': unit}, read_only=True)
    f.active_state = str((state.get('status') or {}).get('ActiveState') or '')
    f.reasons = plan.restart_reasons(f.changed_files, f.active_state)
    if f.reasons:
        ctx.host.say('%s %s: %s changed' % ('would restart' if ctx.check_mode else 'restarting', unit, ', '.join(f.reasons)))
        ctx.run('restart', 'ansible.builtin.systemd_service', {'name': unit, 'state': 'restarted', 'enabled': True, 'daemon_reload': True})
        f.restarted = True
    elif plan.start_step(f.reasons, ctx.check_mode, f.changed_files.get('unit', False)):
        start = {'name': unit, 'state': 'started', 'enabled': True, 'daemon_reload': f.changed_files.get('unit', False)}
        started = ctx.run('start', 'ansible.builtin.systemd_service', start)
        f.started = bool(started.get('changed'))
        if f.started:
            ctx.host.say('%s %s' % ('would start' if ctx.check_mode else 'started', unit))


def step_workers(ctx: GatewayContext) -> None:
    """Bring the gateway's workers to the inventory's (live), wait until every one is in rotation, send one request."""
    i, f = ctx.inputs, ctx.facts
    if not plan.talks_to_gateway(ctx.check_mode, f.running):
        return
    p = plan.paths(i)
    args: Dict[str, Any] = {'url': p.url, 'admin_key': i.admin_key, 'metrics_url': p.metrics_url, 'workers': f.api_workers,
                            'exclusive': True, 'timeout': i.wait_timeout}
    if i.api_key:
        args['worker_api_key'] = i.api_key
    f.workers = ctx.run('workers', 'llmops.sglang.sglang_gateway_workers', args)
    if i.smoke:
        smoke: Dict[str, Any] = {'url': p.url, 'timeout': i.smoke_timeout}
        if i.api_key:
            smoke['api_key'] = i.api_key
        f.smoke = ctx.run('smoke request', 'llmops.sglang.sglang_smoke', smoke)


STEPS: Dict[str, Callable[[GatewayContext], None]] = {
    'install': step_install,
    'configure': step_configure,
    'workers': step_workers,
}
