# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tune playbook's report: which variant is best, and one table of every variant (controller side)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

# A variant that ran and was kept at the time it was measured; only these can be the best.
KEPT = ('first', 'accepted')
COLUMNS = (('variant', 'name', '%s'), ('status', 'status', '%s'), ('tok/s', 'output_tps', '%.0f'),
           ('change', 'change_pct', '%+.0f %%'), ('TTFT p50 ms', 'ttft_p50_ms', '%.0f'), ('power W', 'power_w', '%.0f'),
           ('signature', 'signature', '%s'), ('after rollback', 'after_rollback', '%s'))


def best_variant(rows):
    """The kept variant with the highest output tokens/s; the first row (the baseline) when none beat it."""
    kept = [row for row in rows if row.get('status') in KEPT and row.get('output_tps') is not None]
    if not kept:
        return rows[0] if rows else None
    return max(kept, key=lambda row: row['output_tps'])


def _cell(row, key, fmt):
    value = row.get(key)
    return '-' if value is None or value == '' else fmt % value


def table(rows, best=None):
    """Aligned text lines: a header and one line per variant, the best one marked with ``*``."""
    cells = [[title for title, _key, _fmt in COLUMNS]]
    cells += [[_cell(row, key, fmt) + ('*' if key == 'name' and row is best else '') for _title, key, fmt in COLUMNS]
              for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    return ['  '.join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells]


def sglang_tune_report(rows):
    if not isinstance(rows, list) or not all(isinstance(row, dict) and 'name' in row for row in rows):
        raise AnsibleFilterError('sglang_tune_report: expected a list of variant rows (dicts with a name), got %r' % (rows,))
    best = best_variant(rows)
    return {'best': best, 'table': table(rows, best)}


class FilterModule:
    def filters(self):
        return {'sglang_tune_report': sglang_tune_report}
