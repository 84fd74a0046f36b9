# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the guard tells: one journal line per event (the guard's stdout goes to its unit's journal), its counters
as node_exporter textfile metrics beside the startup history's (``sglang_guard_events_total{kind=...}``), and the
summary the ``check`` playbook shows per host.

Pure functions over the guard's state; standard library only (runs on the target, Python 3.9+).
"""

from __future__ import annotations

import datetime
import os

from ansible_collections.llmops.sglang.plugins.module_utils.deploy._startup_history import label_text, number_text
from ansible_collections.llmops.sglang.plugins.module_utils.guard._decide import EVENT_KINDS

ACTIONS = ('restart', 'stop', 'out_of_rotation', 'none')
SHOW_EVENTS = 5


def utc_text(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def event_line(unit, event):
    """``sglang.service: hung -> restart: <reason>; <outcome>`` (one line, the journal's MESSAGE)."""
    outcome = '; %s' % event.outcome if event.outcome else ''
    return 'llmops.sglang guard: %s: %s -> %s: %s%s' % (unit, event.kind, event.action, event.reason, outcome)


def metrics_path_beside(history_path, unit):
    """The guard's .prom file in the directory of the startup history's metrics (node_exporter reads every *.prom
    there): ``<dir>/<unit stem>-guard.prom``; the history rewrites its own file at every start, so the guard's
    counters live in a file of their own."""
    return os.path.join(os.path.dirname(history_path), '%s-guard.prom' % unit.rsplit('.', 1)[0])


METRICS = (
    ('sglang_guard_events_total', 'counter', 'Events of the llmops.sglang guard by kind (hung, crash_loop, gpu_fault).'),
    ('sglang_guard_actions_total', 'counter', 'What the llmops.sglang guard did about its events (restart, stop, '
                                              'out_of_rotation, none).'),
    ('sglang_guard_failures', 'gauge', 'Rounds in a row whose generation request failed.'),
    ('sglang_guard_held', 'gauge', '1 while the guard keeps the server stopped after a GPU fault or a crash loop.'),
    ('sglang_guard_last_round_timestamp_seconds', 'gauge', 'Unix time of the guard\'s last round.'),
)


def prometheus_text(state, unit):
    """The guard's metrics in Prometheus text exposition format 0.0.4; every kind and action present (0 until it
    happens), so a rate() over them starts at the guard's installation."""
    base = 'unit="%s"' % label_text(unit)
    samples = {
        'sglang_guard_events_total': [('{%s,kind="%s"}' % (base, kind), state.counters.get(kind, 0)) for kind in EVENT_KINDS],
        'sglang_guard_actions_total': [('{%s,action="%s"}' % (base, action), state.actions.get(action, 0)) for action in ACTIONS],
        'sglang_guard_failures': [('{%s}' % base, state.failures)],
        'sglang_guard_held': [('{%s}' % base, 1 if state.held else 0)],
        'sglang_guard_last_round_timestamp_seconds': [('{%s}' % base, state.last_round)],
    }
    lines = []
    for name, kind, help_text in METRICS:
        lines.append('# HELP %s %s' % (name, help_text))
        lines.append('# TYPE %s %s' % (name, kind))
        lines.extend('%s%s %s' % (name, labels, number_text(value)) for labels, value in samples[name])
    return '\n'.join(lines) + '\n'


def summary(state, show=SHOW_EVENTS):
    """What ``check`` shows of the guard: its last round, what it saw then, the hold, the counters, the last events."""
    return {
        'rounds': state.rounds,
        'last_round': utc_text(state.last_round) if state.last_round else None,
        'last_kind': state.last_kind or None,
        'held': state.held or None,
        'failures': state.failures,
        'counters': dict((kind, state.counters.get(kind, 0)) for kind in EVENT_KINDS),
        'events': [event.to_json() for event in state.events[-show:]] if show else [],
    }


def short(summary_data):
    """One cell for a table: 'hung 1, crash_loop 0, gpu_fault 0; held: ...' or 'watching, no events'."""
    if not summary_data.get('rounds'):
        return 'installed, no round yet'
    counts = summary_data['counters']
    text = ', '.join('%s %d' % (kind, counts[kind]) for kind in EVENT_KINDS if counts.get(kind)) or 'no events'
    if summary_data.get('held'):
        text += '; holding it stopped'
    return text
