# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The steps of the sglang_service role after the start: verify (wait, smoke request, startup history, benchmark gate),
judge (the other ranks take rank 0's verdict), rollback, finish (deployment record, lock).

Controller side only; see ``_deploy_steps`` for how a step works.
"""

from __future__ import annotations

from typing import Any, Dict, List

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import Inputs
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_plan import proven, regressed
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_steps import (
    Context, StepFailed, found, may_exist, patch_sm120, pip_failure, restore_files, shell_quote, stamp_args)

# the options of llmops.sglang.sglang_benchmark that sglang_service_benchmark may set
BENCH_OPTIONS = ('model', 'concurrency', 'input_len', 'output_len', 'num_prompts', 'repeats', 'seed', 'dataset', 'duration',
                 'request_timeout', 'client', 'nvidia_smi')
SMOKE_KEYS = ('ok', 'ttft', 'tokens', 'total', 'model', 'error', 'msg', 'status', 'url', 'endpoint')


# ------------------------------------------------------------------------------------------------ verify

def secret_values(inputs: Inputs) -> List[str]:
    """The values the wait masks in every line it returns or prints: the API key and the secret environment's values
    (short ones such as '1' are left alone: masking them would mask every digit of the log)."""
    values = [inputs.api_key] + [str(v) for v in inputs.secret_environment.values() if v is not None]
    return sorted(set(v for v in values if len(v) >= 6))


def wait(ctx: Context, api_key: str) -> Dict[str, Any]:
    """The readiness wait (llmops.sglang.wait_for_sglang, live progress lines); a crashed server is stopped, so that
    Restart=on-failure does not load it again and again."""
    inputs, p = ctx.inputs, ctx.plan
    unit = '%s.service' % inputs.name
    args: Dict[str, Any] = {'unit': unit, 'node_rank': p.node_rank, 'timeout': inputs.wait_timeout,
                            'stall_timeout': inputs.stall_timeout, 'stable_for': inputs.stable_for}
    if inputs.log_path:
        args.update(log_path=inputs.log_path, log_offset=ctx.facts.run_offset or 0)
    if p.serves_http:
        args['url'] = p.url
    if p.multinode:
        args.update(deployment=p.deployment, deployment_size=p.nnodes)
    if api_key:
        args['api_key'] = api_key
    hidden = secret_values(inputs)
    if hidden:
        args['secrets'] = hidden
    raw = ctx.act('llmops.sglang.wait_for_sglang', args)
    res = found(raw)
    if raw.get('failed') and not res.get('status'):
        # the wait itself could not run (its arguments, say): an error, never "not run"
        res['status'] = 'error'
    if res.get('status') == 'crashed':
        ctx.run('ansible.legacy.systemd_service', {'name': unit, 'state': 'stopped'}, 'stop of the crashed %s' % unit)
    return res


def say_ready(ctx: Context, res: Dict[str, Any]) -> None:
    stages = [s for s in res.get('stages') or [] if s.get('log_elapsed') is not None]
    timed = '; stages by the server log\'s own clock: ' + ', '.join('%s at %ss' % (s['stage'], s['log_elapsed']) for s in stages)
    # the wait's progress line said "ready" already: the stages by the log's clock are detail
    ctx.host.say('ready after %.1fs of waiting (this run\'s clock)%s' % (float(res.get('elapsed') or 0.0), timed if stages else ''),
                 detail=True)


def smoke_and_history(ctx: Context) -> None:
    inputs, p, facts = ctx.inputs, ctx.plan, ctx.facts
    if inputs.smoke and p.serves_http:
        args = {'url': p.url, 'endpoint': inputs.smoke_endpoint, 'prompt': inputs.smoke_prompt,
                'max_tokens': inputs.smoke_max_tokens, 'timeout': inputs.smoke_timeout}
        if inputs.api_key:
            args['api_key'] = inputs.api_key
        if p.disaggregation_mode != 'null':
            args['disaggregation_mode'] = p.disaggregation_mode
        facts.smoke = found(ctx.run('llmops.sglang.sglang_smoke', args, must=False), *SMOKE_KEYS)
    if not proven(facts) or not inputs.history:
        return
    args = {'path': p.paths.history, 'state': 'present', 'unit': '%s.service' % inputs.name,
            'config': {'version': inputs.version, 'server_args': p.server_args, 'environment': inputs.environment,
                       'pip_packages': list(inputs.pip_packages), 'sm120_patch': inputs.sm120_patch,
                       'launch_command': list(inputs.launch_command)},
            'sglang_version': inputs.version, 'reasons': list(facts.deploy_reasons), 'stages': facts.wait.get('stages') or [],
            'wait_elapsed': facts.wait.get('elapsed'), 'caches': (facts.caches or {}).get('dirs') or {}, 'keep': inputs.history_keep}
    if facts.smoke and 'ok' in facts.smoke:
        args['smoke'] = facts.smoke
    if inputs.history_metrics_path:
        args['metrics_path'] = inputs.history_metrics_path
    facts.history = found(ctx.run('llmops.sglang.sglang_startup_history', args, 'startup history'), 'record', 'comparison', 'lines')
    smoke, record = facts.smoke or {}, facts.history.get('record') or {}
    parts = []
    if smoke.get('ok'):
        parts.append('smoke TTFT %.3fs (%d tokens in %.3fs, model %s);' % (smoke['ttft'], smoke['tokens'], smoke['total'],
                                                                           smoke.get('model') or '?'))
    if record.get('total') is not None:
        parts.append('ready in %s s%s' % (record['total'], ', caches %s' % record['caches']['state'] if record.get('caches') else ''))
    comparison = (facts.history.get('comparison') or {}).get('summary')
    ctx.host.say('; '.join(p for p in (' '.join(parts).rstrip(';'), comparison) if p))


def benchmark(ctx: Context, update: bool, api_key: str) -> Dict[str, Any]:
    """One benchmark of rank 0 with the load of sglang_service_benchmark."""
    inputs, p = ctx.inputs, ctx.plan
    args = dict((k, inputs.benchmark[k]) for k in BENCH_OPTIONS if k in inputs.benchmark)
    args.update(url=p.url, python=p.python, baseline_path=p.paths.benchmark, threshold=inputs.benchmark_threshold,
                update_baseline=update)
    if api_key:
        args['api_key'] = api_key
    return found(ctx.run('llmops.sglang.sglang_benchmark', args, must=False))


def gate_verdict(ctx: Context, bench: Dict[str, Any]) -> Dict[str, Any]:
    inputs = ctx.inputs
    verdict = bench.get('verdict') or {}
    status = verdict.get('status') or ('first' if bench.get('result') else 'not measured')
    if bench.get('msg') and not bench.get('result'):
        status = 'not measured'
    gate = {'change': inputs.change, 'status': status, 'headline': bench.get('headline'), 'summary': bench.get('summary') or bench.get('msg'),
            'result': bench.get('result'), 'verdict': bench.get('verdict'), 'rolled_back': False}
    if status == 'regressed' and inputs.benchmark_policy == 'fail':
        gate['failed'] = True
    return gate


def say_gate(ctx: Context, gate: Dict[str, Any]) -> None:
    inputs = ctx.inputs
    if gate['status'] == 'regressed':
        judged = 'a regression of more than %s %% (policy %s)' % (inputs.benchmark_threshold, inputs.benchmark_policy)
    elif gate['status'] in ('first', 'accepted'):
        judged = 'accepted, the new baseline'
    else:
        judged = 'not judged'
    noisy = '; the runs disagree more than the threshold: raise repeats or the load' if (gate.get('verdict') or {}).get('noisy') else ''
    ctx.host.say('%s: %s: %s%s' % (gate['change'], gate.get('summary'), judged, noisy))
    if gate['status'] == 'regressed' and inputs.benchmark_policy == 'warn':
        ctx.warnings.append('%s: %s, a regression; left running (sglang_service_benchmark_policy=warn)' % (gate['change'], gate.get('headline')))


def run_gate(ctx: Context, changed: bool = True) -> None:
    """The regression gate, on rank 0: measure, compare with the last accepted result, keep or reject the change."""
    serving = proven(ctx.facts) or ctx.facts.unchanged
    if not (ctx.inputs.gate and ctx.plan.serves_http and serving and (changed or ctx.inputs.benchmark_unchanged)):
        return
    bench = benchmark(ctx, True, ctx.inputs.api_key)
    ctx.facts.benchmark = bench
    ctx.facts.gate = gate_verdict(ctx, bench)
    if not changed and ctx.facts.gate['status'] == 'regressed':
        ctx.facts.gate['failed'] = False  # nothing changed in this run: nothing to reject
    say_gate(ctx, ctx.facts.gate)


def step_verify(ctx: Context) -> None:
    """Wait until the server is ready, prove that it generates, record the start, and run the regression gate."""
    if ctx.check_mode or not ctx.inputs.wait:
        return
    facts = ctx.facts
    facts.wait = wait(ctx, ctx.inputs.api_key)
    if facts.wait.get('status') != 'ready':
        return
    say_ready(ctx, facts.wait)
    smoke_and_history(ctx)
    run_gate(ctx, bool(facts.restart_reasons))


def step_judge(ctx: Context) -> None:
    """The ranks above 0 of a multi-node deployment take rank 0's verdict (rank 0 measured the whole deployment)."""
    rank0 = ctx.peers.get(ctx.topo.peers[0]) if ctx.topo.peers else None
    if rank0 is not None and rank0.gate and ctx.plan.node_rank != 0:
        ctx.facts.gate = dict(rank0.gate)


# ------------------------------------------------------------------------------------------------ rollback

def failure_text(ctx: Context) -> str:
    facts, inputs = ctx.facts, ctx.inputs
    if regressed(facts):
        return '%s: %s' % (inputs.change, facts.gate.get('headline'))
    if (facts.smoke or {}).get('ok') is False:
        return '%s: smoke request failed' % inputs.change
    signature = facts.wait.get('signature')
    return '%s: %s%s' % (inputs.change, facts.wait.get('status') or 'failed', ' (%s)' % signature if signature else '')


def reinstall(ctx: Context) -> None:
    inputs, back = ctx.inputs, ctx.plan.rollback
    if back.version:
        extra = list(inputs.pip_extra_args) + (['--no-index', '--find-links', inputs.wheelhouse_dest] if inputs.wheelhouse else [])
        res = ctx.run('ansible.legacy.pip', {'name': 'sglang==%s' % back.version, 'virtualenv': inputs.venv,
                                             'extra_args': ' '.join(shell_quote(a) for a in extra) or None}, must=False)
        if res.get('failed'):
            raise StepFailed('rollback: ' + pip_failure(res.get('msg') or '', inputs), 'SGLang reinstall', found(res))
    if back.patch:
        patch_sm120(ctx, back.patch)


def restart_previous(ctx: Context, key: str) -> Dict[str, Any]:
    inputs, p = ctx.inputs, ctx.plan
    unit = '%s.service' % inputs.name
    ctx.host.say('restarting %s: rolling back to the previous configuration' % unit)
    res = ctx.run('llmops.sglang.sglang_restart', {
        'unit': unit, 'log_path': inputs.log_path, 'run_file': p.paths.run_file, 'release_check': inputs.preflight,
        'user': inputs.user, 'environment': inputs.environment, 'gpu_devices': list(inputs.preflight_gpu_devices),
        'shared_devices': list(inputs.preflight_shared_devices), 'cleanup': inputs.preflight_cleanup,
        'stop_timeout': inputs.preflight_stop_timeout}, 'rollback restart of %s' % unit)
    if inputs.log_path:
        offset = {'unit': unit, 'path': p.paths.run_file, 'log_size': res.get('log_size') or 0}
        ctx.facts.run_offset = ctx.run('llmops.sglang.sglang_run_offset', offset, 'log offset').get('offset')
    return wait(ctx, key) if inputs.wait else {}


def step_rollback(ctx: Context) -> None:
    """Go back to the previous deployment after a failed start, a failed smoke request or a regression (with
    sglang_service_rollback, or the gate's policy rollback): restore every file, the release and the patch state,
    restart, wait, and with the gate benchmark the previous configuration again. The run still fails, naming both."""
    if not ctx.plan.rollback_needed:
        return
    facts = ctx.facts
    text, status = failure_text(ctx), 'regressed' if regressed(facts) else ''
    status = status or ('failed' if (facts.smoke or {}).get('ok') is False else facts.wait.get('status') or 'failed')
    what = ctx.plan.rollback.describe()
    failed_msg = (facts.smoke or {}).get('msg') if (facts.smoke or {}).get('ok') is False else facts.wait.get('msg')
    key = restore_files(ctx)
    reinstall(ctx)
    after = restart_previous(ctx, key)
    after_bench: Dict[str, Any] = {}
    if ctx.inputs.gate and ctx.plan.serves_http and after.get('status') == 'ready':
        after_bench = benchmark(ctx, False, key)
    tps = ((after_bench.get('result') or {}).get('levels') or [{}])[-1].get('output_tps')
    summary = '%.0f tok/s' % tps if tps is not None else None
    gate = dict(facts.gate or {'change': ctx.inputs.change, 'status': status}, rolled_back=True,
                after_rollback={'status': after.get('status') or 'unknown', 'summary': summary, 'result': after_bench.get('result')})
    if not regressed(facts):
        gate.update(status=status, signature=facts.wait.get('signature'), first_error_line=facts.wait.get('first_error_line'))
    facts.gate = gate if ctx.inputs.gate else facts.gate
    state = after.get('status') or 'unknown'
    if ctx.inputs.gate:
        msg = '%s, rolled back; %s' % (text, '%s after rollback' % summary if summary else 'the previous configuration is %s' % state)
    else:
        msg = ('The new configuration failed: %s Rolled back (%s): the previous configuration is %s%s.'
               % (failed_msg or status, what, state, '' if state == 'ready' else ': %s' % (after.get('msg') or '')))
    facts.rollback = {'msg': msg, 'status': status, 'restored': what, 'after': after}


# ------------------------------------------------------------------------------------------------ finish

def rollback_proven(ctx: Context) -> bool:
    """This run rolled back and the previous configuration's restart was waited for and served (not in check mode)."""
    facts = ctx.facts
    return (bool(facts.rollback) and not ctx.check_mode and ctx.inputs.wait
            and ((facts.rollback or {}).get('after') or {}).get('status') == 'ready')


def record_restored(ctx: Context) -> None:
    """After a proven rollback: the deployment record describes the restored configuration again with the unit's new
    run (its InvocationID), so the next deploy of that configuration is unchanged. The module writes it only where the
    host's files and SGLang are the recorded ones; else the next run is a full deploy, as it would be anyway. The run
    fails for the rollback whatever this writes."""
    args = dict(stamp_args(ctx, 'present'), restored=True)
    for key in ('process_argv', 'process_environment', 'process_sglang_sources'):
        args.pop(key, None)  # they describe the configuration that was rolled back
    res = ctx.run('llmops.sglang.sglang_deploy_stamp', args, 'deployment record of the restored configuration', must=False)
    ctx.facts.recorded = bool(res.get('current')) and not res.get('failed')
    if not ctx.facts.recorded:
        ctx.host.say('the deployment record was not renewed for the restored configuration (%s): the next deploy is a '
                     'full deploy' % ('; '.join(res.get('reasons') or ()) or res.get('msg') or 'unknown'), detail=True)


def step_finish(ctx: Context) -> None:
    """Record what the host now runs after a proven start or a proven rollback (the next run's no-change check), drop
    the API-key file kept for a rollback, and release the host lock. Runs whatever happened before it; a record of a
    start that cannot be written fails the run after the lock is released."""
    facts, inputs, p = ctx.facts, ctx.inputs, ctx.plan
    record = (not facts.failure and not facts.rollback and not (facts.gate or {}).get('failed') and not ctx.check_mode
              and inputs.wait and proven(facts))
    failed = None
    if record:
        try:
            res = ctx.run('llmops.sglang.sglang_deploy_stamp', stamp_args(ctx, 'present'), 'deployment record')
            facts.recorded = bool(res.get('current', True))
            if not facts.recorded:
                raise StepFailed('no deployment record written: %s' % '; '.join(res.get('reasons') or ()), 'finish')
        except StepFailed as err:
            failed = err
    elif rollback_proven(ctx):
        record_restored(ctx)
    # copies kept only in case the drain in the restart failed (sglang_service_drain without a rollback): not needed once
    # the restart ran, in one module run
    if facts.backups and not inputs.keeps_previous and facts.restart:
        ctx.run('ansible.legacy.command', {'argv': ['rm', '-f', '--'] + [b['backup_file'] for b in facts.backups]},
                'removal of the copies kept for the drain', must=False, counts=False)
    # the key file kept for a rollback: only where this run kept one or the no-change query saw one (no module run else)
    kept = facts.key_file_kept or may_exist(facts, p.paths.secret_args_kept)
    if kept and (not facts.failure or facts.backups or facts.key_file_kept):
        ctx.run('ansible.legacy.file', {'path': p.paths.secret_args_kept, 'state': 'absent'}, secret=True, must=False)
    if facts.lock_token:
        res = ctx.run('llmops.sglang.sglang_host_lock', {'path': p.paths.lock, 'state': 'absent', 'token': facts.lock_token},
                      must=False, counts=False)
        if res.get('failed'):
            ctx.warnings.append('the SGLang lock %s was not released: %s' % (p.paths.lock, res.get('msg')))
        facts.lock_token = ''
    if failed is not None:
        raise failed
