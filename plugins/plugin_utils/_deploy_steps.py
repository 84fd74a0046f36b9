# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The steps of the sglang_service role before the start: plan, ranks, install, configure, restart.

Controller side only. A step reads the plan (``_deploy_plan.plan``, computed again from the inputs and the facts so
far), runs the collection's modules on the host through ``Host`` (the action plugin llmops.sglang.sglang_deploy) and
records what they found in the host's ``Facts``. It decides nothing itself: what to do is the plan's, what happened is
the modules'. A step that cannot go on raises ``StepFailed``; the action plugin records it (``Facts.failure``) and the
later steps do nothing, so the role ends with one failure line and its result.

Steps run on every host of the play at once (one task each), so a step reads the other ranks' facts as the step before
left them: the task boundary is the barrier between the ranks of a multi-node deployment.
"""

from __future__ import annotations

import base64
import datetime
import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Protocol

import yaml

from ansible_collections.llmops.sglang.plugins.module_utils.deploy._live import value_digest
from ansible_collections.llmops.sglang.plugins.module_utils.preflight._checks import CHECKS as PREFLIGHT_CHECKS
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_facts import Facts
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_files import environment_text, secret_args_text, unit_text
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import Inputs, digest, input_digests
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_plan import Plan, Topology, guard_files, plan
from ansible_collections.llmops.sglang.plugins.plugin_utils._wheel_flags import WheelFlagsError, check_from_index, check_with_wheel

# Keys of a module result that are the run's bookkeeping, not what the module found.
NOISE = ('invocation', 'changed', 'failed', 'diff', 'warnings', 'deprecations', '_ansible_no_log')
# sglang_service_drain's options (llmops.sglang.sglang_drain's) and what the role keeps of a drain
DRAIN_OPTIONS = ('url', 'timeout', 'policy', 'max_wait', 'source', 'interval', 'idle_spacing', 'idle_readings')
DRAIN_KEPT = ('outcome', 'seconds', 'in_flight_at_start', 'drained', 'still_running', 'peak', 'policy', 'at_timeout',
              'source', 'reason', 'msg')


class StepFailed(Exception):
    """The step cannot go on: ``msg`` says what, why and what to try (one line first); ``what`` names the part of the
    step (``unit file``, ``server arguments``, ...), ``result`` is the failed module's result (``no_space``, ``rc``, ...)."""

    def __init__(self, msg: str, what: str = '', result: Optional[Dict[str, Any]] = None):
        super().__init__(msg)
        self.msg, self.what, self.result = msg, what, result

    def to_json(self, step: str) -> Dict[str, Any]:
        return {'step': step, 'what': self.what or step, 'msg': self.msg, 'result': self.result}


class Host(Protocol):
    """What a step may do on the host (implemented by the action plugin)."""

    name: str
    check_mode: bool

    def module(self, name: str, args: Dict[str, Any], secret: bool = False, read_only: bool = False) -> Dict[str, Any]:
        """Run a module; its result, failed or not. ``secret``: no_log; ``read_only``: runs in check mode too."""

    def action(self, name: str, args: Dict[str, Any]) -> Dict[str, Any]:
        """Run an action plugin (wait_for_sglang, sglang_host_lock, copy) for this host."""

    def put(self, src: str, dest_dir: str, mode: str, directory_mode: str) -> Dict[str, Any]:
        """Send the controller's file SRC into DEST_DIR on the host as ansible.builtin.copy would, without its look at
        the host's copy first (its stat): for a file the no-change query saw missing."""

    def say(self, text: str, detail: bool = False) -> None:
        """One line for this host on the terminal (a ``detail``: with -v only)."""


@dataclass
class Context:
    """One step on one host: the inputs, the topology, the facts so far, the other ranks' facts, the host."""

    inputs: Inputs
    values: Dict[str, Any]
    topo: Topology
    facts: Facts
    peers: Dict[str, Facts]
    host: Host
    preview: bool = False  # the plan asked before the change (llmops.sglang.roll): its line says what would be done
    changed: bool = False
    # the modules' warnings as they returned them (ansible-core 2.19+: WarningSummary objects, which the task executor
    # takes as they are; str() of one is its repr) and the steps' own (strings)
    warnings: List[Any] = field(default_factory=list)
    diffs: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def plan(self) -> Plan:
        return plan(self.inputs, self.topo, self.facts, self.peers)

    @property
    def check_mode(self) -> bool:
        return self.host.check_mode

    def run(self, name: str, args: Dict[str, Any], what: str = '', secret: bool = False, read_only: bool = False,
            must: bool = True, counts: bool = True) -> Dict[str, Any]:
        """Run a module, collect its change (unless it ``counts`` for nothing: a lock that leaves nothing behind),
        warnings and diff; a failure raises StepFailed naming ``what``."""
        res = self.host.module(name, args, secret=secret, read_only=read_only)
        self._collect(res, secret, counts)
        if must and res.get('failed'):
            raise StepFailed(res.get('msg') or 'module %s failed' % name, what or name, None if secret else found(res))
        return res

    def act(self, name: str, args: Dict[str, Any], counts: bool = True) -> Dict[str, Any]:
        res = self.host.action(name, args)
        self._collect(res, False, counts)
        return res

    def put(self, src: str, dest_dir: str, mode: str, directory_mode: str, what: str) -> Dict[str, Any]:
        res = self.host.put(src, dest_dir, mode, directory_mode)
        self._collect(res, False, True)
        if res.get('failed'):
            raise StepFailed(res.get('msg') or 'could not copy %s to %s' % (src, dest_dir), what, found(res))
        return res

    def _collect(self, res: Dict[str, Any], secret: bool, counts: bool) -> None:
        if counts and res.get('changed') and not res.get('failed'):
            self.changed = True
        self.warnings.extend(res.get('warnings') or [])
        # a diff only of what changed, as ansible.builtin.default shows them (the file module's touch of an unchanged
        # log file returns a diff 'state: file -> touch' on every run)
        if res.get('diff') and res.get('changed') and not secret:
            self.diffs.extend(res['diff'] if isinstance(res['diff'], list) else [res['diff']])


