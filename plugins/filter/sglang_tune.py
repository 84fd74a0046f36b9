# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The tune playbook's variants and report: what is wrong with the variants given, which variant is best, and one
table of every variant (controller side)."""

from __future__ import annotations

import difflib

from ansible.errors import AnsibleFilterError

# The keys a variant may have (docs/tune.md); any other key would be ignored, and the variant would deploy the baseline.
VARIANT_KEYS = ('name', 'args', 'environment', 'sm120_patch')

# A variant that ran and was kept at the time it was measured; only these can be the best.
KEPT = ('first', 'accepted')
COLUMNS = (('variant', 'name', '%s'), ('status', 'status', '%s'), ('tok/s', 'output_tps', '%.0f'),
           ('change', 'change_pct', '%+.0f %%'), ('TTFT p50 ms', 'ttft_p50_ms', '%.0f'), ('power W', 'power_w', '%.0f'),
           ('signature', 'signature', '%s'), ('after rollback', 'after_rollback', '%s'))
SERVER = ('server', 'server', '%s')


def best_variant(rows):
    """The kept variant with the highest output tokens/s; the first row (the baseline) when none beat it."""
    kept = [row for row in rows if row.get('status') in KEPT and row.get('output_tps') is not None]
    if not kept:
        return rows[0] if rows else None
    return max(kept, key=lambda row: row['output_tps'])


def _cell(row, key, fmt):
    value = row.get(key)
    return '-' if value is None or value == '' else fmt % value


def table(rows, best_rows):
    """Aligned text lines: a header and one line per variant, each server's best marked with ``*``; a server column
    when the rows come from more than one server."""
    columns = ((SERVER,) if len({row.get('server') for row in rows}) > 1 else ()) + COLUMNS
    cells = [[title for title, _key, _fmt in columns]]
    cells += [[_cell(row, key, fmt) + ('*' if key == 'name' and any(row is best for best in best_rows) else '')
               for _title, key, fmt in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return ['  '.join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells]


def sglang_tune_variant_problems(variants):
    """One sentence per variant key the tune playbook does not know, naming the variant, the key and the nearest valid
    key; an empty list when every key is known. A misspelled key (``arg``, ``enviroment``) would otherwise be ignored:
    the variant would deploy nothing new and be measured against itself."""
    if not isinstance(variants, list):
        return ['sglang_tune_variants must be a list of variants, got %r.' % (variants,)]
    problems = []
    for index, variant in enumerate(variants):
        if not isinstance(variant, dict):
            problems.append('sglang_tune_variants[%d] must be a mapping with keys %s, got %r.'
                            % (index, ', '.join(VARIANT_KEYS), variant))
            continue
        label = 'variant %r' % variant['name'] if variant.get('name') else 'sglang_tune_variants[%d]' % index
        for key in variant:
            if key in VARIANT_KEYS:
                continue
            near = difflib.get_close_matches(str(key), VARIANT_KEYS, n=1, cutoff=0.5)
            problems.append('%s has the key %r, which the tune does not know%s (a variant takes %s).'
                            % (label, key, ": did you mean '%s'?" % near[0] if near else '', ', '.join(VARIANT_KEYS)))
    return problems


def sglang_tune_report(rows):
    if not isinstance(rows, list) or not all(isinstance(row, dict) and 'name' in row for row in rows):
        raise AnsibleFilterError('sglang_tune_report: expected a list of variant rows (dicts with a name), got %r' % (rows,))
    servers = []
    for row in rows:
        if row.get('server') not in servers:
            servers.append(row.get('server'))
    best_by_server = {server: best_variant([row for row in rows if row.get('server') == server]) for server in servers}
    best = best_by_server[servers[0]] if len(servers) == 1 else None
    return {'best': best, 'best_by_server': {str(server): row for server, row in best_by_server.items()},
            'table': table(rows, list(best_by_server.values()))}


class FilterModule:
    def filters(self):
        return {'sglang_tune_report': sglang_tune_report, 'sglang_tune_variant_problems': sglang_tune_variant_problems}
