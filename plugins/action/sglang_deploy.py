# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller side of llmops.sglang.sglang_deploy: one step of the sglang_service role on one host.

Reads the role's inputs (its variables, templated once), this host's facts from the earlier steps and the other ranks'
facts (their sglang_service_result), runs the step (plugin_utils/_deploy_steps.py, _deploy_verify.py) with this
plugin as the host's executor, and returns the role's result.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Tuple

from ansible import constants as C
from ansible import context
from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.hashing import checksum

# The action plugins the steps run (ActionHost.action), imported here: ansible-playbook imports this plugin once in its
# own process (the strategy looks at its class), and every task's worker is a fork of that process, so no worker
# imports them again (the collection loader compiles their sources on every import: no byte code for collection code;
# about 30 ms for the two and what they import, measured with -X importtime on 2026-12-04).
from ansible_collections.llmops.sglang.plugins.action import sglang_host_lock, wait_for_sglang  # noqa: F401 pylint: disable=unused-import
from ansible_collections.llmops.sglang.plugins.plugin_utils import _deploy_guard as guard
from ansible_collections.llmops.sglang.plugins.plugin_utils import _deploy_steps as steps
from ansible_collections.llmops.sglang.plugins.plugin_utils._action_host import ActionHost
from ansible_collections.llmops.sglang.plugins.plugin_utils import _deploy_verify as verify
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_facts import Facts, pack, unpack
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import Inputs, input_problems, likely_typos, plain, role_options
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_plan import Topology
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_result import Server, service_result

RESULT = 'sglang_service_result'


def unreachable(step: str, lost: Exception) -> Dict[str, Any]:
    """The failure of a step whose host stopped answering."""
    why = (str(lost).strip().splitlines() or ['no answer'])[0]
    return {'step': step, 'what': 'connection', 'unreachable': True, 'result': None,
            'msg': 'the host became unreachable during step %s: %s; the steps after it did nothing there' % (step, why)}


def _gate_unchanged(multinode: bool) -> Callable[[steps.Context], None]:
    """sglang_service_benchmark_unchanged: measure a server the run left alone, once the host is known unchanged."""
    def gate(ctx: steps.Context) -> None:
        if ctx.facts.unchanged and ctx.plan.multinode == multinode:
            verify.run_gate(ctx, changed=False)
    return gate


def _guard_unchanged(multinode: bool) -> Callable[[steps.Context], None]:
    """The guard kept current on the no-change path in the step that decides it: the plan step for a single host (the
    role ends after it, meta end_role), the ranks step for a multi-node deployment."""
    def keep(ctx: steps.Context) -> None:
        if ctx.plan.multinode == multinode:
            guard.guard_unchanged(ctx)
    return keep


STEPS: Dict[str, Tuple[Callable[[steps.Context], None], ...]] = {
    'plan': (steps.step_plan, _gate_unchanged(False), _guard_unchanged(False)),
    'ranks': (steps.step_ranks, _gate_unchanged(True), _guard_unchanged(True)),
    'install': (steps.step_install,),
    'configure': (steps.step_configure,),
    'restart': (steps.step_restart,),
    'verify': (verify.step_verify,),
    # judge inside rollback: one task per host fewer (the verify step is the ranks' barrier before both)
    'rollback': (verify.step_judge, verify.step_rollback),
    'finish': (verify.step_finish, guard.guard_after_deploy),
    'preflight': (steps.step_preflight,),
}
ARGUMENT_SPEC = dict(step=dict(type='str', required=True, choices=list(STEPS)), preview=dict(type='bool', default=False),
                     deploy=dict(type='bool', default=False))
# steps that run after a failure too
ALWAYS = ('finish',)
# A single host (no ranks on other hosts) needs no barrier between its steps: with deploy=true its plan task goes on with
# these, in this order, when the plan does not leave it unchanged (one task per host instead of six; each task costs the
# controller a worker fork, its variables and the registered result's round trip, ~0.09 CPU-s per host). The finish
# step runs after a failure too, as the role's "always" does for a multi-node deployment's tasks.
SINGLE_HOST = ('install', 'configure', 'restart', 'verify', 'rollback', 'finish')