def found(res: Dict[str, Any], *keep: str) -> Dict[str, Any]:
    """What a module found: its result without the bookkeeping keys (or only ``keep``)."""
    if keep:
        return dict((k, res.get(k)) for k in keep)
    return dict((k, v) for k, v in res.items() if k not in NOISE)


def record_inputs(ctx: Context) -> Dict[str, str]:
    """The deployment record's inputs: a digest per role input, plus what the inventory and the controller add."""
    p = ctx.plan
    digests = input_digests(ctx.values)
    digests.update({'multi-node arguments': digest(p.multinode_args), 'interpreter': digest(p.python),
                    'wheelhouse': digest(sorted(ctx.topo.wheelhouse_files)), 'ansible_managed': digest(ctx.topo.ansible_managed)})
    return digests


def wanted_process(ctx: Context) -> Dict[str, Any]:
    """What the server's process must run: the unit's ExecStart= words (the API key's --config file in the unit's
    credential directory, %d) and a digest of each environment value the unit sets (the values are secrets)."""
    inputs = ctx.inputs
    argv = list(ctx.plan.argv) + (['--config', '%d/secret-args.yaml'] if inputs.api_key else [])
    env = dict(inputs.environment, **inputs.secret_environment)
    env['HOME'] = inputs.working_directory
    return {'process_argv': argv,
            'process_environment': dict((k, value_digest('' if v is None else str(v))) for k, v in env.items()),
            # SGLang's patched sources are this server's configuration only when this deployment manages the patch
            'process_sglang_sources': bool(inputs.sm120_patch)}


def stamp_args(ctx: Context, state: str) -> Dict[str, Any]:
    p = ctx.plan
    args = {'path': p.paths.stamp, 'state': state, 'inputs': record_inputs(ctx), 'files': list(p.managed_files),
            'python': p.python, 'unit': '%s.service' % ctx.inputs.name}
    args.update(wanted_process(ctx))
    if state == 'query' and p.serves_http:
        args['health_url'] = p.url
    if state == 'query':
        args['probe_paths'] = probe_paths(ctx)
    return args


def probe_paths(ctx: Context) -> List[str]:
    """What the no-change query looks for, so that a deploy runs a removal only where there is something to remove: a
    guard's files with the guard off (_deploy_guard, rank 0 only), the API-key file without an API key, the key file an
    earlier run kept for a rollback (the finish step removes it)."""
    p, paths = ctx.plan, []
    if not ctx.inputs.guard and not p.node_rank:
        paths += guard_files(ctx.inputs)
    if not ctx.inputs.api_key:
        paths.append(p.paths.secret_args)
    paths.append(p.paths.secret_args_kept)
    return paths + wheel_copies(ctx.inputs, ctx.topo)


def wheel_copies(inputs: Inputs, topo: Topology) -> List[str]:
    """Where the install step copies the wheelhouse's files on the host (pure)."""
    if not inputs.wheelhouse:
        return []
    return ['%s/%s' % (inputs.wheelhouse_dest.rstrip('/'), name) for name in topo.wheelhouse_files]


# ------------------------------------------------------------------------------------------------ plan and ranks

def say_decision(ctx: Context) -> None:
    """The one line that says whether the host is left alone, and why not."""
    stamp = ctx.facts.stamp or {}
    if ctx.facts.unchanged:
        serving = ', serving: GET /health 200' if stamp.get('health') else ''
        ctx.host.say('unchanged since %s (same inputs, files, SGLang %s and unit invocation)%s; nothing installed, '
                     'configured or restarted' % (stamp.get('recorded_at'), stamp.get('sglang_version'), serving))
    elif ctx.inputs.skip_unchanged:
        what = 'would deploy' if ctx.check_mode or ctx.preview else 'full deploy'
        ctx.host.say('%s: %s' % (what, '; '.join(ctx.facts.deploy_reasons) or 'no deployment record yet'))


def decide_unchanged(ctx: Context) -> None:
    p = ctx.plan
    ctx.facts.unchanged, ctx.facts.deploy_reasons = p.unchanged, list(p.deploy_reasons)
    say_decision(ctx)
    check_flags_before_install(ctx)


