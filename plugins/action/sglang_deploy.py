# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller side of llmops.sglang.sglang_deploy: the steps of the sglang_service role, each returning the role's one
public result (registered as sglang_service_result)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_result import Facts, Server, service_result

display = Display()

ARGUMENT_SPEC = dict(
    step=dict(type='str', required=True, choices=['result']),
)


def _registered(task_vars, name):
    value = task_vars.get(name)
    return value if isinstance(value, dict) and value and not value.get('skipped') else None


class ActionModule(ActionBase):
    """Runs one step of the role's deployment on this host and returns the role's result."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def _value(self, task_vars, name, default=None):
        """A role variable, templated; ``default`` when it is not defined or cannot be templated yet (a result of a step
        that did not run)."""
        if name not in task_vars:
            return default
        try:
            return self._templar.template(task_vars[name])
        except Exception:  # pylint: disable=broad-except
            return default

    def _facts_of_this_run(self, task_vars):
        """What the role's tasks registered in this run, as Facts."""
        stamp = _registered(task_vars, 'sglang_service_deployment')
        unchanged = bool(self._value(task_vars, '__sglang_service_unchanged', False))
        if unchanged:
            # what an earlier include of the role registered is not this run's
            return Facts(stamp=stamp, unchanged=True)
        gate = _registered(task_vars, 'sglang_service_gate')
        if gate and gate.get('status') == 'regressed' and not gate.get('rolled_back'):
            gate = dict(gate, failed=self._value(task_vars, 'sglang_service_benchmark_policy') == 'fail')
        facts = Facts(
            stamp=stamp, unchanged=unchanged,
            deploy_reasons=list((stamp or {}).get('reasons') or []) if not unchanged else [],
            restart_reasons=list(self._value(task_vars, '__sglang_service_deploy_reasons', []) or []) if not unchanged else [],
            startable=bool(self._value(task_vars, '__sglang_service_startable', True)),
            restart=_registered(task_vars, '__sglang_service_restart'),
            wait=_registered(task_vars, 'sglang_service_wait_result'),
            smoke=_registered(task_vars, 'sglang_service_smoke_result'),
            history=_registered(task_vars, 'sglang_service_start_record'),
            gate=gate, benchmark=_registered(task_vars, '__sglang_service_bench_last'))
        failure_text = self._value(task_vars, '__sglang_service_failure_text')
        if gate and gate.get('rolled_back') or failure_text:
            failed = self._value(task_vars, '__sglang_service_failed_result', {}) or {}
            status = 'regressed' if (gate or {}).get('status') == 'regressed' else failed.get('status') or 'failed'
            facts.rollback = {'msg': '%s, rolled back' % (failure_text or (gate or {}).get('change')), 'status': status,
                              'after': (gate or {}).get('after_rollback')}
        facts.changed = bool(not unchanged and (facts.restart_reasons or _registered(task_vars, '__sglang_service_restart_decision')))
        return facts

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, _args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        facts = self._facts_of_this_run(task_vars)
        multinode = bool(self._value(task_vars, '__sglang_service_multinode', False))
        server = Server(name=str(self._value(task_vars, 'sglang_service_name', 'sglang')),
                        url=self._value(task_vars, '__sglang_service_url'),
                        node_rank=int(self._value(task_vars, '__sglang_service_node_rank', 0) or 0),
                        deployment=self._value(task_vars, 'sglang_service_deployment_group') if multinode else None)
        # The role's last step: its "changed" is the whole run's, so the PLAY RECAP counts a change on this host exactly
        # when the result says it changed.
        public = service_result(facts, server, bool(self._task.check_mode))
        if public.outcome == 'unchanged' and facts.stamp:
            stamp = facts.stamp
            serving = ', serving: GET /health 200' if stamp.get('health') else ''
            line = ('%s: unchanged since %s (same inputs, files, SGLang %s and unit invocation)%s; nothing installed, '
                    'configured or restarted')
            display.display(line % (task_vars.get('inventory_hostname'), stamp.get('recorded_at'), stamp.get('sglang_version'),
                                    serving))
        result.update(public.to_json())
        return result
