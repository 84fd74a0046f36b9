# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark-free matrix of llmops.sglang.sglang_patch_sm120 over released SGLang versions.

For every release of sglang on PyPI from 0.4.6 to the newest (or the versions given on the
command line, or ``--minor-ends`` for the first and last release of each minor line) this
downloads the real wheel (cached, see tests/sglang_wheels.py), copies the patcher's files into a
scratch package and runs the module's logic for real:

  check   state=present in check mode: per-site status, nothing written (file hashes compared)
  apply   state=present: the patched files are written (byte-compiled first with this interpreter)
  idem    state=present again: changed=false and the files are unchanged
  revert  state=absent: every file is byte-identical to the released wheel's file
  again   state=absent again: changed=false
  cycle   apply once more: identical bytes to the first apply (apply/revert/apply is stable)
  variant where GLM-5 exists: switch to glm5_only=false (changed), then revert: byte-exact again

Every apply also byte-compiles the new text with this interpreter before writing (a failure is an error).

Prints a markdown table (``--output FILE`` writes it too).  Exit status 1 if any release
fails a check.  Usage:  PYTHONPATH=/path/above/ansible_collections python tests/sm120_matrix.py
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position

try:
    from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _sm120_patch as sm  # noqa: E402
except ImportError:  # pragma: no cover - run from a checkout that is not under ansible_collections/
    sys.exit('put the directory above ansible_collections/ on PYTHONPATH (see the docstring)')

SHORT = {
    sm.SITE_GATE: 'gate (C)',
    sm.SITE_AUTO: 'auto-enable (A)',
    sm.SITE_GLM5: 'GLM-5 MoE (G)',
    sm.SITE_RESOLVER: 'resolver (F)',
}


def one(version):
    row = {'version': version}
    tmp = Path(tempfile.mkdtemp(prefix='sm120-matrix-'))
    try:
        pkg = sglang_wheels.copy_tree(version, tmp)
        pristine = sglang_wheels.snapshot(pkg)
        params = {'sglang_path': str(pkg), 'python': sys.executable, 'state': 'present', 'glm5_only': True}

        def call(state, check=False):
            return sm.run_patch(dict(params, state=state), sglang_wheels.run_command, check_mode=check)

        try:
            res = call('present', check=True)
        except sm.PatchError as err:
            row['error'] = err.msg
            return row
        row['detected'] = res['sglang_version']
        row['sites'] = {}
        for site in res['sites']:
            shape = re.search(r'shape (\w+)', site['reason'])
            status = 'patchable' if site['status'] == 'applied' else site['status']
            row['sites'][site['name']] = status + (' ' + shape.group(1) if shape else '')
        row['check'] = 'ok' if sglang_wheels.snapshot(pkg) == pristine else 'WROTE'
        if not res['changed']:
            row.update(apply='-', idem='-', revert='-', again='-', cycle='-', variant='-')
            return row
        first = call('present')
        after_first = sglang_wheels.snapshot(pkg)
        row['apply'] = 'ok' if first['changed'] and after_first != pristine else 'FAIL'
        second = call('present')
        row['idem'] = 'ok' if not second['changed'] and sglang_wheels.snapshot(pkg) == after_first else 'FAIL'
        third = call('absent')
        row['revert'] = 'ok' if third['changed'] and sglang_wheels.snapshot(pkg) == pristine else 'FAIL'
        fourth = call('absent')
        row['again'] = 'ok' if not fourth['changed'] and sglang_wheels.snapshot(pkg) == pristine else 'FAIL'
        call('present')
        row['cycle'] = 'ok' if sglang_wheels.snapshot(pkg) == after_first else 'FAIL'
        if any(s['name'] == sm.SITE_GLM5 and s['status'] == 'applied' for s in res['sites']):
            switched = sm.run_patch(dict(params, glm5_only=False), sglang_wheels.run_command)
            call('absent')
            row['variant'] = 'ok' if switched['changed'] and sglang_wheels.snapshot(pkg) == pristine else 'FAIL'
        else:
            call('absent')
            row['variant'] = '-'
    except sm.PatchError as err:
        row['error'] = err.msg
    finally:
        shutil.rmtree(str(tmp), ignore_errors=True)
    return row


def minor_ends(versions):
    """First and last release of each X.Y.Z line (0.5.9 and 0.5.9.postN form one line)."""
    lines = {}
    for ver in versions:
        lines.setdefault('.'.join(ver.split('.')[:3]), []).append(ver)
    picked = []
    for vers in lines.values():
        for ver in (vers[0], vers[-1]):
            if ver not in picked:
                picked.append(ver)
    return picked


def table(rows):
    head = ['version'] + [SHORT[s] for s in sm.SITE_NAMES]
    head += ['check writes nothing', 'apply + compile', 'idempotent', 'revert exact', 'revert idempotent', 'apply/revert/apply',
             'GLM-5 variant switch + revert']
    out = ['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head)]
    for row in rows:
        if 'error' in row and 'sites' not in row:
            out.append('| %s | ERROR: %s |' % (row['version'], row['error'].replace('|', '/').replace('\n', ' ')[:300]) + ' |' * (len(head) - 2))
            continue
        cells = [row['version']] + [row['sites'].get(s, '?') for s in sm.SITE_NAMES]
        cells += [row.get(k, 'ERROR') for k in ('check', 'apply', 'idem', 'revert', 'again', 'cycle', 'variant')]
        out.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('versions', nargs='*', help='releases to check (default: every release from 0.4.6 on PyPI)')
    parser.add_argument('--minor-ends', action='store_true', help='only the first and last release of each X.Y.Z line')
    parser.add_argument('--output', help='also write the markdown table to this file')
    args = parser.parse_args()
    versions = args.versions or sglang_wheels.released_versions('0.4.6')
    if args.minor_ends:
        versions = minor_ends(versions)
    started = time.monotonic()
    rows = []
    for ver in versions:
        row = one(ver)
        rows.append(row)
        print('%-14s %s' % (ver, row.get('error') or ' '.join('%s' % v for v in row.get('sites', {}).values())), file=sys.stderr, flush=True)
    text = table(rows)
    failed = [r['version'] for r in rows
              if 'error' in r or any(r.get(k) in ('FAIL', 'WROTE') for k in ('check', 'apply', 'idem', 'revert', 'again', 'cycle', 'variant'))]
    summary = '%d releases checked in %.0f s with Python %s; %d failed%s' % (
        len(rows), time.monotonic() - started, sys.version.split()[0], len(failed), (': ' + ', '.join(failed)) if failed else '')
    print(text)
    print()
    print(summary)
    if args.output:
        Path(args.output).write_text(text + '\n')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