def step_plan(ctx: Context) -> None:
    """Refuse what cannot work before anything is touched; check whether the host still runs the last proven
    deployment (one module run); a single host decides here, the ranks of a multi-node deployment in step ranks."""
    refusals = ctx.plan.refusals
    if refusals:
        raise StepFailed('%s; %s.service was not touched' % (' | '.join(refusals), ctx.inputs.name), 'plan')
    # always: the running process is compared with what is wanted whatever the record says (skip_unchanged=false too)
    res = ctx.run('llmops.sglang.sglang_deploy_stamp', stamp_args(ctx, 'query'), 'the no-change check')
    ctx.facts.stamp = found(res)
    if not ctx.plan.multinode:
        decide_unchanged(ctx)


def step_ranks(ctx: Context) -> None:
    """Every rank has run its no-change check: the deployment is unchanged only when every rank is (a single host
    decided in step plan)."""
    if ctx.plan.multinode and not ctx.facts.failure:
        decide_unchanged(ctx)


# ------------------------------------------------------------------------------------------------ install

def pip_failure(msg: str, inputs: Inputs) -> str:
    """One line from pip's output: which versions it could install and which variable to set, else its last error."""
    listed = re.search(r'from versions: ([^)]*)\)', msg or '')
    if listed is None:
        errors = re.findall(r'(?m)^ERROR: .*$', msg or '')
        last = errors[-1] if errors else next((line for line in reversed((msg or '').splitlines()) if line.strip()), 'no output')
        return 'pip could not install sglang==%s into %s: %s' % (inputs.version, inputs.venv, last)
    versions = [v for v in listed.group(1).split(', ') if v not in ('none', '')]
    source = ('the wheelhouse %s (copied to %s)' % (inputs.wheelhouse, inputs.wheelhouse_dest) if inputs.wheelhouse
              else 'the package index pip uses on the host')
    have = ', '.join(versions[-12:]) if versions else 'no sglang at all'
    more = ' (the newest 12 of %d)' % len(versions) if len(versions) > 12 else ''
    hint = ', or add its wheel to the wheelhouse (tests/infra/fleet.sh wheelhouse DIR sglang==VERSION)' if inputs.wheelhouse else ''
    return 'sglang %s is not in %s; it has %s%s: set sglang_service_version to one of them%s' % (
        inputs.version, source, have, more, hint)


def none_there(facts: Facts, paths: List[str]) -> bool:
    """Whether the no-change query saw none of PATHS on the host (and no other run held the lock since). Pure."""
    return bool(paths) and not any(may_exist(facts, path) for path in paths)


def compare_wheelhouse(ctx: Context) -> None:
    """Check mode: whether the copy of the wheelhouse would change anything, by checksum (the copy action would make a
    temporary directory on the host even in check mode); a wheelhouse the no-change query saw missing would change."""
    inputs = ctx.inputs
    if none_there(ctx.facts, wheel_copies(inputs, ctx.topo)):
        ctx.changed = True
        return
    for name in ctx.topo.wheelhouse_files:
        there = ctx.run('ansible.legacy.stat', {'path': '%s/%s' % (inputs.wheelhouse_dest.rstrip('/'), name),
                                                'checksum_algorithm': 'sha1', 'get_mime': False}, read_only=True).get('stat') or {}
        if there.get('checksum') != ctx.topo.wheelhouse_checksums.get(name):
            ctx.changed = True
            return


def install_sglang(ctx: Context) -> None:
    inputs = ctx.inputs
    if inputs.wheelhouse and ctx.check_mode:
        compare_wheelhouse(ctx)
    elif none_there(ctx.facts, wheel_copies(inputs, ctx.topo)):
        # a first copy: each file sent and put in place, without the copy action's stat of every file first
        for name in ctx.topo.wheelhouse_files:
            ctx.put('%s/%s' % (inputs.wheelhouse.rstrip('/'), name), inputs.wheelhouse_dest.rstrip('/') + '/', '0644', '0755',
                    'wheelhouse copy')
    elif inputs.wheelhouse:
        ctx.act('ansible.legacy.copy', {'src': inputs.wheelhouse.rstrip('/') + '/', 'dest': inputs.wheelhouse_dest.rstrip('/') + '/',
                                        'mode': '0644', 'directory_mode': '0755'})
    if inputs.keeps_previous:
        ctx.facts.previous_version = read_previous_version(ctx)
    if ctx.check_mode and not inputs.pip_packages and version_seen(ctx.facts) == inputs.version:
        # the release the no-change query read is the one asked for; pip's check mode cannot tell with extra arguments
        # (--no-index, --find-links: it says "changed" whatever is installed), so it is not asked
        return
    extra = list(inputs.pip_extra_args) + (['--no-index', '--find-links', inputs.wheelhouse_dest] if inputs.wheelhouse else [])
    res = ctx.run('ansible.legacy.pip', {'name': ['sglang==%s' % inputs.version] + list(inputs.pip_packages), 'virtualenv': inputs.venv,
                                         'virtualenv_command': '%s -m venv' % inputs.venv_python,
                                         'extra_args': ' '.join(shell_quote(a) for a in extra) or None}, must=False)
    if res.get('failed'):
        raise StepFailed(pip_failure(res.get('msg') or '', inputs), 'SGLang install', found(res))
    if res.get('changed'):
        ctx.facts.changes.append('SGLang install')
        ctx.facts.sglang_pending = ctx.check_mode


