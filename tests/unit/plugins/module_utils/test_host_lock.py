# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The host-side lock (module_utils/deploy/_lock.py): the pure decision, real files, real racing processes."""

from __future__ import annotations

import json
import multiprocessing
import os

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _lock as hl

ALICE = hl.Holder(controller='laptop', user='alice', pid=4121, pid_start='777', play='deploy')
BOB = hl.Holder(controller='awx-1', user='awx', pid=55, pid_start='9', play='deploy')
BOOT = 'b0b0'


def held(token='t-alice', holder=ALICE, at=1000.0, lease=600.0, boot=BOOT):
    return hl.LockRecord(token=token, holder=holder, acquired_at=at, renewed_at=at, lease=lease, boot_id=boot)


def want(holder=BOB, token='', state='present', break_token=''):
    return hl.Request(state=state, holder=holder, lease=600.0, token=token, break_token=break_token)


@pytest.mark.parametrize('record, request_, now, boot, action, stale', [
    (None, want(), 1000.0, BOOT, 'acquire', ''),
    (held(), want(), 1300.0, BOOT, 'wait', ''),
    (held(), want(token='t-alice', holder=ALICE), 1300.0, BOOT, 'renew', ''),
    (held(), want(), 1600.0, BOOT, 'acquire', 'lease'),                # lease 600 s from 1000 ran out
    (held(), want(), 1300.0, 'other-boot', 'acquire', 'rebooted'),
    (held(), want(break_token='t-alice'), 1300.0, BOOT, 'acquire', 'gone'),
    (held(), want(break_token='t-someone-else'), 1300.0, BOOT, 'wait', ''),
    (held(), want(state='absent', token='t-alice', holder=ALICE), 1300.0, BOOT, 'release', ''),
    (held(), want(state='absent', token='t-bob'), 1300.0, BOOT, 'none', ''),
    (None, want(state='absent', token='t-bob'), 1300.0, BOOT, 'none', ''),
])
def test_decide(record, request_, now, boot, action, stale):
    decision = hl.decide(record, request_, now, boot)
    assert decision.action == action
    assert (stale in decision.stale) if stale else decision.stale == ''


def test_record_round_trips_through_json():
    record = held()
    assert hl.LockRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


@pytest.mark.parametrize('text, why', [
    ('{}', 'lock record.token is missing'), ('[]', 'lock record is a list, not a mapping'),
    ('not json', 'not JSON: Expecting value: line 1 column 1 (char 0)'),
    ('{"token": 1, "holder": {"x": 1}}', 'lock record.token is an integer, not a string'),
    ('{"token": "t", "holder": {"pid": "12"}, "acquired_at": 1, "renewed_at": 1, "lease": 60, "boot_id": "b"}',
     'lock record.holder.pid is a string, not an integer'),
])
def test_a_damaged_lock_file_is_set_aside_named_and_not_fatal(tmp_path, text, why):
    path = tmp_path / 'sglang.lock'
    path.write_text(text)
    out = hl.apply(str(path), want(), clock=lambda: 1000.0, boot_id=BOOT)
    kept = [p for p in os.listdir(str(tmp_path)) if '.damaged-' in p]
    assert out.acquired and out.damage == ('The lock file %s was damaged (%s): it was kept as %s, and this run went on as '
                                           'if it were absent.' % (path, why, tmp_path / kept[0]))
    assert (tmp_path / kept[0]).read_text() == text
    assert json.loads(path.read_text())['token'] == out.record.token


def test_acquire_wait_renew_release_on_real_files(tmp_path):
    path = str(tmp_path / 'locks' / 'sglang.lock')   # directory created on first use
    mine = hl.apply(path, want(holder=ALICE), clock=lambda: 1000.0, boot_id=BOOT)
    assert (mine.acquired, mine.changed, mine.decision.action) == (True, True, 'acquire')
    assert oct(os.stat(path).st_mode & 0o777) == '0o600'

    theirs = hl.apply(path, want(holder=BOB), clock=lambda: 1100.0, boot_id=BOOT)
    assert (theirs.acquired, theirs.decision.action, theirs.held_by.holder) == (False, 'wait', ALICE)

    renewed = hl.apply(path, want(holder=ALICE, token=mine.record.token), clock=lambda: 1200.0, boot_id=BOOT)
    assert (renewed.acquired, renewed.changed, renewed.record.renewed_at) == (True, False, 1200.0)

    not_theirs = hl.apply(path, want(state='absent', token='t-bob'), clock=lambda: 1300.0, boot_id=BOOT)
    assert (not_theirs.changed, os.path.exists(path)) == (False, True)

    released = hl.apply(path, want(state='absent', token=mine.record.token, holder=ALICE), clock=lambda: 1300.0,
                        boot_id=BOOT)
    assert (released.changed, os.path.exists(path)) == (True, False)


def test_check_mode_writes_nothing(tmp_path):
    """Not the lock, not its directory, not the guard file: a dry run writes nothing anywhere on the host (it created
    /run/lock/llmops-sglang/ and the .guard file before it looked at check mode)."""
    path = tmp_path / 'llmops-sglang' / 'sglang.lock'
    out = hl.apply(str(path), want(), check_mode=True, clock=lambda: 1000.0, boot_id=BOOT)
    assert (out.acquired, out.changed) == (True, True)
    assert not (tmp_path / 'llmops-sglang').exists()
    # a lock held by a real run is reported, still without a write
    path.parent.mkdir()
    held = hl.apply(str(path), want(holder=ALICE), clock=lambda: 1000.0, boot_id=BOOT)
    seen = hl.apply(str(path), want(holder=BOB), check_mode=True, clock=lambda: 1001.0, boot_id=BOOT)
    assert (held.acquired, seen.acquired, seen.decision.action) == (True, False, 'wait')
    assert sorted(os.listdir(path.parent)) == ['sglang.lock', 'sglang.lock.guard']


def _race(path, name, queue):
    holder = hl.Holder(controller=name, user='root', pid=os.getpid())
    out = hl.apply(path, hl.Request(state='present', holder=holder, lease=600.0))
    queue.put((name, out.acquired))


def test_processes_racing_for_the_lock_get_one_winner(tmp_path):
    path = str(tmp_path / 'sglang.lock')
    ctx = multiprocessing.get_context('fork')
    queue = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(path, 'ctl%d' % i, queue)) for i in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
    results = dict(queue.get(timeout=5) for proc in procs)
    winners = [name for name, acquired in results.items() if acquired]
    assert len(winners) == 1
    assert json.loads(open(path).read())['holder']['controller'] == winners[0]


def test_check_mode_leaves_a_damaged_lock_file_where_it_is(tmp_path):
    path = tmp_path / 'sglang.lock'
    path.write_text('not json')
    out = hl.apply(str(path), want(), check_mode=True, clock=lambda: 1000.0, boot_id=BOOT)
    assert out.acquired and out.damage.endswith('it was left in place (check mode or a query), and this run went on as '
                                                'if it were absent.')
    assert os.listdir(str(tmp_path)) == ['sglang.lock'] and path.read_text() == 'not json'