def run_step(ctx: steps.Context, step: str) -> None:
    """Run STEP's parts on CTX's host unless an earlier step failed (finish runs anyway); a failure is recorded in the
    host's facts, the steps after it then do nothing."""
    facts = ctx.facts
    try:
        if not facts.failure or step in ALWAYS:
            for part in STEPS[step]:
                part(ctx)
    except steps.StepFailed as failed:
        facts.failure = failed.to_json(step)
    except AnsibleConnectionFailure as lost:
        # a failed step, not an unreachable task: the host stays in the play, so the run's table still has its
        # row (ansible-playbook ends a play that lost its last host before any report); nothing more is done there
        facts.failure = facts.failure or unreachable(step, lost)


def steps_to_run(step: str, deploy: bool, preview: bool, ctx: steps.Context) -> Tuple[str, ...]:
    """The steps this task runs after STEP: a single host's plan step asked to ``deploy`` goes on with the whole deploy
    (SINGLE_HOST) unless its plan leaves it unchanged or only previews; every other step is its task alone."""
    if step == 'plan' and deploy and not preview and not ctx.plan.multinode and not ctx.plan.unchanged:
        return SINGLE_HOST
    return ()


def run_task(ctx: steps.Context, step: str, deploy: bool, preview: bool) -> str:
    """The task's steps: STEP, then what steps_to_run adds; returns the last step run (the result's ``step``)."""
    run_step(ctx, step)
    last = step
    for last in steps_to_run(step, deploy, preview, ctx):
        run_step(ctx, last)
    return last


