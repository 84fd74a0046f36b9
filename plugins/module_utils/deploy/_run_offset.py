# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Where the current run of a unit starts in its log file.

The readiness wait reads the log from where the current run started: a run that changed nothing still sees its
own ready line, and lines of earlier runs never count. The offset is kept on the host with the unit's
InvocationID, which systemd changes on every (re)start, also on restarts it makes on its own; a record of
another invocation is stale and the log size measured before the start is the offset.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import dataclasses
import json
import os

from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import write_atomic
from ansible_collections.llmops.sglang.plugins.module_utils.host._state_file import read_state, typed


@dataclasses.dataclass(frozen=True)
class RunRecord:
    """The start of one run of the unit: its InvocationID and the log offset its first line is at."""

    invocation: str
    offset: int

    def to_json(self):
        return json.dumps(dataclasses.asdict(self)) + '\n'

    @classmethod
    def from_json(cls, data):
        """The record in parsed JSON; StateFormatError names the field that is wrong."""
        return typed(cls, data, 'run record')


def decide(recorded, invocation, log_size):
    """The record of the current run: the recorded one while the unit runs the same invocation, else a new one
    starting at ``log_size`` (the log's size measured before the unit was (re)started)."""
    if recorded is not None and invocation and recorded.invocation == invocation:
        return recorded
    return RunRecord(invocation=invocation, offset=max(0, int(log_size)))


def read(path, check_mode=False):
    """``(record, damage)`` at ``path``: None when there is none; a damaged record only costs its offset (it is set
    aside and named, host/_state_file). Raises StateReadError for a file that cannot be read."""
    return read_state(path, RunRecord.from_json, check_mode=check_mode, max_bytes=64 * 1024)


def write(path, record):
    """Replace the record at ``path`` atomically, mode 0644 (the offset is no secret)."""
    def move(tmp, dest):
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    write_atomic(path, record.to_json().encode('utf-8'), move)
