# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The sglang_service role's runtime guard (sglang_service_guard; docs/guard.md): the options of
llmops.sglang.sglang_guard for this server, and the step parts that keep it installed, or remove it.

The guard is kept in step with the role at every run: on the no-change path after the ranks step (one module run, and
only with the guard on), after a full deploy in the finish step. It runs on node rank 0, where the server answers.
Its settings are not inputs of the no-change check: changing them never restarts the server.

Controller side only.
"""

from __future__ import annotations

import os
from typing import Any, Dict

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_steps import Context, StepFailed

MODULE = 'llmops.sglang.sglang_guard'


def state_path(inputs) -> str:
    """The guard's state file beside the server's other records (the check playbook reads it there)."""
    return '%s/%s-guard.json' % (inputs.working_directory.rstrip('/'), inputs.name)


def metrics_path(inputs) -> str:
    """The guard's .prom file in the directory of the startup history's metrics (node_exporter reads every *.prom there);
    none without those."""
    if not inputs.history_metrics_path:
        return ''
    return os.path.join(os.path.dirname(inputs.history_metrics_path), '%s-guard.prom' % inputs.name)


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


def keep_guard(ctx: Context) -> None:
    """Install or update the guard (sglang_service_guard), or remove one an earlier run installed."""
    inputs = ctx.inputs
    if ctx.plan.node_rank:
        return  # ranks >= 1 of a multi-node server answer no HTTP: rank 0's guard watches the server
    if inputs.guard:
        res = ctx.run(MODULE, guard_args(ctx), 'the runtime guard', secret=True, must=False)
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
    """The no-change path: keep the guard's settings and code current (nothing to remove: a full deploy did that)."""
    if ctx.facts.unchanged and ctx.inputs.guard and not ctx.facts.failure:
        keep_guard(ctx)


def guard_after_deploy(ctx: Context) -> None:
    """After a full deploy (the finish step), whatever its outcome: the guard watches what runs now."""
    if not ctx.facts.unchanged:
        keep_guard(ctx)