def version_seen(facts: Facts) -> Optional[str]:
    """The SGLang release the no-change query found with the server's interpreter (its dist-info METADATA, what
    importlib.metadata reads; '' for none), or None when the query did not look or another run held the host lock
    since (it may have installed another release meanwhile). Pure."""
    stamp = facts.stamp
    if not isinstance(stamp, dict) or 'sglang_version' not in stamp or facts.lock_waited:
        return None
    return str(stamp.get('sglang_version') or '')


def read_previous_version(ctx: Context) -> str:
    """The release before this run's install (a rollback reinstalls it): as the no-change query read it, else read on the
    host (one module run)."""
    seen = version_seen(ctx.facts)
    if seen is not None:
        return seen
    res = ctx.run('ansible.legacy.command', {'argv': [ctx.plan.python, '-c', "import importlib.metadata as m; print(m.version('sglang'))"]},
                  read_only=True, must=False, counts=False)
    return (res.get('stdout') or '').strip() if res.get('rc') == 0 else ''


def shell_quote(word: str) -> str:
    return word if re.match(r'^[A-Za-z0-9_@%+=:,./-]+$', word) else "'%s'" % word.replace("'", "'\"'\"'")


def patch_sm120(ctx: Context, state: str) -> Dict[str, Any]:
    inputs = ctx.inputs
    args = {'python': ctx.plan.python, 'state': state, 'glm5_only': inputs.sm120_patch_glm5_only, 'backup': inputs.sm120_patch_backup}
    if inputs.sm120_patch_sites:
        args['patches'] = list(inputs.sm120_patch_sites)
    res = ctx.run('llmops.sglang.sglang_patch_sm120', args, 'SM120 patches %s' % state)
    ctx.facts.sm120_patch = {'state': state, 'sglang_version': res.get('sglang_version'),
                             'sites': [{'name': s.get('name'), 'status': s.get('status')} for s in res.get('sites') or []]}
    sites = ', '.join('%s=%s' % (s.get('name'), s.get('status')) for s in res.get('sites') or [])
    # the patch state is in the result (and the check's SM120 PATCH column); a failure stops the step
    ctx.host.say('SM120 patches %s, SGLang %s: %s' % (state, res.get('sglang_version') or '?', sites or 'no site'), detail=True)
    return res


def check_wheel_flags(ctx: Context) -> str:
    """Check the server arguments against the wheel of the release to install (the wheelhouse's, else the controller's
    download of it); '' when checked (ctx.facts.flags_checked says which release), else why not. A flag the release
    does not define, or a value its argparse refuses, raises StepFailed."""
    inputs, p = ctx.inputs, ctx.plan
    try:
        if inputs.wheelhouse:
            checked = check_with_wheel(inputs.wheelhouse, inputs.version, p.server_args)
            why = 'has no wheel in sglang_service_wheelhouse to read its flags from'
        else:
            checked, why = check_from_index(inputs.version, p.server_args, inputs.pip_extra_args)
    except WheelFlagsError as err:
        raise StepFailed(err.msg, 'server arguments') from None
    if checked is None:
        return why
    ctx.facts.flags_checked = inputs.version
    return ''


def releases_differ(ctx: Context) -> bool:
    """This run would install another SGLang release than the host has (the no-change query read the installed one)."""
    return ctx.inputs.install and (ctx.facts.stamp or {}).get('sglang_version') != ctx.inputs.version


def check_flags_before_install(ctx: Context) -> None:
    """A release change, or the plan a rolling change asks before any worker leaves rotation (``preview``): the flags
    are checked from the release's wheel in the plan step, before the lock, the install (which would replace the
    running server's package) or a roll's drain; when the wheel cannot be read, the install step checks the installed
    release as before."""
    if ctx.inputs.check_args and not ctx.facts.unchanged and not ctx.plan.refusals and (releases_differ(ctx) or ctx.preview):
        check_wheel_flags(ctx)


def check_flags(ctx: Context) -> None:
    """A flag the release does not define, or a value its argparse refuses, fails here, before anything is written; in
    check mode with the release not installed yet, the flags are read from the wheel it would install."""
    if ctx.facts.flags_checked == ctx.inputs.version:
        return  # read from the release's wheel in the plan step
    p = ctx.plan
    if not ctx.facts.sglang_pending:
        ctx.run('llmops.sglang.sglang_server_flags', {'python': p.python, 'args': p.server_args}, 'server arguments')
        return
    why = check_wheel_flags(ctx)
    if why:
        ctx.warnings.append('check mode: the server arguments were not checked against SGLang %s, which is not installed on '
                            '%s yet and %s' % (ctx.inputs.version, ctx.host.name, why))


