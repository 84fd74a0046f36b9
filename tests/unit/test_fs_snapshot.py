# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/infra/fs_snapshot.py, the proof that a check-mode run wrote nothing: a new SSH login mid-run (what CI's embedding
test saw at load 9: logind session 5960 -> 5961, pam_motd, the journal) is the transport's and not reported; anything else,
in the same directories too, is."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'infra'))
import fs_snapshot  # noqa: E402  pylint: disable=wrong-import-position


def d(mtime, mode=0o755):
    return ['d', mode, 0, 0, 0, mtime, None]


def f(mtime, size=10):
    return ['f', 0o644, 0, 0, size, mtime, None]


# CI 2026-12-03 11:14 UTC, test_embedding's dry run: all of it a new login
BEFORE = {'/run': d(1), '/run/motd.dynamic': f(1), '/run/systemd/sessions': d(1), '/run/systemd/sessions/5960': f(1),
          '/run/systemd/transient': d(1), '/run/systemd/transient/session-5960.scope': f(1),
          '/run/systemd/units': d(1), '/run/systemd/units/invocation:session-5960.scope': ['l', 0o777, 0, 0, 0, 1, 'x'],
          '/run/systemd/users/0': f(1), '/var/log/journal/1d60/system.journal': f(1), '/etc/sglang': d(1)}
AFTER = {'/run': d(2), '/run/motd.dynamic': f(2), '/run/systemd/sessions': d(2), '/run/systemd/sessions/5961': f(2),
         '/run/systemd/transient': d(2), '/run/systemd/transient/session-5961.scope': f(2),
         '/run/systemd/units': d(2), '/run/systemd/units/invocation:session-5961.scope': ['l', 0o777, 0, 0, 0, 2, 'y'],
         '/run/systemd/users/0': f(2, 12), '/var/log/journal/1d60/system.journal': f(2, 20), '/etc/sglang': d(1)}


def test_a_new_login_mid_run_is_not_a_write_of_the_run():
    assert fs_snapshot.compare(BEFORE, AFTER) == []


def test_anything_else_is_reported_also_beside_the_login():
    after = dict(AFTER, **{'/run/lock/llmops-sglang': d(2), '/run/systemd/units/invocation:sglang.service': f(2),
                           '/run': d(2, 0o700), '/etc/sglang': d(3)})
    assert fs_snapshot.compare(BEFORE, after) == [
        'changed /etc/sglang: mtime_ns 1 -> 3',
        'changed /run: mode 493 -> 448, mtime_ns 1 -> 2',
        'created /run/lock/llmops-sglang (d)',
        'created /run/systemd/units/invocation:sglang.service (f)',
    ]


def test_a_read_of_the_rpm_database_is_not_a_write_but_its_change_is():
    """rpm -q moves the modification time of SQLite's WAL index (readers' marks); a write of the database changes more
    (CI's dnf --check run of test_nvidia_fix_dnf.py, 2026-12-03: /root/.rpmdb/rpmdb.sqlite-shm, mtime only)."""
    before = {'/var/lib/rpm/rpmdb.sqlite-shm': f(1, 32768), '/var/lib/rpm/rpmdb.sqlite': f(1, 4096)}
    read = {'/var/lib/rpm/rpmdb.sqlite-shm': f(2, 32768), '/var/lib/rpm/rpmdb.sqlite': f(1, 4096)}
    assert fs_snapshot.compare(before, read) == []
    written = {'/var/lib/rpm/rpmdb.sqlite-shm': f(2, 65536), '/var/lib/rpm/rpmdb.sqlite': f(2, 8192)}
    assert fs_snapshot.compare(before, written) == [
        'changed /var/lib/rpm/rpmdb.sqlite: size 4096 -> 8192, mtime_ns 1 -> 2',
        'changed /var/lib/rpm/rpmdb.sqlite-shm: size 32768 -> 65536, mtime_ns 1 -> 2',
    ]
