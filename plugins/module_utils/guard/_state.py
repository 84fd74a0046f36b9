# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What one guard round hands to the next, in a JSON state file on the host (read through ``host/_state_file``: a
damaged file is set aside and the guard starts afresh, never a crash), and :func:`advance`, the pure step from one
round's state to the next.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.guard._decide import last_exit
from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import write_atomic
from ansible_collections.llmops.sglang.plugins.module_utils.host._state_file import read_state, typed

FORMAT = 1
SEEN_KEEP = 2000  # kernel-log lines remembered as seen (a boot's NVIDIA lines; the oldest are dropped)


@dataclass
class GuardEvent:
    """One event: what the guard saw (``kind``), what it did (``action``) and how that ended (``outcome``)."""

    at: str
    kind: str
    action: str
    reason: str
    outcome: str = ''
    invocation: str = ''

    def to_json(self):
        return dataclasses.asdict(self)


@dataclass
class GuardState:
    """The guard's memory. Times are Unix times (the state outlives the process of one round)."""

    format: int = FORMAT
    boot_id: str = ''
    rounds: int = 0
    last_round: float = 0.0
    last_kind: str = ''
    failures: int = 0
    invocation: str = ''
    serving_invocation: str = ''
    nrestarts: Optional[int] = None
    restarts: List[float] = field(default_factory=list)
    guard_restarts: List[float] = field(default_factory=list)
    seen_lines: List[str] = field(default_factory=list)
    journal_cursor: str = ''
    last_exit: str = ''                     # systemd's last "Main process exited" of the server, as its journal said
    held: str = ''
    held_invocation: str = ''
    out_of_rotation: bool = False
    counters: Dict[str, int] = field(default_factory=dict)
    actions: Dict[str, int] = field(default_factory=dict)
    events: List[GuardEvent] = field(default_factory=list)

    def to_json(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data):
        state = typed(cls, data, 'guard state')
        return state if state.format == FORMAT else cls()


def read(path, check_mode=False):
    """``(GuardState, damage)``: a fresh state when there is none or it was damaged (then set aside, ``damage`` says;
    left in place with ``check_mode``, for a query)."""
    state, damage = read_state(path, GuardState.from_json, check_mode=check_mode)
    return state or GuardState(), damage


def write(path, state):
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o755)

    def move(tmp, dest):
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    write_atomic(path, (json.dumps(state.to_json(), indent=1, sort_keys=True) + '\n').encode('utf-8'), move)


def in_window(times, now, window):
    return [t for t in times if now - t <= window]


def advance(state, obs, decision, now, windows):
    """The state after a round (pure; a new object): restarts systemd did since the last round, failures in a row, the
    invocation seen serving, the kernel-log lines now seen, the hold released once someone else started the unit.
    ``windows``: (restart_window, crash_window), the longest each list of times must remember."""
    new = GuardState.from_json(json.loads(json.dumps(state.to_json())))
    if obs.boot_id and obs.boot_id != state.boot_id:
        new.boot_id, new.seen_lines, new.nrestarts, new.restarts = obs.boot_id, [], None, []
    if obs.nrestarts is not None:
        # NRestarts counts systemd's own restarts (Restart=) since the last deliberate start, which resets it
        if new.nrestarts is not None and obs.nrestarts > new.nrestarts:
            new.restarts.extend([now] * (obs.nrestarts - new.nrestarts))
        elif new.nrestarts is not None and obs.nrestarts < new.nrestarts:
            new.restarts, new.last_exit = [], ''  # a deliberate start (a deploy) reset the count: earlier crashes are another story
        new.nrestarts = obs.nrestarts
    new.restarts = in_window(new.restarts, now, max(windows))
    new.guard_restarts = in_window(new.guard_restarts, now, max(windows))
    new.failures = new.failures + 1 if decision.failing else 0
    if obs.smoke_ok and obs.invocation:
        new.serving_invocation = obs.invocation
    if obs.invocation != state.invocation:
        new.failures = 1 if decision.failing else 0
    new.invocation = obs.invocation
    if new.held and obs.invocation and obs.invocation != new.held_invocation:
        new.held, new.held_invocation = '', ''  # someone (a deploy) started it again: the guard watches it again
    new.seen_lines = (new.seen_lines + [key for key in obs.line_keys if key not in set(new.seen_lines)])[-SEEN_KEEP:]
    new.journal_cursor = obs.journal_cursor or new.journal_cursor
    new.last_exit = last_exit(obs.journal) or new.last_exit
    new.rounds += 1
    new.last_round = now
    new.last_kind = decision.kind
    return new
