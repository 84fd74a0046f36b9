# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Controller side of llmops.sglang.wait_for_sglang: drives the module in short rounds and prints live progress."""

from __future__ import annotations

import json
import os
import random
import time

from ansible import constants as C
from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmops.sglang.plugins.module_utils.wait._state import TERMINAL, ProgressEvent
from ansible_collections.llmops.sglang.plugins.module_utils.wait._spec import argument_spec

display = Display()

MODULE = 'llmops.sglang.wait_for_sglang'
PER_ROUND_KEYS = ('_events', '_state')
# Rounds end on a terminal status at once and shortly (2-5 s) after a stage change, so their length only bounds how
# late new log lines appear at -v and how often a module process is started (CPU, ~0.3 s each) in long, quiet stages.
ROUND_SECONDS_QUIET = 60.0
ROUND_SECONDS_VERBOSE = 5.0
CONTROLLER_GRACE = 120.0
# Multi-node deployments: short rounds so a failed peer rank ends this rank's wait within about 2 s.
ROUND_SECONDS_PEERS = 2.0
PEER_FAILURES = ('crashed', 'stalled', 'timeout')
# A lost connection (SSH down, the host rebooting) is retried after 1, 2, 4, ... seconds, at most BACKOFF_CAP, each with
# -20..+20 % jitter so many hosts that lost one link do not reconnect in lock step (as ansible.builtin.reboot does),
# until unreachable_timeout seconds have passed since the connection was lost.
BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0
BACKOFF_JITTER = 0.2


def backoff_delay(attempt, rand=random.random):
    """Seconds before retry number `attempt` (0 = the first): BACKOFF_BASE * 2**attempt up to BACKOFF_CAP, jittered."""
    delay = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** min(attempt, 16))
    return delay * (1.0 - BACKOFF_JITTER + 2 * BACKOFF_JITTER * rand())


class Unreachable(Exception):
    """The host stayed unreachable for unreachable_timeout seconds."""


class Reconnector:
    """Runs a module round; rides out a lost connection with backoff, one progress line per retry, bounded by
    `limit` seconds since the connection was lost. The caller keeps the wait's state, so a retry continues the wait."""

    def __init__(self, host, limit, clock=time.monotonic, sleeper=time.sleep, rand=random.random, say=None):
        self.host, self.limit = host, float(limit)
        self.clock, self.sleeper, self.rand = clock, sleeper, rand
        self.say = say or display.display
        self.lost_for = []  # seconds the connection was lost, one entry per gap ridden out

    def call(self, run_round, reset):
        lost_at, attempt = None, 0
        while True:
            try:
                res = run_round()
            except AnsibleConnectionFailure as exc:
                now = self.clock()
                lost_at = now if lost_at is None else lost_at
                gone = now - lost_at
                delay = min(backoff_delay(attempt, self.rand), max(0.0, self.limit - gone))
                if gone >= self.limit:
                    raise Unreachable('%s' % exc) from exc
                self.say('%s: connection lost (%s), retrying in %ds; %ds of %ds'
                         % (self.host, _first_line(exc), round(delay), gone, self.limit))
                self.sleeper(delay)
                reset()
                attempt += 1
                continue
            if lost_at is not None:
                self.lost_for.append(round(self.clock() - lost_at, 1))
            return res


def _first_line(exc):
    text = ('%s' % exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:120]


def _peer_dir(deployment):
    # DEFAULT_LOCAL_TMP is made once per ansible-playbook run and shared by its forked workers, and removed at
    # exit, so files here belong to this run only and never go stale. The caller's deployment key also carries the
    # task's UUID (the same on every host running that task), so a later wait in the same run starts clean.
    safe = ''.join(c if c.isalnum() or c in '-_.' else '_' for c in deployment)
    return os.path.join(C.DEFAULT_LOCAL_TMP, 'llmops-sglang-peers', safe)


