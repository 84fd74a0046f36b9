# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The sglang_service role's runtime guard (sglang_service_guard; docs/guard.md): the options of
llmops.sglang.sglang_guard for this server, and the step parts that keep it installed, or remove it.

The guard is kept in step with the role at every run: on the no-change path after the ranks step (one module run, and
only with the guard on or a guard to remove), after a full deploy in the finish step. With the guard off, the removal
runs only where the no-change query saw a file of a guard (``must_remove``): on a host that never had one, no module run
(the guard's payload is the largest of the role's, about 465 KB) and no payload build. It runs on node rank 0, where the server answers.
Its settings are not inputs of the no-change check: changing them never restarts the server.

Controller side only.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_facts import Facts
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_plan import guard_files
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_plan import guard_metrics_path as metrics_path
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_plan import guard_state_path as state_path
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_steps import Context, StepFailed

__all__ = ['guard_after_deploy', 'guard_args', 'guard_files', 'guard_unchanged', 'keep_guard', 'metrics_path', 'must_remove',
           'state_path']

MODULE = 'llmops.sglang.sglang_guard'


def guard_args(ctx: Context) -> Dict[str, Any]:
    """The guard's options for this server; sglang_service_guard_settings win over what the role fills in."""
    inputs, plan = ctx.inputs, ctx.plan
    args: Dict[str, Any] = {
        'state': 'present', 'unit': '%s.service' % inputs.name, 'url': plan.url, 'endpoint': inputs.smoke_endpoint,
        'log_path': inputs.log_path, 'run_file': plan.paths.run_file, 'lock_path': plan.paths.lock if inputs.lock else '',
        'state_path': state_path(inputs), 'metrics_path': metrics_path(inputs), 'kernel_log': inputs.kernel_log,
        'nvidia_smi': inputs.nvidia_smi, 'user': inputs.user, 'environment': dict(inputs.environment),
        'gpu_devices': list(inputs.preflight_gpu_devices), 'shared_devices': list(inputs.preflight_shared_devices),
        'server_args': dict(plan.server_args), 'disaggregation_mode': plan.disaggregation_mode, 'stop_timeout': inputs.preflight_stop_timeout,
        'start_timeout': inputs.wait_timeout, 'stall_timeout': inputs.stall_timeout,
    }
    if inputs.api_key:
        args['api_key'] = inputs.api_key
    args.update(inputs.guard_settings)
    return args


def must_remove(facts: Facts, files: Sequence[str]) -> Optional[str]:
    """With the guard off: why this deploy runs the guard's removal, or None when no guard is installed, as this run's
    no-change query saw it (RV(paths_present) of llmops.sglang.sglang_deploy_stamp: none of the guard's FILES; the
    query also looks for other paths, the API-key file and the wheelhouse's copies among them). Without
    that observation (no query ran, or a module that does not report it), or when this run waited for another run's
    host lock (that run may have installed a guard since the query), the removal runs: it is idempotent, a guard left
    behind is not."""
    stamp = facts.stamp
    if not isinstance(stamp, dict) or not isinstance(stamp.get('paths_present'), list):
        return 'not observed'
    if facts.lock_waited or facts.deployed_over:
        return 'another run held the host lock since the query'
    seen = [path for path in stamp['paths_present'] if path in files]
    if seen:
        return 'installed: %s' % ', '.join(str(p) for p in seen)
    return None


def keep_guard(ctx: Context) -> None:
    """Install or update the guard (sglang_service_guard), or remove one an earlier run installed."""
    inputs = ctx.inputs
    if ctx.plan.node_rank:
        return  # ranks >= 1 of a multi-node server answer no HTTP: rank 0's guard watches the server
    if inputs.guard:
        res = ctx.run(MODULE, guard_args(ctx), 'the runtime guard', secret=True, must=False)
    elif must_remove(ctx.facts, guard_files(inputs)) is None:
        return  # no guard on the host: no module run (its payload is the largest of the role's) for nothing
    else:
        res = ctx.run(MODULE, {'state': 'absent', 'unit': '%s.service' % inputs.name, 'state_path': state_path(inputs),
                               'metrics_path': metrics_path(inputs)}, 'the runtime guard', must=False)
    if not res.get('failed'):
        return
    if ctx.facts.failure:  # the run's own failure stays the one it reports
        ctx.warnings.append('the runtime guard was not %s: %s' % ('installed' if inputs.guard else 'removed', res.get('msg')))
        return
    raise StepFailed(res.get('msg') or 'sglang_guard failed', 'the runtime guard')


def guard_unchanged(ctx: Context) -> None:
    """The no-change path: keep the guard's settings and code current; with the guard off, remove one the no-change
    query saw (turning the guard off is not a change of the server, so this run may be the first one after it)."""
    if ctx.facts.unchanged and not ctx.facts.failure and (ctx.inputs.guard or must_remove(ctx.facts, guard_files(ctx.inputs)) is not None):
        keep_guard(ctx)


def guard_after_deploy(ctx: Context) -> None:
    """After a full deploy (the finish step), whatever its outcome: the guard watches what runs now."""
    if not ctx.facts.unchanged:
        keep_guard(ctx)
