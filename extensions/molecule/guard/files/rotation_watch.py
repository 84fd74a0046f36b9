# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Test tooling of the molecule scenario guard (not part of the collection): watches, on the host, the SGLang model
gateway's worker list beside the server's unit while the guard restarts a hung server, and says what it saw.

Every sample reads, in this order: the unit (``systemctl show``: ActiveState, InvocationID) and the server's
``GET /health``, then the gateway's ``GET /workers`` (is the worker listed, draining, healthy), then the unit and
``/health`` again and the server's ``sglang:num_requests_total``. What the gateway said is judged against the reads on
either side of it: a worker listed while the unit was already down, or its run not answering, BEFORE the gateway read
was in rotation while not serving; a worker out (gone or draining) while the unit was still active AFTER the gateway
read left the rotation before the stop. (On a loaded host a sample's reads are up to a second apart: one read of the
unit after the gateway's saw the stop begin after a gateway read that still listed the worker, CI 2026-12-03.)
The watch begins once the server answers ``/health`` and ends once the worker is back with a new run of the unit (and
a few samples after), or after ``--max-seconds``. It prints one JSON object: the samples and the findings the scenario
asserts.

Standard library only (the test host's python3).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import time
import urllib.error
import urllib.request

TOTAL = re.compile(r'^sglang:num_requests_total(?:\{[^}]*\})?\s+([0-9.eE+]+)\s*$', re.M)


def get(url, key=None, timeout=2.0):
    """(status, body text) of a GET; (None, error) when nothing answered."""
    request = urllib.request.Request(url, headers={'Authorization': 'Bearer %s' % key} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # nosec: the test host's own addresses
            return answer.status, answer.read().decode('utf-8', 'replace')
    except urllib.error.HTTPError as err:
        return err.code, ''
    except (OSError, ValueError) as err:
        return None, str(err)


def unit(args):
    """(ActiveState, InvocationID) of the server's unit."""
    out = subprocess.run(['systemctl', 'show', '-p', 'ActiveState,InvocationID', args.unit], capture_output=True,
                         text=True, check=False).stdout
    props = dict(line.split('=', 1) for line in out.splitlines() if '=' in line)
    return props.get('ActiveState', ''), props.get('InvocationID', '')


def sample(args):
    data = {'t': round(time.time(), 3)}
    data['active'], data['invocation'] = unit(args)
    data['health'] = get(args.server.rstrip('/') + '/health', timeout=1.0)[0]
    status, body = get(args.gateway.rstrip('/') + '/workers', args.admin_key)
    listed = None
    if status == 200:
        try:
            listed = [w for w in json.loads(body).get('workers', []) if str(w.get('url', '')).rstrip('/') == args.worker]
        except ValueError:
            listed = None
    data['listed'] = None if listed is None else bool(listed)
    data['status'] = str(listed[0].get('status') or '').lower() if listed else ''
    data['healthy'] = bool(listed and listed[0].get('is_healthy'))
    # out of rotation: not registered, or draining (removed: the gateway's policies no longer select it, it is dropped
    # once its requests ended)
    data['out'] = None if listed is None else (not listed or data['status'] == 'draining')
    data['active_after'], data['invocation_after'] = unit(args)
    data['health_after'] = get(args.server.rstrip('/') + '/health', timeout=1.0)[0]
    status, body = get(args.server.rstrip('/') + '/metrics', timeout=1.0)
    found = TOTAL.search(body) if status == 200 else None
    data['requests'] = float(found.group(1)) if found else None
    return data


def findings(samples):
    """What the scenario asserts, from the samples (the first sample's invocation is the hung run's). The unit's and
    /health's state before a sample's gateway read say whether the server was down when the gateway listed it; after
    it, whether the server was still up when the gateway had it out."""
    old = samples[0]['invocation'] if samples else ''
    new = next((s['invocation'] for s in samples if s['invocation'] not in ('', old)), '')
    # the unit was already stopping (or stopped) when the gateway was read
    down = [i for i, s in enumerate(samples) if s['invocation'] == old and s['active'] != 'active']
    absent = [i for i, s in enumerate(samples) if s['out']]
    back = next((i for i, s in enumerate(samples) if new and s['invocation'] == new and s['out'] is False), None)
    # in the gateway's rotation while the server could not serve: its unit not active, or a run that had not answered
    # /health yet, before the gateway was read
    in_not_serving = [s for s in samples if s['out'] is False and (s['active'] != 'active' or s['health'] != 200)]
    return {
        'old_invocation': old,
        'new_invocation': new,
        'samples': len(samples),
        'unreadable': len([s for s in samples if s['out'] is None]),
        'out_while_old_active': any(s['out'] and s['invocation_after'] == old and s['active_after'] == 'active' for s in samples),
        'out_before_stop': bool(absent) and bool(down) and absent[0] <= down[0],
        'out_through_restart': bool(down) and all(samples[i]['out'] for i in down),
        'in_rotation_while_not_serving': in_not_serving,
        'back': back is not None,
        'back_serving': back is not None and samples[back]['health_after'] == 200 and samples[back]['active_after'] == 'active',
        'requests_when_back': samples[back]['requests'] if back is not None else None,
        'back_seconds_after_stop': round(samples[back]['t'] - samples[down[0]]['t'], 2) if back is not None and down else None,
        'requests_of_new_run_at_end': samples[-1]['requests'] if samples and samples[-1]['invocation'] == new else None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--gateway', required=True)
    parser.add_argument('--admin-key', default=None)
    parser.add_argument('--worker', required=True, help='the worker URL as the gateway lists it')
    parser.add_argument('--server', required=True, help='the server URL as the host reaches it')
    parser.add_argument('--unit', default='sglang.service')
    parser.add_argument('--interval', type=float, default=0.2)
    parser.add_argument('--max-seconds', type=float, default=90.0)
    parser.add_argument('--after-back', type=int, default=5, help='samples taken once the worker is back')
    args = parser.parse_args()
    args.worker = args.worker.rstrip('/')
    samples, began, after = [], time.time(), None
    while time.time() - began < args.max_seconds:
        current = sample(args)
        if not samples and current['health'] != 200:
            time.sleep(args.interval)
            continue  # the watch begins once the (relaunched) server serves
        samples.append(current)
        last = samples[-1]
        if after is None and last['out'] is False and last['invocation'] not in ('', samples[0]['invocation']):
            after = 0
        if after is not None:
            after += 1
            if after > args.after_back:
                break
        time.sleep(args.interval)
    print(json.dumps({'findings': findings(samples), 'samples': samples}))


if __name__ == '__main__':
    main()
