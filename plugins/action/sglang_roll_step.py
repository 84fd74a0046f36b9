# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""llmops.sglang.sglang_roll_step: the controller's part of a rolling change - a batch out of rotation (or the removal
the previous batch's return already made) and which of its hosts may change, which workers of a batch go back into
rotation (and putting them back, with llmops.sglang.sglang_gateway_rotation run on the gateway's host), whether the roll
goes on (and, when it does, taking the next batch out of rotation and draining it in the same task), and the table at
the end."""

from __future__ import annotations

import json
import time

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmops.sglang.plugins.action.sglang_run_report import write_rows
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._roll import (
    WorkerOutcome, change_drains, cleared_hosts, event_text, judge, may_go_on, report_rows, taken_out_before, worker_outcome)
from ansible_collections.llmops.sglang.plugins.plugin_utils._roll_table import render_roll

display = Display()

ARGUMENT_SPEC = dict(
    phase=dict(type='str', required=True, choices=['out', 'return', 'report']),
    batch=dict(type='dict'),
    previous=dict(type='dict', default={}),
    out=dict(type='dict', default={}),
    gateway=dict(type='dict', default={}, options=dict(
        url=dict(type='str'),
        admin_key=dict(type='str', no_log=True),
        api_key=dict(type='str', no_log=True),
        timeout=dict(type='float', default=120.0),
    )),
    rotation=dict(type='dict', default={}, options=dict(
        min_in_service=dict(type='int', default=0),
        drain=dict(type='bool', default=True),
        drain_timeout=dict(type='float', default=120.0),
        drain_policy=dict(type='str', default='fail', choices=['wait', 'proceed', 'fail']),
    )),
    next_batch=dict(type='dict', default={}),
    plan=dict(type='dict'),
    rows=dict(type='list', elements='dict', default=[]),
    stopped=dict(type='str', default=''),
    path=dict(type='path'),
)

# What each host of a batch registered: the sglang_service role's public result, and the failure roll_batch.yml caught.
FACTS = {'result': 'sglang_service_result', 'failure': 'sglang_roll_failure'}


def host_facts(hostvars, hosts):
    out = {}
    for host in hosts:
        known = hostvars[host] if host in hostvars else {}
        out[host] = dict((key, known[var]) for key, var in FACTS.items() if var in known)
    return out


def api_worker(worker):
    """A worker of a batch as llmops.sglang.sglang_gateway_rotation takes it."""
    return dict((k, worker[k]) for k in ('url', 'worker_type', 'bootstrap_port') if worker.get(k) is not None)


def next_workers(batch):
    return [api_worker(w) for w in (batch or {}).get('workers') or []]


def say_removal(batch, res):
    """One line when a batch leaves rotation, wherever that happens (its own out step or the previous return)."""
    display.display('batch %s (%s): %s' % (batch.get('index'), ', '.join(batch.get('names') or []),
                                           res.get('msg') or 'taken out of rotation'))


def outcome_from(data):
    return WorkerOutcome(**dict((k, v) for k, v in data.items() if k in WorkerOutcome.__dataclass_fields__))


class ActionModule(ActionBase):
    """Decides on the controller; with phase ``return`` it puts the batch back through modules run on the gateway's host
    (the task's host), in one task: the decision, the rotation and the verdict."""

    TRANSFERS_FILES = False
    # check mode: the report alone (a dry run's table); the out and return steps change the gateway and are skipped
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        task_vars = task_vars or {}
        if self._task.check_mode and args['phase'] != 'report':
            result.update(skipped=True, changed=False,
                          msg='check mode: a rolling change is only planned; nothing leaves or enters rotation')
        elif args['phase'] == 'out':
            result.update(self.take_out(args, task_vars))
        elif args['phase'] == 'return':
            result.update(self.put_back(args, task_vars))
        else:
            result.update(self.report(args, dry_run=self._task.check_mode))
        return result

    def _module(self, name, module_args, task_vars):
        return self._execute_module(module_name='llmops.sglang.%s' % name, module_args=module_args, task_vars=task_vars)

    @staticmethod
    def _gateway(args):
        # an empty key is no key (the playbook passes '' for an unset sglang_gateway_api_key)
        gateway = dict((k, v) for k, v in (args['gateway'] or {}).items() if v not in (None, ''))
        if not gateway.get('url'):
            raise AnsibleActionFail('phase %s needs gateway.url (the gateway of the roll)' % args['phase'])
        return gateway

    def take_out(self, args, task_vars):
        """The batch out of rotation, confirmed and drained (sglang_gateway_rotation state=out on the task's host), unless
        the previous batch's return already did it (``previous``'s ``next_out``); and the hosts whose change may run. A
        refusal or a failed drain is kept in the result, not raised: the batch leaves its servers untouched and its return
        step stops the roll."""
        batch = args['batch'] or {}
        removal = taken_out_before(batch, args['previous'])
        reused = removal is not None
        if not reused:
            removal = self.removal(batch, args['rotation'], self._gateway(args), task_vars)
            say_removal(batch, removal)
        return dict(removal, cleared_hosts=cleared_hosts(batch, removal), reused=reused,
                    change_drains=change_drains(batch, removal, args['rotation']),
                    changed=bool(removal.get('changed')) and not reused)

    def put_back(self, args, task_vars):
        """Decide who serves, put them back and prove it (sglang_gateway_rotation state=in), judge the batch, and keep a
        worker that did not return out of rotation (sglang_gateway_workers state=absent)."""
        gateway = self._gateway(args)
        decided = self.decide(args, task_vars)
        nxt, rotation = args['next_batch'] or {}, args['rotation']
        # the next batch rides on the same call when nothing but the return can stop the roll any more: the module takes
        # it out only once every worker put back is in rotation and proven (the rest of judge's conditions)
        then_out = next_workers(nxt) if decided['workers'] and may_go_on(decided['outcomes']) else []
        back = {'verdict': {'done': True}}
        if decided['workers']:
            options = dict(
                url=gateway['url'], admin_key=gateway.get('admin_key'), api_key=gateway.get('api_key'),
                worker_api_key=gateway.get('api_key'), workers=decided['workers'], state='in',
                timeout=gateway.get('timeout') or 120.0)
            if then_out:
                options.update(then_out=then_out, **rotation)
            back = self._module('sglang_gateway_rotation', options, task_vars)
        then = back.pop('then', None)
        verdict = self.judge(decided['outcomes'], back, args['rows'])
        changed = bool(back.get('changed'))
        if verdict['take_out']:
            gone = self._module('sglang_gateway_workers', dict(
                url=gateway['url'], admin_key=gateway.get('admin_key'), workers=verdict['take_out'], state='absent',
                wait=False), task_vars)
            changed = changed or bool(gone.get('changed'))
        back = dict((k, v) for k, v in back.items() if k not in ('invocation', '_ansible_no_log'))
        out = dict(verdict, back=back, changed=changed)
        if then is not None and verdict['stop']:
            # not reached: the module takes the next batch out only once this one is back and proven, which is all the
            # verdict still waited for; were it reached, the next batch (drained, never changed) goes back at once
            self._module('sglang_gateway_rotation', dict(
                url=gateway['url'], admin_key=gateway.get('admin_key'), worker_api_key=gateway.get('api_key'),
                workers=next_workers(nxt), state='in', prove=False, timeout=gateway.get('timeout') or 120.0), task_vars)
        if not verdict['stop'] and nxt:
            if then is None:  # not taken out by the call above (the batch put nothing back): a call of its own
                then = self.removal(nxt, rotation, gateway, task_vars)
            out['next_out'] = self.kept(nxt, then)
            out['changed'] = changed or bool(out['next_out']['result'].get('changed'))
        return out

    @staticmethod
    def kept(batch, res):
        """The next batch's removal as that batch's out step reads it (``previous``), and its line on the screen."""
        res = dict((k, v) for k, v in res.items() if k not in ('invocation', '_ansible_no_log', 'failed'))
        say_removal(batch, res)
        return dict(index=batch.get('index'), result=res)

    def removal(self, batch, rotation, gateway, task_vars):
        """BATCH out of rotation and drained (sglang_gateway_rotation state=out on the task's host): what the module
        returned, a refusal, a failed drain or an unreachable host included (then no drains: nothing changes)."""
        try:
            res = self._module('sglang_gateway_rotation', dict(
                url=gateway['url'], admin_key=gateway.get('admin_key'), worker_api_key=gateway.get('api_key'),
                workers=[api_worker(w) for w in batch.get('workers') or []], state='out', **rotation), task_vars)
        except AnsibleError as err:
            res = dict(msg='the gateway\'s host could not take the batch out: %s' % err, drains=[], removed=[])
        return dict((k, v) for k, v in res.items() if k not in ('invocation', '_ansible_no_log', 'failed'))

    def decide(self, args, task_vars):
        batch = args['batch'] or {}
        hostvars = task_vars.get('hostvars') or {}
        facts = host_facts(hostvars, batch.get('hosts') or [])
        removal = args['out'] or {}
        drains = dict((d.get('url'), d) for d in removal.get('drains') or [])
        taken_out_at = removal.get('at') if removal.get('drains') else None
        changed_for = round(time.time() - float(taken_out_at), 1) if taken_out_at else None
        outcomes = [worker_outcome(w, batch.get('index', 0), drains.get(w['url']) or {}, facts, changed_for)
                    for w in batch.get('workers') or []]
        for out in outcomes:
            if out.drain is None and removal.get('msg'):
                out.reason = 'not taken out of rotation: %s' % removal['msg']
        serving = [o for o in outcomes if o.serves]
        workers = [w for w in batch.get('workers') or [] if any(o.name == w['name'] for o in serving)]
        return dict(outcomes=outcomes, workers=[api_worker(w) for w in workers])

    @staticmethod
    def judge(outcomes, back, earlier_rows):
        action, why, take_out = judge(outcomes, back)
        for out in outcomes:
            text = event_text(out)
            display.display('%s: %s (batch %d)%s' % (out.name, out.status, out.batch, ': ' + text if text else ''))
        rows = [o.to_json() for o in outcomes]
        # carried to the next batch (and the report) as a fact of the gateway's host
        state = {'stopped': action == 'stop', 'reason': why if action == 'stop' else '', 'rows': list(earlier_rows) + rows}
        return dict(rows=rows, stop=action == 'stop', reason=why, take_out=take_out, ansible_facts={'sglang_roll_state': state})

    def report(self, args, dry_run=False):
        plan = args['plan'] or {}
        if not isinstance(plan, dict):
            raise AnsibleActionFail('plan must be the registered result of llmops.sglang.sglang_roll_plan: %s' % json.dumps(plan)[:200])
        rows = report_rows(plan, [outcome_from(r) for r in args['rows']], args['stopped'], dry_run=dry_run)
        data = [r.to_json() for r in rows]
        display.display(render_roll(rows, args['stopped'], dry_run=dry_run))
        out = dict(rows=data, stopped=bool(args['stopped']), reason=args['stopped'], changed=False, dry_run=dry_run)
        if args['path']:
            write_rows(args['path'], data)
            out['path'] = args['path']
        return out
