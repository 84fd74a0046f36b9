# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The table that ends a rolling change (llmops.sglang.roll): one row per worker - its batch, its drain, its change,
its start and its return to the gateway's rotation. Pure; rendered with the run report's table code."""

from __future__ import annotations

from typing import Any, List

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._drain import at_bound
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._roll import WorkerOutcome
from ansible_collections.llmops.sglang.plugins.plugin_utils._run_report import Column, one_line, render


def _drain(row: WorkerOutcome) -> str:
    if row.drain is None:
        return ''
    if row.drain == 'left':  # its change stopped before it reached the drain
        return '%s req, not drained' % (row.still_running if row.still_running is not None else '?')
    text = '%s req %.1fs' % (row.drained if row.drained is not None else '?', row.drain_seconds or 0.0)
    if row.drain == 'idle':
        if row.drain_at_timeout is not None:
            # policy wait: past drain_timeout it kept waiting until the server was idle
            return '%s, %s' % (text, at_bound(row.drain_at_timeout, row.drain_policy))
        return text
    return '%s, %s left (%s)' % (text, row.still_running if row.still_running is not None else '?', row.drain)


def _change(row: WorkerOutcome) -> str:
    if row.change == 'not run':
        return ''
    took = ' %.1fs' % row.change_seconds if row.change_seconds is not None else ''
    return row.change + took


def _start(row: WorkerOutcome) -> str:
    if not row.start:
        return ''
    return '%s %.1fs' % (row.start, row.start_seconds) if row.start_seconds is not None else row.start


def _return(row: WorkerOutcome) -> str:
    if row.returned is None:
        return ''
    if not row.returned:
        return 'no'
    return 'yes %.1fs' % (row.return_seconds or 0.0)


class _Cells:
    """A WorkerOutcome as the run report's render() reads a row."""

    def __init__(self, row: WorkerOutcome):
        self.values = {'worker': row.name, 'batch': str(row.batch or ''), 'drain': _drain(row), 'change': _change(row),
                       'start': _start(row), 'return': _return(row), 'status': row.status, 'reason': one_line(row.reason)}

    def cell(self, key: str) -> Any:
        return self.values[key]


COLUMNS = [Column('worker', 'WORKER'), Column('batch', 'BATCH', right=True), Column('status', 'STATUS'),
           Column('drain', 'DRAIN'), Column('change', 'CHANGE'), Column('start', 'START'), Column('return', 'RETURN'),
           Column('reason', 'REASON')]


def render_roll(rows: List[WorkerOutcome], stopped: str = '', dry_run: bool = False) -> str:
    counts = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    dry = ' (dry run, check mode: nothing was changed)' if dry_run else ''
    head = 'llmops.sglang roll%s: %d worker%s, %s%s' % (
        dry, len(rows), '' if len(rows) == 1 else 's', ', '.join('%d %s' % (n, s) for s, n in sorted(counts.items())),
        '; stopped: %s' % one_line(stopped) if stopped else '')
    return '\n'.join([head, ''] + render([_Cells(r) for r in rows], COLUMNS))