def report_peer_failure(deployment, host, res, node_rank):
    """Tell the other ranks of this deployment (same ansible-playbook run) how this rank ended (failed or ready)."""
    path = _peer_dir(deployment)
    os.makedirs(path, exist_ok=True)
    record = dict((k, res.get(k)) for k in ('status', 'stage', 'signature', 'error_line', 'root_cause', 'msg'))
    record.update(host=host, node_rank=node_rank)
    tmp = os.path.join(path, '.%s.json.tmp' % host)
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump(record, f)
    os.replace(tmp, os.path.join(path, '%s.json' % host))  # atomic: readers never see half a record


def first_peer_failure(deployment, host):
    """The failure record of another rank of this deployment, or None."""
    path = _peer_dir(deployment)
    try:
        names = sorted(n for n in os.listdir(path) if n.endswith('.json') and n != '%s.json' % host)
    except FileNotFoundError:
        return None
    for name in names:
        try:
            with open(os.path.join(path, name), encoding='utf-8') as f:
                record = json.load(f)
        except (OSError, ValueError):
            continue
        if record.get('status') != 'ready':
            return record
    return None


def peers_finished(deployment):
    """How many ranks of this deployment have recorded how they ended."""
    try:
        return sum(1 for n in os.listdir(_peer_dir(deployment)) if n.endswith('.json'))
    except FileNotFoundError:
        return 0


def peer_failed_result(host, res, peer, deployment):
    """This rank's result when another rank of the deployment failed first."""
    res = dict(res)
    res.update(
        status='crashed',
        ready=False,
        signature=peer.get('signature') or peer.get('status'),
        error_line=peer.get('error_line'),
        root_cause=peer.get('root_cause'),
        peer_failure=peer,
        msg='SGLang deployment %s failed on rank %s (%s): %s; %s stopped waiting at stage %s (node rank %s)'
            % (deployment, peer.get('node_rank'), peer.get('host'), peer.get('msg') or peer.get('status'), host,
               res.get('stage'), res.get('node_rank', '?')),
    )
    return res


def unreachable_result(host, last, exc, limit):
    """The result when the host stayed unreachable past unreachable_timeout: the last round's view, status unreachable."""
    res = dict(last or {})
    stage = res.get('stage') or 'start'
    res.update(
        status='unreachable', ready=False,
        msg='SGLang on %s: the host is unreachable: no connection for %ds (unreachable_timeout) while waiting at stage %s '
            '(%s); the server was not touched: rerun when the host is back and the wait follows the same start '
            '(nothing is restarted while it is still starting or ready)' % (host, limit, stage, _first_line(exc)))
    return res


def public_argument_spec():
    return dict((k, v) for k, v in argument_spec().items() if not k.startswith('_'))


def progress_line(host, res, probe_only=False):
    """The one line printed per stage change (and per 25 % of a progress bar); a check-mode probe waited for nothing."""
    stage = res.get('stage') or 'start'
    pct = res.get('progress')
    status = res.get('status')
    text = stage if pct is None or status in TERMINAL else '%s %d%%' % (stage, pct)
    if status == 'ready':
        text = 'ready'  # a server found serving has no stage of its own to show (it stays at "start")
    elif status == 'crashed':
        text = 'crashed at %s: %s' % (stage, res.get('signature'))
        if res.get('ready_elapsed') is not None:
            after = float(res.get('elapsed') or 0.0) - res['ready_elapsed']
            text = 'crashed %.1fs after ready: %s' % (after, res.get('signature'))
    elif status in ('stalled', 'timeout', 'error', 'unreachable', 'rebooted'):
        text = '%s at %s' % (status, stage)
    if probe_only:
        return '%s: %s (one probe, check mode)' % (host, text)
    return '%s: %s (%.1fs)' % (host, text, float(res.get('elapsed') or 0.0))


# Stage events seen within this many seconds of each other (a burst of log lines read at once, a start replayed fast) share
# one progress line.
COALESCE_SECONDS = 1.0