def run_preflight(ctx: Context) -> None:
    inputs, p = ctx.inputs, ctx.plan
    env = dict(inputs.environment, HOME=inputs.working_directory)
    res = ctx.run('llmops.sglang.sglang_preflight', {
        'unit': '%s.service' % inputs.name, 'user': inputs.user, 'python': p.python, 'server_args': p.server_args,
        'environment': env, 'working_directory': inputs.working_directory, 'cleanup': inputs.preflight_cleanup,
        'stop_timeout': inputs.preflight_stop_timeout, 'min_free_gb': inputs.preflight_min_free_gb,
        'gpu_devices': list(inputs.preflight_gpu_devices), 'shared_devices': list(inputs.preflight_shared_devices),
        'gpu_health': 'warn' if inputs.gpu_health == 'warn' else 'fail', 'kernel_log': inputs.kernel_log or None,
        'nvidia_smi': inputs.nvidia_smi or None,
        # sglang_service_gpu_health: off leaves out the GPU health check
        'checks': [check for check in PREFLIGHT_CHECKS if check != 'gpu_health' or inputs.gpu_health != 'off'],
        # refused in step configure, after every rank has been checked, with the ranks' differences
        'fail_on_problems': False}, 'pre-flight')
    ctx.facts.preflight = found(res, 'ok', 'msg', 'summary', 'rank', 'stopped', 'removed', 'failed_checks', 'checks')
    stopped = [str(s.get('pid')) for s in res.get('stopped') or []]
    # a failed pre-flight (or one that stopped orphans) is an event; a passed one is the result's (and the check's
    # PRE-FLIGHT column)
    ctx.host.say('pre-flight %s: %s%s' % ('ok' if res.get('ok') else 'FAILED', res.get('summary'),
                                          ', stopped orphans ' + ', '.join(stopped) if stopped else ''),
                 detail=bool(res.get('ok')) and not stopped)


def step_preflight(ctx: Context) -> None:
    """The check playbook's read-only pre-flight of the server as a deploy would start it (run in check mode, with
    sglang_service_preflight_cleanup false: it reports orphans and leaked shared memory and stops nothing)."""
    run_preflight(ctx)


def step_install(ctx: Context) -> None:
    """Take the host lock, install SGLang, apply or revert the SM120 patches, check the server arguments against the
    release and run the pre-flight: everything before the unit's configuration is touched."""
    inputs, p = ctx.inputs, ctx.plan
    if inputs.lock:
        # the lock is released by the end of the run and leaves nothing behind: not a change of the host
        lock = {'path': p.paths.lock, 'lease': p.lock_lease, 'timeout': inputs.lock_timeout,
                'holder': {'play': ctx.values.get('ansible_play_name') or 'sglang_service'}}
        res = ctx.act('llmops.sglang.sglang_host_lock', lock, counts=False)
        if res.get('failed'):
            raise StepFailed(res.get('msg') or 'could not take the SGLang lock %s' % p.paths.lock, 'host lock', found(res))
        ctx.facts.lock_token = res.get('token') or ''
        ctx.facts.lock_waited = bool(res.get('waited_for'))
        if res.get('waited_for'):
            notice_deployed_over(ctx, res['waited_for'])
    if inputs.install:
        if releases_differ(ctx):
            drain_server(ctx)  # pip would replace the package the running server still serves from
        install_sglang(ctx)
    if inputs.sm120_patch and not ctx.facts.sglang_pending:
        drain_server(ctx)  # the patch edits the running server's sources
        if patch_sm120(ctx, inputs.sm120_patch).get('changed'):
            ctx.facts.changes.append('SM120 patches')
    if inputs.check_args:
        check_flags(ctx)
    if inputs.preflight:
        run_preflight(ctx)
    if ctx.plan.multinode:
        drain_server(ctx)  # before any rank's configure step: the other ranks read its outcome there


def drains_here(ctx: Context) -> bool:
    """sglang_service_drain applies on this host: asked for, a real run, the rank that serves HTTP (rank 0). Pure."""
    return bool(ctx.inputs.drain) and not ctx.check_mode and ctx.plan.node_rank == 0


def drain_args(ctx: Context) -> Dict[str, Any]:
    """llmops.sglang.sglang_drain's options from sglang_service_drain (the server's own URL unless it names one)."""
    drain = ctx.inputs.drain
    args = {'url': ctx.plan.url, 'api_key': ctx.inputs.api_key or None}
    args.update((k, drain[k]) for k in DRAIN_OPTIONS if drain.get(k) is not None)
    return args


