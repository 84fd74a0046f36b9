# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One guard round: observe -> decide -> act -> record -> report; and ``main``, the program the guard's systemd
service runs every interval (``<python> -I <install dir>/sglang-guard.py --config <settings>``).

Rounds never overlap: the service is a oneshot its timer starts only when it is not running, and a round takes an
exclusive lock beside its state file. An event is written to the journal (stdout) once, when it is new or when the
guard acted on it; a hold or a spent restart budget is not repeated every round.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shutil
import sys
import time

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _lock
from ansible_collections.llmops.sglang.plugins.module_utils.deploy._startup_history import write_text
from ansible_collections.llmops.sglang.plugins.module_utils.guard import _report as report
from ansible_collections.llmops.sglang.plugins.module_utils.guard._act import Actor
from ansible_collections.llmops.sglang.plugins.module_utils.guard._config import GuardConfig, problems
from ansible_collections.llmops.sglang.plugins.module_utils.guard._decide import Params, decide
from ansible_collections.llmops.sglang.plugins.module_utils.guard._gateway import GatewayRotation
from ansible_collections.llmops.sglang.plugins.module_utils.guard._observe import Observer, describe
from ansible_collections.llmops.sglang.plugins.module_utils.guard._state import GuardEvent, advance, read, write
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import local_run
from ansible_collections.llmops.sglang.plugins.module_utils.host._procfs import boot_id


def _is_new(decision, state):
    return decision.action != 'none' or decision.kind != state.last_kind


def record(new, decision, outcome, invocation, keep):
    """The event of this round into the new state (counters, hold, rotation, restarts); returns the event."""
    action = outcome.action if outcome is not None else 'none'
    event = GuardEvent(at=report.utc_text(new.last_round), kind=decision.kind, action=action, reason=decision.reason,
                       outcome=outcome.outcome if outcome is not None else '', invocation=invocation)
    new.events = (new.events + [event])[-keep:]
    new.counters[decision.kind] = new.counters.get(decision.kind, 0) + 1
    new.actions[action] = new.actions.get(action, 0) + 1
    if outcome is None:
        return event
    if outcome.in_rotation is not None:
        new.out_of_rotation = not outcome.in_rotation
    if outcome.held:
        new.held, new.held_invocation = outcome.held, invocation
        new.restarts = []  # the loop is over; a start after this one begins a new count
    if outcome.restarted:
        new.guard_restarts.append(new.last_round)
        new.failures, new.nrestarts = 0, None
    if outcome.ok and outcome.action == 'restart':
        new.serving_invocation = new.invocation = ((outcome.restart or {}).get('invocation') or '')
    return event


def say(message):
    """One line on stdout: the guard's service sends it to the journal."""
    sys.stdout.write(message + '\n')
    sys.stdout.flush()


def deploying(lock_path, now):
    """Who holds the deploy's host lock (deploy/_lock) now, or '' (no lock file, or a stale one)."""
    if not lock_path:
        return ''
    record, dummy = _lock.read_record(lock_path, check_mode=True)
    if record is None or _lock.stale_reason(record, now, boot_id()):
        return ''
    return record.holder.describe()


def run_once(config, run=local_run, which=shutil.which, clock=time.time, log=say, rotation=None):
    """One round with ``config``; returns what it decided and did (the state is written, metrics too). While a deploy
    holds the host lock the round only records that: the deploy restarts and waits, the guard does not act beside it."""
    state, damage = read(config.state_path)
    if damage is not None:
        log('llmops.sglang guard: %s' % damage.message('guard state'))
    holder = deploying(config.lock_path, clock())
    if holder:
        state.last_round, state.last_kind, state.rounds = clock(), 'deploying', state.rounds + 1
        write(config.state_path, state)
        return {'decision': {'kind': 'deploying', 'action': 'none', 'reason': 'a deploy holds the host lock: %s' % holder},
                'observed': [], 'event': None, 'outcome': None, 'summary': report.summary(state)}
    if rotation is None and config.gateway is not None:
        rotation = GatewayRotation(config.gateway)
    obs = Observer(config, run, which).observe(state)
    now = clock()
    decision = decide(obs, state, Params.of(config), now)
    new = advance(state, obs, decision, now, (config.restart_window, config.crash_window))
    outcome = event = None
    if decision.event and _is_new(decision, state):
        outcome = Actor(config, run, which, rotation).act(decision, state)
        event = record(new, decision, outcome, obs.invocation, config.events_keep)
        log(report.event_line(config.unit, event))
    write(config.state_path, new)
    if config.metrics_path:
        write_text(config.metrics_path, report.prometheus_text(new, config.unit))
    return {'decision': {'kind': decision.kind, 'action': decision.action, 'reason': decision.reason},
            'observed': describe(obs), 'event': event.to_json() if event else None,
            'outcome': outcome.to_json() if outcome else None, 'summary': report.summary(new)}


def load(path):
    with open(path, encoding='utf-8') as handle:
        return GuardConfig.from_json(json.load(handle))


def main(argv=None, log=say):
    parser = argparse.ArgumentParser(prog='sglang-guard', description='One round of the llmops.sglang guard (docs/guard.md).')
    parser.add_argument('--config', required=True, help='the guard\'s settings (JSON, written by llmops.sglang.sglang_guard)')
    parser.add_argument('--json', action='store_true', help='print the round\'s result as JSON')
    args = parser.parse_args(argv)
    try:
        config = load(args.config)
    except (OSError, ValueError, TypeError, KeyError) as err:
        log('llmops.sglang guard: cannot read the settings %s: %s; run llmops.sglang.sglang_guard again' % (args.config, err))
        return 2
    found = problems(config)
    if found:
        log('llmops.sglang guard: the settings %s are not usable: %s' % (args.config, '; '.join(found)))
        return 2
    lock_path = config.state_path + '.lock'
    os.makedirs(os.path.dirname(os.path.abspath(lock_path)), exist_ok=True)
    with open(lock_path, 'a', encoding='utf-8') as lock:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            log('llmops.sglang guard: another round of %s is running; this one is skipped' % config.unit)
            return 0
        result = run_once(config, log=log)
    if args.json:
        log(json.dumps(result, sort_keys=True))
    return 0
