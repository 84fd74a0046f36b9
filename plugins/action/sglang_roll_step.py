# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""llmops.sglang.sglang_roll_step: the controller's part of a rolling change - which workers of a batch go back into
rotation, whether the roll goes on, and the table at the end."""

from __future__ import annotations

import json
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmops.sglang.plugins.action.sglang_run_report import write_rows
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._roll import WorkerOutcome, judge, worker_outcome
from ansible_collections.llmops.sglang.plugins.plugin_utils._roll_table import render_roll

display = Display()

ARGUMENT_SPEC = dict(
    phase=dict(type='str', required=True, choices=['return', 'judge', 'report']),
    batch=dict(type='dict'),
    out=dict(type='dict', default={}),
    outcomes=dict(type='list', elements='dict', default=[]),
    back=dict(type='dict', default={}),
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


def outcome_from(data):
    return WorkerOutcome(**dict((k, v) for k, v in data.items() if k in WorkerOutcome.__dataclass_fields__))


class ActionModule(ActionBase):
    """Controller only: no module runs on a host."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        task_vars = task_vars or {}
        if args['phase'] == 'return':
            result.update(self.back_into_rotation(args, task_vars))
        elif args['phase'] == 'judge':
            result.update(self.judge(args))
        else:
            result.update(self.report(args))
        result['changed'] = False
        return result

    def back_into_rotation(self, args, task_vars):
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
        return dict(outcomes=[o.to_json() for o in outcomes],
                    workers=[dict((k, w[k]) for k in ('url', 'worker_type', 'bootstrap_port') if w.get(k) is not None)
                             for w in workers], urls=[w['url'] for w in workers])

    def judge(self, args):
        outcomes = [outcome_from(o) for o in args['outcomes']]
        action, why, take_out = judge(outcomes, args['back'])
        for out in outcomes:
            display.display('%s: %s (batch %d)%s' % (out.name, out.status, out.batch, ': ' + out.reason if out.reason else ''))
        rows = [o.to_json() for o in outcomes]
        # carried to the next batch (and the report) as a fact of the gateway's host
        state = {'stopped': action == 'stop', 'reason': why if action == 'stop' else '', 'rows': list(args['rows']) + rows}
        return dict(rows=rows, stop=action == 'stop', reason=why, take_out=take_out, ansible_facts={'sglang_roll_state': state})

    def report(self, args):
        plan = args['plan'] or {}
        rows = [outcome_from(r) for r in args['rows']]
        seen = set(r.name for r in rows)
        for batch in plan.get('batches') or []:
            for worker in batch.get('workers') or []:
                if worker['name'] not in seen:
                    rows.append(WorkerOutcome(worker['name'], worker['url'], batch['index'],
                                              reason='not reached: the roll stopped before batch %d' % batch['index']
                                              if args['stopped'] else 'not reached'))
        data = [r.to_json() for r in rows]
        display.display(render_roll(rows, args['stopped']))
        out = dict(rows=data, stopped=bool(args['stopped']), reason=args['stopped'])
        if args['path']:
            write_rows(args['path'], data)
            out['path'] = args['path']
        if not isinstance(plan, dict):
            raise AnsibleActionFail('plan must be the registered result of llmops.sglang.sglang_roll_plan: %s' % json.dumps(plan)[:200])
        return out
