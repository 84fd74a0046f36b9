# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A host-side lease lock around restart-and-wait of one SGLang server.

Private module_utils: runs on the target host, Python 3.9+, standard library only.

Why a lease file and not only flock(2): the lock must outlive one module run (it spans the restart, the readiness
wait and the deployment record, many tasks apart), and a controller that is killed never releases it. So the lock is
a JSON record (who, since when, until when) replaced atomically; a short flock on a guard file beside it makes each
read-decide-write of the record exclusive between two controllers that arrive at the same moment. A record is stale
(and taken over) when its lease ran out, when the host rebooted since it was written (boot id), or when the controller
that wrote it says its process is gone (``break_token``: only the holder's own controller can tell).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import time
import uuid

from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import write_atomic
from ansible_collections.llmops.sglang.plugins.module_utils.host import _procfs
from ansible_collections.llmops.sglang.plugins.module_utils.host._state_file import read_state, typed


@dataclasses.dataclass
class Holder:
    """Who holds the lock: the controller's host name, user, and ansible-playbook process (pid + start time)."""

    controller: str = ''
    user: str = ''
    pid: int = 0
    pid_start: str = ''
    play: str = ''

    def describe(self):
        who = '%s@%s' % (self.user or '?', self.controller or '?')
        if self.pid:
            who += ' (ansible-playbook pid %d)' % self.pid
        if self.play:
            who += ', play %r' % self.play
        return who


@dataclasses.dataclass
class LockRecord:
    token: str
    holder: Holder
    acquired_at: float
    renewed_at: float
    lease: float
    boot_id: str

    def to_json(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data):
        """Build a record from parsed JSON; StateFormatError names the field that is wrong."""
        return typed(cls, data, 'lock record')

    def expires_at(self):
        return self.renewed_at + self.lease


@dataclasses.dataclass
class Request:
    """What one module run asks for."""

    state: str                     # 'present' (acquire or renew) or 'absent' (release)
    holder: Holder
    lease: float
    token: str = ''                # the caller's token: renew or release its own lock
    break_token: str = ''          # the caller's controller saw this token's process gone: take it over


@dataclasses.dataclass
class Decision:
    action: str                    # acquire, renew, release, wait, none
    reason: str = ''
    stale: str = ''                # why an existing record was taken over


def stale_reason(record, now, boot_id, break_token=''):
    """Why ``record`` no longer holds the lock, or '' while it does. Pure."""
    if record.boot_id and boot_id and record.boot_id != boot_id:
        return 'the host rebooted since %s took the lock' % record.holder.describe()
    if now >= record.expires_at():
        return 'the lease of %s ran out %.0f s ago' % (record.holder.describe(), now - record.expires_at())
    if break_token and break_token == record.token:
        return 'the process of %s is gone' % record.holder.describe()
    return ''


def decide(record, request, now, boot_id):
    """What to do with the lock file, given its current record (None: free). Pure: reads and writes nothing."""
    if request.state == 'absent':
        if record is None:
            return Decision('none', 'the lock is free')
        if request.token and record.token == request.token:
            return Decision('release', 'released')
        return Decision('none', 'held by %s, not by this run: left alone' % record.holder.describe())
    if record is None:
        return Decision('acquire', 'the lock was free')
    if request.token and record.token == request.token:
        return Decision('renew', 'this run holds the lock')
    stale = stale_reason(record, now, boot_id, request.break_token)
    if stale:
        return Decision('acquire', 'taken over: ' + stale, stale=stale)
    return Decision('wait', 'held by %s since %s' % (record.holder.describe(), _stamp(record.acquired_at)))


def _stamp(epoch):
    return time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(epoch))


def read_record(path, check_mode=False):
    """(record or None, damage): a missing file is a free lock; a damaged one is set aside and named in ``damage``."""
    record, damage = read_state(path, LockRecord.from_json, check_mode=check_mode, max_bytes=64 * 1024)
    return record, (damage.message('lock file') if damage else '')


@dataclasses.dataclass
class Outcome:
    acquired: bool
    changed: bool
    decision: Decision
    record: LockRecord = None
    held_by: LockRecord = None
    damage: str = ''

    def to_json(self):
        return {
            'acquired': self.acquired,
            'token': self.record.token if self.record else '',
            'action': self.decision.action,
            'reason': self.decision.reason,
            'stale': self.decision.stale,
            'held_by': self.held_by.to_json() if self.held_by else None,
            'damaged': self.damage,
        }


def apply(path, request, check_mode=False, clock=time.time, boot_id=None):
    """Read the lock at ``path``, decide, and (unless ``check_mode``) write or remove it, all under the guard flock.

    Check mode reads and decides only: it creates neither the directory nor the guard file (a dry run writes nothing
    anywhere on the host); without the guard's flock its read may race a real run's write, which it only reports.
    """
    boot_id = _procfs.boot_id() if boot_id is None else boot_id
    if check_mode:
        record, damage = read_record(path, check_mode=True)
        now = clock()
        return _act(path, request, record, decide(record, request, now, boot_id), now, boot_id, True, damage)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=0o755, exist_ok=True)
    guard = os.open(path + '.guard', os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)
        record, damage = read_record(path)
        now = clock()
        decision = decide(record, request, now, boot_id)
        return _act(path, request, record, decision, now, boot_id, check_mode, damage)
    finally:
        os.close(guard)  # closing drops the flock


def _act(path, request, record, decision, now, boot_id, check_mode, damage):
    if decision.action == 'wait':
        return Outcome(False, False, decision, held_by=record, damage=damage)
    if decision.action == 'none':
        return Outcome(False, False, decision, held_by=record, damage=damage)
    if decision.action == 'release':
        if not check_mode:
            os.unlink(path)
        return Outcome(False, True, decision, damage=damage)
    if decision.action == 'renew':
        new = dataclasses.replace(record, renewed_at=now, lease=request.lease)
    else:
        new = LockRecord(token=uuid.uuid4().hex, holder=request.holder, acquired_at=now, renewed_at=now,
                         lease=request.lease, boot_id=boot_id)
    if not check_mode:
        write_atomic(path, (json.dumps(new.to_json(), sort_keys=True) + '\n').encode('utf-8'), os.replace)
    return Outcome(True, decision.action == 'acquire', decision, record=new, held_by=record if decision.stale else None,
                   damage=damage)