class Progress:
    """Prints one line per host for each moment a stage is reached or a progress bar passes a quarter, from the module's
    typed progress events (stages reached together share the line); new log lines at -v, raw probe results at -vvv."""

    def __init__(self, host, probe_only=False, stable_for=0):
        self.host = host
        self.probe_only = probe_only  # check mode: one probe, no wait, no time worth printing
        self.stable_for = stable_for
        self.shown = None  # (stage, percent) of the last line printed
        self.burst = []  # [(key, text, elapsed, suffix)] seen within COALESCE_SECONDS, not printed yet

    def _print(self, key, line):
        if key != self.shown:
            # a check-mode probe is the task's result, not progress (the check playbook's table shows it): -v only
            (display.v if self.probe_only else display.display)(line)
            self.shown = key

    def _add(self, key, text, elapsed, suffix=''):
        if self.burst and elapsed - self.burst[0][2] > COALESCE_SECONDS:
            self._flush()
        if key == (self.burst[-1][0] if self.burst else self.shown):
            return
        stage = key[0]
        # a later percentage of the same stage in the same burst says all the earlier ones said
        self.burst = [item for item in self.burst if item[0][0] != stage or stage == 'stability'] + [(key, text, elapsed, suffix)]

    def _flush(self):
        if self.burst:
            last = self.burst[-1]
            self._print(last[0], '%s: %s (%.1fs)%s' % (self.host, ', '.join(item[1] for item in self.burst), last[2], last[3]))
            self.burst = []

    def round(self, res):
        for raw in res.get('_events') or []:
            event = ProgressEvent.from_json(raw)
            if event.kind == 'stage' and event.stage == 'stability':
                self._add(('stability', None), 'ready', event.elapsed, ', watching it for stable_for=%ss' % self.stable_for)
            elif event.kind == 'stage' and event.stage != 'ready':  # ready is said by the verdict line
                self._add((event.stage, None), event.stage, event.elapsed)
            elif event.kind == 'progress':
                self._add((event.stage, event.percent), '%s %d%%' % (event.stage, event.percent), event.elapsed)
            elif event.kind == 'line':
                display.v(event.text, host=self.host)
            elif event.kind == 'dropped':
                display.v('(%d more log lines not shown; see log_tail)' % event.count, host=self.host)
            elif event.kind == 'probe' and display.verbosity >= 3:
                display.vvv('probe %s' % json.dumps(event.data, sort_keys=True, default=str), host=self.host)
        self._flush()
        if res.get('status') in TERMINAL:
            self._print(('', res.get('status')), progress_line(self.host, res, self.probe_only))
        elif self.shown is None:  # the first round: say where the start is
            self._print((res.get('stage') or 'start', res.get('progress')), progress_line(self.host, res, self.probe_only))


