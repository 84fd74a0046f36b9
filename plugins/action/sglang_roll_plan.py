# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""llmops.sglang.sglang_roll_plan: the batches of a rolling change behind a gateway, or the refusal of its input."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.sglang.plugins.action.sglang_gateway_fleet import read_fleet
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import parse_worker
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._roll import (
    SETTING_KINDS, RollInputError, RollSettings, check_settings, plan, preview)

ARGUMENT_SPEC = dict(
    groups=dict(type='dict', required=True),
    gateway=dict(type='list', elements='dict', required=True),
    batch=dict(type='raw', default=1),
    # checked by check_settings, which names the playbook's variable (sglang_roll_<option>) in its refusal
    canary=dict(type='raw', default=True),
    min_in_service=dict(type='raw', default=1),
    drain_timeout=dict(type='raw', default=120),
    drain_policy=dict(type='raw', default='fail'),
    return_timeout=dict(type='raw', default=120),
    only=dict(type='list', elements='str', default=[]),
)


# What the roll's first play registered on each worker host: the sglang_service role's plan step (plugins/action/sglang_deploy.py).
PREVIEW = 'sglang_roll_preview'


def previews(fleet, hostvars):
    """Worker name -> what its deploy plan said before the roll (None when its hosts registered nothing)."""
    results = {}
    for worker in fleet:
        for host in worker.hosts:
            known = hostvars[host] if host in hostvars else {}
            results[host] = known.get(PREVIEW) if PREVIEW in known else None
    return dict((w.name, preview(w, results)) for w in fleet)


def gateway_workers(items):
    """The ``workers`` of llmops.sglang.sglang_gateway_workers back as GatewayWorker entries."""
    out = []
    for item in items:
        worker = parse_worker({'url': item.get('url'), 'id': item.get('id'), 'worker_type': item.get('worker_type'),
                               'status': item.get('status'), 'is_healthy': item.get('healthy'), 'load': item.get('load'),
                               'labels': {'version': item.get('version')}, 'bootstrap_port': item.get('bootstrap_port')})
        worker.circuit = item.get('circuit')
        out.append(worker)
    return out


class ActionModule(ActionBase):
    """Controller only: no module runs on a host."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        gateways = list((task_vars or {}).get('ansible_play_hosts_all') or [])
        if len(gateways) > 1:
            raise AnsibleActionFail('refusing the rolling change, nothing was touched: the play has %d gateway hosts (%s); a roll '
                                    'goes through one gateway: limit the run to one (--limit) or give each gateway and its '
                                    'workers an inventory of their own' % (len(gateways), ', '.join(gateways)))
        try:
            fleet = read_fleet(task_vars or {}, dict((k, str(v or '')) for k, v in args['groups'].items()))
            checked = check_settings(dict((name, args[name]) for name in SETTING_KINDS))
            settings = RollSettings(batch=args['batch'], canary=checked['canary'], min_in_service=checked['min_in_service'],
                                    only=list(args['only']))
            rolled = plan(fleet, gateway_workers(args['gateway']), settings, previews(fleet, (task_vars or {}).get('hostvars') or {}))
        except (RollInputError, ValueError, TypeError) as exc:
            raise AnsibleActionFail('refusing the rolling change, nothing was touched: %s' % exc) from exc
        data = rolled.to_json()
        result.update(changed=False, **data)
        result['msg'] = '%d batch(es): %s%s' % (len(data['batches']), '; '.join(
            '%s%s' % ('canary ' if b['canary'] else '', ', '.join(b['names'])) for b in data['batches']),
            '; unchanged, left in rotation: %s' % ', '.join(w['name'] for w in data['unchanged']) if data['unchanged'] else '')
        return result