def drain_server(ctx: Context) -> None:
    """With sglang_service_drain (a server a rolling change took out of its gateway's rotation): wait until the running
    server has nothing in flight (llmops.sglang.sglang_drain) before this run changes the code it runs - before pip on a
    release change, before the SM120 patches - and, on a multi-node server, at the end of the install step, before any
    rank's configure step. Otherwise the restart drains it as its first step (no module run of its own: see
    ``step_restart``). The steps before run while the requests in flight end. Once per run; past its bound the drain's
    policy decides, and a failed drain stops the run with nothing changed."""
    if not drains_here(ctx) or ctx.facts.drain is not None:
        return
    began = time.monotonic()
    res = ctx.run('llmops.sglang.sglang_drain', drain_args(ctx), 'drain', read_only=True, must=False)
    # what the change waited for it: the module's run, not only its readings
    ctx.facts.drain = dict(found(res, *DRAIN_KEPT), waited=round(time.monotonic() - began, 3))
    ctx.host.say('%s: %s' % ('drain failed' if res.get('failed') else 'drained', res.get('msg') or 'no answer'), detail=True)
    if res.get('failed'):
        raise StepFailed('the server still has requests in flight: %s; %s.service was not touched'
                         % (res.get('msg') or 'the drain failed', ctx.inputs.name), 'drain', found(res, *DRAIN_KEPT))


def peer_drain_failed(ctx: Context) -> str:
    """The serving rank's failed drain, on the other ranks of a multi-node server (they must not restart it). Pure."""
    return next(('rank %s could not drain its server: %s' % (host, (peer.drain or {}).get('reason') or 'failed')
                 for host, peer in sorted(ctx.peers.items()) if (peer.drain or {}).get('outcome') == 'fail'), '')


def notice_deployed_over(ctx: Context, holder: Dict[str, Any]) -> None:
    """This run waited for another run's lock: when that run recorded a deployment meanwhile, this one deploys over
    it, and says so (the other run's table said ready for a configuration this run now replaces)."""
    before = (ctx.facts.stamp or {}).get('recorded_at')
    # the record alone (not the whole no-change query again: no health probe, no /proc read, no file digests)
    record = ctx.run('ansible.legacy.slurp', {'src': ctx.plan.paths.stamp}, 'the deployment record', read_only=True, must=False)
    after = None if record.get('failed') else recorded_at(record.get('content'))
    ctx.facts.deployed_over = deployed_over(holder, before, after, datetime.datetime.now(datetime.timezone.utc))
    if ctx.facts.deployed_over:
        ctx.host.say(ctx.facts.deployed_over)


def recorded_at(content: Optional[str]) -> Optional[str]:
    """The time of recording of a deployment record read with slurp (base64 JSON); None for none or a damaged one
    (pure: the record's shape is deploy/_stamp's, whose read() the no-change query uses)."""
    try:
        record = json.loads(base64.b64decode(content or '', validate=True))
    except (ValueError, TypeError):
        return None
    value = record.get('recorded_at') if isinstance(record, dict) else None
    return value if isinstance(value, str) else None


def deployed_over(holder: Dict[str, Any], before: Optional[str], after: Optional[str], now: datetime.datetime) -> str:
    """'deployed over a configuration from <user>@<controller> (<play>) <n> s earlier', or '' when the record did not
    change while this run waited (pure)."""
    if not after or after == before:
        return ''
    try:
        recorded = datetime.datetime.strptime(after, '%Y-%m-%dT%H:%M:%SZ').replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return ''
    who = '%s@%s' % (holder.get('user') or '?', holder.get('controller') or '?')
    if holder.get('play'):
        who += ' (%s)' % holder['play']
    return 'deployed over a configuration from %s %d s earlier' % (who, max(0, round((now - recorded).total_seconds())))


# ------------------------------------------------------------------------------------------------ configure

def layout_args(ctx: Context) -> Dict[str, Any]:
    """The account, directories, log file and compile caches, for one run of llmops.sglang.sglang_service_layout (was
    seven runs of ansible.builtin's group, getent, user and file and one of llmops.sglang.sglang_compile_cache: five
    payloads to build and eight module runs per host)."""
    inputs = ctx.inputs
    args: Dict[str, Any] = {}
    if inputs.create_user:
        # the device groups the host does not have are left out (the module reads the host's groups)
        args.update(user=inputs.user, group=inputs.group, home=inputs.working_directory, shell='/usr/sbin/nologin',
                    groups=list(inputs.device_groups))
    dirs = [(inputs.config_dir, 'root', 'root', '0755'), (inputs.working_directory, inputs.user, inputs.group, '0750')]
    if inputs.log_path:
        dirs.append((inputs.log_path.rsplit('/', 1)[0] or '/', 'root', inputs.group, '0750'))
    args['paths'] = [{'path': path, 'owner': owner, 'group': group, 'mode': mode} for path, owner, group, mode in dirs]
    if inputs.log_path:
        # SGLang logs its server_args (an API key read through --config among them): readable by root and the service's
        # group only, before systemd's append: creates it world-readable
        args['paths'].append({'path': inputs.log_path, 'state': 'file', 'owner': 'root', 'group': inputs.group, 'mode': '0640'})
    if inputs.warm_caches:
        args['compile_cache'] = {'root': inputs.cache_dir, 'version': inputs.version, 'owner': inputs.user, 'group': inputs.group,
                                 'keep': inputs.cache_keep, 'environment': inputs.environment}
    return args


def create_layout(ctx: Context) -> None:
    """The layout; with sglang_service_warm_caches, the compile caches' environment and directories in ctx.facts.caches."""
    res = ctx.run('llmops.sglang.sglang_service_layout', layout_args(ctx), 'service account, directories and compile caches')
    if ctx.inputs.warm_caches:
        ctx.facts.caches = found(res.get('compile_cache') or {}, 'environment', 'dirs', 'state')


