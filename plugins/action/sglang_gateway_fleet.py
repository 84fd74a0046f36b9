# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""llmops.sglang.sglang_gateway_fleet: the workers behind a gateway, read from the inventory on the controller."""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._roll import (
    RollInputError, fleet_from_inventory, gateway_mode, host_views, worker_groups)

ARGUMENT_SPEC = dict(
    groups=dict(type='dict', required=True),
)


def read_fleet(task_vars, names):
    """The FleetWorker list of the groups named per worker type (raises RollInputError)."""
    groups = dict(task_vars.get('groups') or {})
    hostvars = task_vars.get('hostvars') or {}
    kinds = worker_groups(groups, names)
    views = host_views(hostvars, sorted(set(h for members in kinds.values() for h in members)))
    ranks = set(h for view in views.values() for h in groups.get(str(view.get('sglang_service_deployment_group') or ''), []))
    views.update(host_views(hostvars, sorted(ranks - set(views))))
    return fleet_from_inventory(kinds, groups, views)


class ActionModule(ActionBase):
    """Controller only: no module runs on a host."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        try:
            fleet = read_fleet(task_vars or {}, dict((k, str(v or '')) for k, v in args['groups'].items()))
        except (RollInputError, ValueError, TypeError) as exc:
            raise AnsibleActionFail(str(exc)) from exc
        result.update(changed=False, workers=[w.to_json() for w in fleet], api_workers=[w.api_worker() for w in fleet],
                      mode=gateway_mode(fleet),
                      hosts=[h for w in fleet for h in w.hosts], urls=[w.url for w in fleet],
                      msg='%d worker(s): %s' % (len(fleet), ', '.join('%s %s' % (w.name, w.url) for w in fleet)))
        return result
