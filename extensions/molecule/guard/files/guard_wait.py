# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Test tooling of the molecule scenario guard (not part of the collection): waits, on the host, until the guard's state
file says what the scenario waits for (rounds, the last round's kind, an event counter), looking twice a second.

The scenario used to ask llmops.sglang.sglang_guard (state: query) every 2 s from the controller: a module run, an SSH
round trip and a payload each look. Now one command waits here and one query afterwards reads what the scenario
asserts. Reads only the raw fields the guard writes (``rounds``, ``last_kind``, ``counters``); exits 0 when they hold,
1 with the last state read when TIMEOUT passes first. Standard library only (the host's Python 3.9+).
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def read(path):
    try:
        with open(path, encoding='utf-8') as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}  # not written yet, or replaced between two reads: look again


def holds(state, args):
    counters = state.get('counters') or {}
    if state.get('rounds', 0) < args.min_rounds:
        return False
    if args.last_kind and state.get('last_kind') != args.last_kind:
        return False
    return all(counters.get(kind, 0) >= int(least) for kind, least in (item.split('=', 1) for item in args.counter))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--state', default='/var/lib/sglang/sglang-guard.json', help="the guard's state file")
    parser.add_argument('--min-rounds', type=int, default=0, help='at least this many rounds')
    parser.add_argument('--last-kind', default='', help="the last round's kind (healthy, hung, ...)")
    parser.add_argument('--counter', action='append', default=[], metavar='KIND=N', help='event counter KIND at least N')
    parser.add_argument('--timeout', type=float, required=True, help='seconds')
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.timeout
    while True:
        state = read(args.state)
        if holds(state, args):
            print(json.dumps({'rounds': state.get('rounds'), 'last_kind': state.get('last_kind'),
                              'counters': state.get('counters')}))
            return 0
        if time.monotonic() > deadline:
            print('guard_wait: not within %ss: rounds %s, last kind %r, counters %s (wanted %s)'
                  % (args.timeout, state.get('rounds'), state.get('last_kind'), state.get('counters'), vars(args)),
                  file=sys.stderr)
            return 1
        time.sleep(0.5)


if __name__ == '__main__':
    sys.exit(main())