def keeps_files(inputs: Inputs) -> bool:
    """The files this run replaces are kept: for a rollback, or for a drain in the restart that may fail after them."""
    return inputs.keeps_previous or bool(inputs.drain)


def write_file(ctx: Context, name: str, dest: str, content: str, mode: str, secret: bool, verify: str = 'none') -> None:
    """One configuration file, written atomically by llmops.sglang.sglang_config_file (a full disk fails naming the path,
    the old file untouched); a replaced file is kept as a backup for a rollback."""
    res = ctx.run('llmops.sglang.sglang_config_file', {'dest': dest, 'content': content, 'owner': 'root', 'group': 'root',
                                                       'mode': mode, 'verify': verify, 'backup': keeps_files(ctx.inputs),
                                                       'secret': secret},
                  name, secret=secret)
    if res.get('changed'):
        ctx.facts.changes.append(name)
    if res.get('backup_file'):
        ctx.facts.backups.append({'dest': dest, 'backup_file': res['backup_file'], 'secret': secret})
    if res.get('created'):
        ctx.facts.created.append(dest)
        if dest == ctx.plan.paths.unit:
            ctx.facts.startable = not ctx.check_mode  # check mode: a unit not installed yet is neither restarted nor started


def may_exist(facts: Facts, path: str) -> bool:
    """Whether PATH (one of probe_paths) may be on the host: the no-change query saw it, or did not look, or another run
    held the host lock since it looked. Pure."""
    stamp = facts.stamp
    if not isinstance(stamp, dict) or not isinstance(stamp.get('paths_present'), list) or facts.lock_waited:
        return True
    return path in stamp['paths_present']


def remove_key_file(ctx: Context) -> None:
    """An emptied API key removes the key file; the previous unit loads it as a credential, so it is kept for a rollback.
    No key file seen by the no-change query: nothing to keep or remove, no module run."""
    paths = ctx.plan.paths
    if not may_exist(ctx.facts, paths.secret_args):
        return
    if keeps_files(ctx.inputs):
        kept = ctx.run('ansible.legacy.copy', {'src': paths.secret_args, 'dest': paths.secret_args_kept, 'remote_src': True,
                                               'owner': 'root', 'group': 'root', 'mode': '0600'}, secret=True, must=False)
        ctx.facts.key_file_kept = bool(kept.get('changed')) and not kept.get('failed')
    res = ctx.run('ansible.legacy.file', {'path': paths.secret_args, 'state': 'absent'}, 'API-key file')
    if res.get('changed'):
        ctx.facts.changes.append('API-key file removed')


def write_files(ctx: Context) -> None:
    inputs, p, managed = ctx.inputs, ctx.plan, ctx.topo.ansible_managed
    env = dict((ctx.facts.caches or {}).get('environment') or {})
    env.update(inputs.environment)  # the cache variables first: the user's own settings win
    write_file(ctx, 'environment file', p.paths.env, environment_text(env, managed), '0644', False)
    write_file(ctx, 'secret environment file', p.paths.secret_env, environment_text(inputs.secret_environment, managed), '0600', True)
    if inputs.api_key:
        write_file(ctx, 'API-key file', p.paths.secret_args, secret_args_text(inputs.api_key), '0600', True)
    else:
        remove_key_file(ctx)
    # systemd-analyze verify checks the new unit before it replaces the old one; a warning counts as a failure
    write_file(ctx, 'unit file', p.paths.unit, unit_text(inputs, p, managed), '0644', False, verify='systemd-unit')


def restore_files(ctx: Context) -> str:
    """Put the previous configuration back; returns the API key the previous server runs with."""
    back = ctx.plan.rollback
    for item in back.restore:
        ctx.run('ansible.legacy.copy', {'src': item['backup_file'], 'dest': item['dest'], 'remote_src': True, 'mode': 'preserve'},
                'restore %s' % item['dest'], secret=bool(item['secret']))
    paths = ctx.plan.paths
    ctx.run('ansible.legacy.file', {'path': paths.secret_args_kept, 'state': 'absent'}, secret=True)
    for path in back.remove:
        ctx.run('ansible.legacy.file', {'path': path, 'state': 'absent'}, 'remove %s' % path)
    key = ctx.run('ansible.legacy.slurp', {'src': paths.secret_args}, secret=True, must=False, read_only=True)
    if key.get('failed') or not key.get('content'):
        return ''
    try:
        data = yaml.safe_load(base64.b64decode(key['content']).decode('utf-8', 'replace'))
    except yaml.YAMLError:
        return ''
    return str(data.get('api-key') or '') if isinstance(data, dict) else ''


