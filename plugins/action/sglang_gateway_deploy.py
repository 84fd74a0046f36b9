# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller side of llmops.sglang.sglang_gateway_deploy: one step of the sglang_gateway role on one host.

Reads the role's inputs (its variables, templated once) and what the earlier steps of this run observed (the facts in
the role's one result, sglang_gateway_result), runs the step (plugin_utils/_gateway_steps.py, deciding with
_gateway_plan.py) with this plugin as the host's executor, and returns the role's result.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ansible import constants as C
from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase

from ansible_collections.llmops.sglang.plugins.action.sglang_gateway_fleet import read_fleet
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._roll import RollInputError, gateway_mode
from ansible_collections.llmops.sglang.plugins.plugin_utils import _gateway_steps as steps
from ansible_collections.llmops.sglang.plugins.plugin_utils._action_host import ActionHost
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import plain
from ansible_collections.llmops.sglang.plugins.plugin_utils._gateway_plan import GatewayFacts, GatewayInputs, gateway_result

RESULT = 'sglang_gateway_result'
ARGUMENT_SPEC = dict(step=dict(type='str', required=True, choices=list(steps.STEPS)))


class ActionModule(ActionBase):
    """Runs one step of the gateway role on this host and returns the role's result."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def _inputs(self, task_vars: Dict[str, Any]) -> GatewayInputs:
        values = {}
        for name in GatewayInputs.names():
            if name in task_vars:
                values[name] = plain(self._templar.template(task_vars[name]))
        return GatewayInputs.from_vars(values)

    @staticmethod
    def _fleet(task_vars: Dict[str, Any]):
        def read(inputs: GatewayInputs) -> Tuple[str, List[Dict[str, Any]]]:
            try:
                fleet = read_fleet(task_vars, {'regular': inputs.worker_group, 'prefill': inputs.prefill_group,
                                               'decode': inputs.decode_group})
            except RollInputError as exc:
                raise ValueError(str(exc)) from exc
            return gateway_mode(fleet), [w.api_worker() for w in fleet]
        return read

    def _launcher(self) -> str:
        with open(self._find_needle('files', 'gateway_launch.py'), encoding='utf-8') as handle:
            return handle.read().rstrip() + '\n'

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        step = args['step']
        check_mode = bool(self._task.check_mode)
        earlier = task_vars.get(RESULT) if step != 'install' else None
        facts = GatewayFacts.from_json(plain(earlier.get('facts')) if isinstance(earlier, dict) else None)
        try:
            inputs = self._inputs(task_vars)
        except (TypeError, ValueError) as exc:
            inputs = GatewayInputs()
            facts.failure = {'step': step, 'what': 'inputs', 'msg': 'the role\'s variables: %s' % exc}
        host = ActionHost(self, task_vars, task_vars.get('inventory_hostname') or '')
        ctx = steps.GatewayContext(inputs=inputs, facts=facts, host=host, check_mode=check_mode, read_fleet=self._fleet(task_vars),
                                   launcher=self._launcher, managed=str(C.config.get_config_value('DEFAULT_MANAGED_STR') or ''))
        try:
            if not facts.failure:
                steps.STEPS[step](ctx)
        except steps.StepFailed as failed:
            facts.failure = failed.to_json(step)
        except AnsibleConnectionFailure as lost:
            facts.failure = {'step': step, 'what': 'connection', 'msg': 'the host became unreachable: %s' % lost}
        finally:
            try:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            except Exception:  # pylint: disable=broad-except
                pass  # the host went away: its temporary directory goes with the next connection's cleanup
        public = gateway_result(inputs, facts, check_mode)
        result.update(public.to_json())
        result.update(facts=facts.to_json(), step=step, changed=ctx.changed)
        if facts.failure:
            result.update(failed=True, msg=facts.failure['msg'])
        if ctx.warnings:
            result['warnings'] = ctx.warnings
        if ctx.diffs:
            result['diff'] = ctx.diffs
        return result