class ActionModule(ActionBase):
    """Runs one step of the role's deployment on this host and returns the role's result."""

    # No remote temporary directory of its own: modules run pipelined, and a copy it runs makes its own (never in check
    # mode, which writes nothing on the host).
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def _values(self, task_vars: Dict[str, Any]) -> Dict[str, Any]:
        """The role's inputs (every documented variable of the role), templated once for this step."""
        out = {}
        for name in Inputs.names() + ['ansible_play_name']:
            if name in task_vars:
                out[name] = plain(self._templar.template(task_vars[name]))
        return out

    @staticmethod
    def _hostvar(hostvars: Any, host: str, name: str, default: Any = None) -> Any:
        try:
            value = hostvars[host].get(name, default)
        except (KeyError, AttributeError):
            return default
        return default if value is None else plain(value)

    def _topology(self, task_vars: Dict[str, Any], inputs: Inputs, installs: bool) -> Topology:
        host = task_vars.get('inventory_hostname') or ''
        groups = task_vars.get('groups') or {}
        hostvars = task_vars.get('hostvars') or {}
        peers = tuple(groups.get(inputs.deployment_group) or ()) if inputs.deployment_group else ()
        multinode = len(peers) > 1
        batch = tuple(task_vars.get('ansible_play_batch') or ())
        batch_groups: Dict[str, Tuple[str, ...]] = {}
        if multinode:
            for other in batch:
                # a play's vars are not in hostvars: a host without its own value has the play's, as this host does
                group = self._hostvar(hostvars, other, 'sglang_service_deployment_group', None)
                group = inputs.deployment_group if group is None else group
                if group and len(groups.get(group) or ()) > 1:
                    batch_groups[group] = tuple(groups[group])
        rank0 = peers[0] if multinode else host
        wheelhouse = inputs.wheelhouse
        files = tuple(sorted(n for n in os.listdir(wheelhouse) if os.path.isfile(os.path.join(wheelhouse, n)))) \
            if wheelhouse and os.path.isdir(wheelhouse) else ()
        return Topology(
            host=host, peers=peers if multinode else (),
            node_ranks=dict((p, self._hostvar(hostvars, p, 'sglang_service_node_rank')) for p in peers) if multinode else {},
            rank0_address=str(self._hostvar(hostvars, rank0, 'sglang_service_dist_init_host')
                              or self._hostvar(hostvars, rank0, 'ansible_host') or rank0) if multinode else '',
            play_hosts=tuple(task_vars.get('ansible_play_hosts_all') or ()), batch=batch,
            forks=int(context.CLIARGS.get('forks') or C.DEFAULT_FORKS), batch_groups=batch_groups,
            wheelhouse_files=files, ansible_managed=str(C.config.get_config_value('DEFAULT_MANAGED_STR') or ''),
            # read by the install step in check mode only (compared with the host's copies): every other step skips them
            wheelhouse_checksums=dict((n, checksum(os.path.join(wheelhouse, n))) for n in files)
            if self._task.check_mode and installs else {},
            check_mode=bool(self._task.check_mode), throttle=self._throttle(),
            group_hosts=(tuple(groups[inputs.deployment_group]) if inputs.deployment_group in groups else None)
            if inputs.deployment_group else (),
            group_names=tuple(g for g in groups if g not in ('all', 'ungrouped')))

    def _throttle(self) -> int:
        """The task's effective throttle (its own or inherited from its block or play); 0 when none or not a number."""
        try:
            return int(self._templar.template(self._task.throttle) or 0)
        except (TypeError, ValueError):
            return 0

    @staticmethod
    def _facts(task_vars: Dict[str, Any], step: str, inputs: Inputs) -> Facts:
        """This include's facts so far (the plan step starts afresh: an earlier include's result is not this run's)."""
        if step == 'plan':
            return Facts(server=inputs.name)
        earlier = task_vars.get(RESULT)
        return Facts.from_json(plain(unpack(earlier)) if isinstance(earlier, dict) else None)

    def _peers(self, task_vars: Dict[str, Any], topo: Topology, inputs: Inputs) -> Dict[str, Facts]:
        """The other ranks' facts of this server, as their last step left them."""
        out = {}
        hostvars = task_vars.get('hostvars') or {}
        for peer in topo.peers:
            if peer == topo.host or peer not in topo.play_hosts:
                continue
            result = self._hostvar(hostvars, peer, RESULT)
            facts = Facts.from_json(unpack(result)) if isinstance(result, dict) else None
            if facts is not None and facts.server == inputs.name:
                out[peer] = facts
        return out

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        step = args['step']
        values = self._values(task_vars)
        # the plan step checks the role's variables as its argument validation would, before anything reads them
        problems = input_problems(role_options(), values) if step == 'plan' else []
        try:
            inputs = Inputs.from_vars({} if problems else values)
        except (TypeError, ValueError):  # refused by the plan step, which recorded why: this step does nothing
            inputs = Inputs()
        # the wheelhouse's checksums, read in check mode by the install step (which a single host's plan step may run)
        topo = self._topology(task_vars, inputs, step == 'install' or args['deploy'])
        facts = self._facts(task_vars, step, inputs)
        host = ActionHost(self, task_vars, topo.host)
        ctx = steps.Context(inputs=inputs, values=values, topo=topo, facts=facts, peers=self._peers(task_vars, topo, inputs), host=host,
                            preview=args['preview'])
        if problems:
            facts.failure = steps.StepFailed(
                'the sglang_service role\'s variables are not valid: %s; %s.service was not touched: set them as '
                'roles/sglang_service/meta/argument_specs.yml documents (ansible-doc -t role llmops.sglang.sglang_service)'
                % ('; '.join(problems), values.get('sglang_service_name') or inputs.name), 'role variables').to_json(step)
        try:
            last = run_task(ctx, step, args['deploy'], args['preview'])
        finally:
            try:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            except Exception:  # pylint: disable=broad-except
                pass  # the host went away: its temporary directory goes with the next connection's cleanup
        facts.changed = facts.changed or ctx.changed
        plan = ctx.plan
        public = service_result(facts, Server(inputs.name, plan.url, plan.node_rank, plan.deployment), host.check_mode)
        shown = public.to_json()
        result.update(shown)
        # what the public fields already hold is registered once (they are read back from there)
        result.update(facts=pack(facts.to_json(), shown), plan=plan.to_json(), step=last)
        # A step reports its own change (the PLAY RECAP counts it); the role's last step reports the whole run's, so
        # the registered result says whether the run changed the host.
        result['changed'] = facts.changed if last in ALWAYS else ctx.changed
        if step == 'plan':
            ctx.warnings.extend(likely_typos(task_vars))
        if ctx.warnings:
            result['warnings'] = ctx.warnings
        if ctx.diffs:
            result['diff'] = ctx.diffs
        return result