def step_configure(ctx: Context) -> None:
    """Refuse the start on a failed pre-flight (any rank's) or ranks that differ; then the account, the directories,
    the caches and the files the unit runs with, each changed only where it differs."""
    inputs, p = ctx.inputs, ctx.plan
    peer_drain = peer_drain_failed(ctx)
    if peer_drain:
        raise StepFailed('%s; %s.service was not touched' % (peer_drain, inputs.name), 'drain')
    if inputs.preflight and inputs.preflight_enforce and p.rank_problems:
        raise StepFailed(' | '.join(list(p.rank_problems) + ['%s.service was not touched' % inputs.name]), 'pre-flight')
    create_layout(ctx)
    write_files(ctx)
    ctx.facts.own_reasons = list(ctx.plan.own_reasons)


# ------------------------------------------------------------------------------------------------ restart

def step_restart(ctx: Context) -> None:
    """The one restart decision of the role (the plan's reasons, the other ranks' included), then the start of a unit
    that is not running, and where the new run starts in the log."""
    inputs, p = ctx.inputs, ctx.plan
    reasons = list(p.restart_reasons)
    ctx.facts.restart_reasons = reasons
    unit = '%s.service' % inputs.name
    if ctx.check_mode:
        if not ctx.facts.startable:
            ctx.host.say('would deploy %s (not installed yet: nothing to restart)' % unit)
        elif reasons:
            ctx.host.say('would restart %s: %s' % (unit, ', '.join(reasons)))
        return
    if reasons:
        drains = drains_here(ctx) and ctx.facts.drain is None
        ctx.host.say('%srestarting %s: %s' % ('draining, then ' if drains else '', unit, ', '.join(reasons)))
        # (drain,) daemon-reload, reset-failed, stop, release check, log size, start, run record and enable in one module
        # run: no start, stat, reset-failed or run offset of its own after it
        args = {'unit': unit, 'log_path': inputs.log_path, 'run_file': p.paths.run_file, 'release_check': inputs.preflight,
                'reset_failed': inputs.preflight_enforce,
                'user': inputs.user, 'environment': inputs.environment, 'gpu_devices': list(inputs.preflight_gpu_devices),
                'shared_devices': list(inputs.preflight_shared_devices), 'cleanup': inputs.preflight_cleanup,
                'stop_timeout': inputs.preflight_stop_timeout}
        if drains:
            args['drain'] = drain_args(ctx)
        res = ctx.run('llmops.sglang.sglang_restart', args, 'restart of %s' % unit, must=False)
        drained = res.pop('drain', None)
        if drained:
            ctx.facts.drain = dict(((k, drained.get(k)) for k in DRAIN_KEPT), waited=drained.get('seconds'))
        if res.get('failed_step') == 'drain':
            undo_configure(ctx)
            raise StepFailed(res.get('msg') or 'the drain failed', 'drain', ctx.facts.drain)
        if res.get('failed'):
            raise StepFailed(res.get('msg') or 'module llmops.sglang.sglang_restart failed', 'restart of %s' % unit, found(res))
        ctx.facts.restart = found(res)
        ctx.facts.started = False
        ctx.facts.run_offset = offset_after_restart(inputs.log_path, res)
        return
    if inputs.preflight_enforce:
        reset_failed(ctx, unit)
    size = None
    if inputs.log_path:
        size = (ctx.run('ansible.legacy.stat', {'path': inputs.log_path, 'get_checksum': False, 'get_mime': False},
                        read_only=True).get('stat') or {}).get('size')
    res = ctx.run('ansible.legacy.systemd_service', {'name': unit, 'state': 'started', 'enabled': True, 'daemon_reload': True},
                  'start of %s' % unit)
    ctx.facts.started = bool(res.get('changed'))
    if inputs.log_path:
        offset = ctx.run('llmops.sglang.sglang_run_offset', {'unit': unit, 'path': p.paths.run_file, 'log_size': size or 0},
                         'log offset')
        ctx.facts.run_offset = offset.get('offset')


def undo_configure(ctx: Context) -> None:
    """The drain in the restart failed: the server was not touched, and the files the configure step wrote go back to
    what the running server was started with (kept with sglang_service_drain as for a rollback), so that a later start
    by systemd runs what runs now."""
    restore_files(ctx)
    ctx.host.say('drain failed: the previous configuration was put back (%s); %s.service was not touched'
                 % (ctx.plan.rollback.describe(), ctx.inputs.name))


def offset_after_restart(log_path: str, res: Dict[str, Any]) -> Optional[int]:
    """Where the restarted run starts in the log: sglang_restart measured the log between its stop and its start and
    recorded the new run at that size (its run record, what sglang_run_offset would read back). None without a log.
    Pure."""
    if not log_path:
        return None
    return int(res.get('log_size') or 0)


def reset_failed(ctx: Context, unit: str) -> None:
    """StartLimitBurst= bounds systemd's own restarts; a deliberate start by a deploy must not be refused for them (a
    restart resets the counter itself: sglang_restart reset_failed)."""
    res = ctx.run('ansible.legacy.command', {'argv': ['systemctl', 'reset-failed', unit]}, must=False, counts=False)
    if res.get('failed') and 'not loaded' not in (res.get('stderr') or ''):
        raise StepFailed('systemctl reset-failed %s: %s' % (unit, res.get('stderr') or res.get('msg')), 'start-rate counter',
                         found(res))
