# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""llmops.sglang.sglang_run_report: the table that ends a deploy or check run, printed once, rows returned as data."""

from __future__ import annotations

import json
import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmops.sglang.plugins.plugin_utils._run_report import columns_for, prints_now, render
from ansible_collections.llmops.sglang.plugins.plugin_utils._run_rows import KINDS, build_rows

display = Display()

ARGUMENT_SPEC = dict(
    kind=dict(type='str', required=True, choices=sorted(KINDS)),
    hosts=dict(type='list', elements='str'),
    query=dict(type='str'),
    path=dict(type='path'),
)


def select(rows, query):
    """Evaluate a JMESPath expression over the rows (a list of dicts); the jmespath library is needed only here."""
    try:
        import jmespath  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise AnsibleActionFail('query needs the jmespath Python library on the controller: pip install jmespath '
                                '(it is in the collection\'s requirements.txt)') from exc
    try:
        return jmespath.search(query, rows)
    except jmespath.exceptions.JMESPathError as exc:
        raise AnsibleActionFail('query %r is not a valid JMESPath expression: %s; rows have the keys %s'
                                % (query, exc, ', '.join(sorted(rows[0])) if rows else '(no rows)')) from exc


def write_rows(path, data):
    """The rows as JSON on the controller, replaced atomically (a reader never sees half a file)."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix='.sglang-report-')
        with os.fdopen(fd, 'w', encoding='utf-8') as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.write('\n')
        os.replace(tmp, path)
    except OSError as exc:
        raise AnsibleActionFail('cannot write the report rows to %s on the controller: %s; check the directory and its '
                                'permissions, or leave sglang_report_path unset' % (path, exc)) from exc


def query_lines(query, selected):
    """The query's answer on the screen: a list as one compact JSON line per element (one line per host, for queries
    over the rows), anything else as one line."""
    if isinstance(selected, list):
        return ['query %s: %d selected' % (query, len(selected))] + [json.dumps(item, sort_keys=True) for item in selected]
    return ['query %s: %s' % (query, json.dumps(selected, sort_keys=True))]


def summary_line(kind, rows, dry_run=False):
    """'deploy: 3 hosts, 2 ready (1 unchanged), 1 crashed' - the line above the table; a check-mode run says that it
    was a dry run ('deploy (dry run, check mode: nothing was changed): 2 hosts, 2 dry run (1 would deploy, ...)')."""
    counts = {}
    for row in rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    parts = []
    for status in sorted(counts, key=lambda s: (s != 'ready', s)):
        text = '%d %s' % (counts[status], status)
        kinds = {}
        for row in rows:
            if row.status == status and row.kind and (row.kind != 'unchanged' or status == 'ready'):
                kinds[row.kind] = kinds.get(row.kind, 0) + 1
        if status == 'ready':
            kinds = {'unchanged': kinds['unchanged']} if kinds.get('unchanged') else {}
        elif status != 'dry run':
            kinds = {}
        text += ' (%s)' % ', '.join('%d %s' % (n, k) for k, n in sorted(kinds.items())) if kinds else ''
        parts.append(text)
    what = '%s (dry run, check mode: nothing was changed)' % kind if dry_run else kind
    return 'llmops.sglang %s: %d host%s, %s' % (what, len(rows), '' if len(rows) == 1 else 's', ', '.join(parts))


class ActionModule(ActionBase):
    """Builds one row per host from what the run registered, prints the table once, returns the rows."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        parts = KINDS[args['kind']]
        hosts = args['hosts'] if args['hosts'] is not None else list(task_vars.get('ansible_play_hosts_all') or [])
        reached = list(task_vars.get('ansible_play_hosts') or hosts)
        hostvars = task_vars.get('hostvars') or {}
        facts_of = {}
        for host in hosts:
            known = hostvars[host] if host in hostvars else {}
            facts_of[host] = dict((p.var, known[p.var]) for p in parts if p.var in known)
        rows = build_rows(hosts, facts_of, parts, reached)
        data = [r.to_json() for r in rows]
        batch = list(task_vars.get('ansible_play_batch') or hosts)
        # With serial batches: print once, after the last batch or after a batch that failed (the play stops there).
        final = prints_now(hosts, reached, batch, rows)
        if final:
            display.display('\n'.join([summary_line(args['kind'], rows, bool(self._task.check_mode)), '']
                                      + render(rows, columns_for(parts, rows))))
        result.update(changed=False, rows=data, failed_hosts=[r.host for r in rows if not r.ok and r.status != 'not run'],
                      printed=final)
        if args['path']:
            write_rows(args['path'], data)
            result['path'] = args['path']
        if args['query']:
            result['selected'] = select(data, args['query'])
            if final:
                display.display('\n'.join(query_lines(args['query'], result['selected'])))
        return result