def round_length(check_mode, multinode):
    """Longest duration of one module round: none in check mode (one probe), short for the ranks of a multi-node
    deployment (a failed peer ends this wait within about 2 s), else long while quiet and shorter at -v."""
    if check_mode:
        return 0.0
    seconds = ROUND_SECONDS_VERBOSE if display.verbosity >= 1 else ROUND_SECONDS_QUIET
    return min(seconds, ROUND_SECONDS_PEERS) if multinode else seconds


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def _reset(self, host):
        try:
            self._connection.reset()
        except Exception as reset_exc:  # pylint: disable=broad-except
            display.vvv('connection reset failed: %s' % reset_exc, host=host)

    def run(self, tmp=None, task_vars=None):
        task_start = time.monotonic()
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp  # not used

        validation, new_args = self.validate_argument_spec(
            argument_spec=public_argument_spec(),
            required_one_of=[('log_path', 'unit', 'url')],
            required_by={'served_model_name': 'url'},
        )
        del validation
        host = task_vars.get('inventory_hostname') or self._play_context.remote_addr or 'localhost'
        check_mode = bool(self._task.check_mode)
        deployment = new_args.get('deployment')
        if deployment:
            deployment = '%s-%s' % (deployment, getattr(self._task, '_uuid', ''))
        round_seconds = round_length(check_mode, bool(deployment))
        deadline = (time.monotonic() + float(new_args.get('timeout') or 1800) + float(new_args.get('stable_for') or 0)
                    + CONTROLLER_GRACE)

        state = {}
        progress = Progress(host, probe_only=check_mode, stable_for=new_args.get('stable_for') or 0)
        reconnect = Reconnector(host, new_args.get('unreachable_timeout') or 0)
        res = {}
        rounds = 0
        try:
            while True:
                module_args = dict(new_args, _state=state, _round_seconds=round_seconds, _host=host)
                if not state:  # the first round: timeout counts from the task's start (see the module's _spent)
                    module_args['_spent'] = time.monotonic() - task_start
                try:
                    res = reconnect.call(
                        lambda: self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars),
                        lambda: self._reset(host))
                except Unreachable as exc:
                    res = unreachable_result(host, res, exc, reconnect.limit)
                    display.display(progress_line(host, res))
                    break
                rounds += 1
                if res.get('failed') or '_state' not in res:
                    # argument or environment problem reported by the module itself (no wait happened)
                    res.pop('_state', None)
                    result.update(res)
                    result['failed'] = True
                    return result
                state = res['_state']
                progress.round(res)
                if deployment and not check_mode:
                    res = self._with_peers(host, res, deployment, new_args, deadline)
                if check_mode or res.get('status') in TERMINAL:
                    break
                if time.monotonic() > deadline:
                    res['status'] = 'timeout'
                    res['msg'] = ('SGLang on %s: the controller gave up after %d rounds past timeout=%ss; the module '
                                  'rounds did not end the wait (last stage %s)' % (host, rounds, new_args.get('timeout'),
                                                                                   res.get('stage')))
                    break
        finally:
            try:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            except AnsibleConnectionFailure:
                pass  # the host is unreachable: its temporary directory goes with the next connection's cleanup

        for key in PER_ROUND_KEYS:
            res.pop(key, None)
        result.update(res)
        result['connection_lost'] = reconnect.lost_for
        result['changed'] = False
        result['failed'] = (res.get('status') != 'ready') and not check_mode
        return result

    def _with_peers(self, host, res, deployment, args, deadline):
        """A rank of a multi-node deployment: tell the other ranks how this one ended, and end this wait when another
        rank failed first; a ready rank waits for every other rank's outcome."""
        if res.get('status') in PEER_FAILURES or res.get('status') == 'ready':
            report_peer_failure(deployment, host, res, args.get('node_rank'))
        if res.get('status') == 'ready' and args.get('deployment_size'):
            return self._await_peers(host, res, deployment, args, deadline)
        if res.get('status') not in TERMINAL:
            peer = first_peer_failure(deployment, host)
            if peer:
                res = peer_failed_result(host, dict(res, node_rank=args.get('node_rank')), peer, args['deployment'])
                display.display(progress_line(host, res))
        return res

    @staticmethod
    def _await_peers(host, res, deployment, args, deadline):
        """This rank is ready: wait until every rank of the deployment ended; fail if another rank failed."""
        size = int(args['deployment_size'])
        while True:
            peer = first_peer_failure(deployment, host)
            if peer:
                res = peer_failed_result(host, dict(res, node_rank=args.get('node_rank')), peer, args['deployment'])
                display.display(progress_line(host, res))
                return res
            if peers_finished(deployment) >= size:
                return res
            if time.monotonic() > deadline:
                res = dict(res, status='timeout', ready=False,
                           msg='SGLang on %s is ready, but not every rank of deployment %s ended its start within '
                               'timeout=%ss' % (host, args['deployment'], args.get('timeout')))
                return res
            time.sleep(0.2)
