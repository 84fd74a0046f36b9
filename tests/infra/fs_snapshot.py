# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A snapshot of a host's whole file system, and the difference of two: the proof that a check-mode run wrote nothing.

    python3 fs_snapshot.py                       # on the host: JSON {path: [type, mode, uid, gid, size, mtime_ns, target]}
    python3 fs_snapshot.py --compare A.json B.json   # on the controller: what differs, exit 1 when anything does

Every path outside /proc, /sys, /dev and /run/user (kernel and per-login views, not the host's files) is listed with
its type, permission bits, owner, size, modification time (nanoseconds) and a symlink's target, without following
links or crossing into those trees. A file written, created, removed, chmod-ed or chown-ed shows, and so does a
directory in which anything was created or removed, even a temporary file that is gone again. Reads change nothing it
records (access times are left out). Run through ``python3 -c`` (ansible.builtin.command with pipelining), it writes
nothing itself: its output goes to stdout.

What an SSH login leaves is the transport's, not a write of the run's, and the comparison leaves it out: logind's
session, user and scope records under /run/systemd, pam_motd's /run/motd.dynamic, the journal's files, and the
modification times of the directories that hold them (a run's connection can be replaced mid-run: its ControlPersist
master timed out on a loaded CI host and the next task logged in again, session 5960 -> 5961).

A read of the rpm database is a read: SQLite's WAL index beside it (``rpmdb.sqlite-shm``, shared memory in which every
reader records its read mark) gets a new modification time from any ``rpm -q``, so a change of that file's modification
time alone is left out; any other change of it still shows.

Python 3.9+ standard library only (the test hosts' Debian python3).
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys

SKIP = ('/proc', '/sys', '/dev', '/run/user')
# what a new SSH login writes (see the docstring): paths, and directories whose modification time alone may change
LOGIN = re.compile(r'^(/run/systemd/(sessions|users)/.+|/run/systemd/transient/session-[0-9]+\.scope'
                   r'|/run/systemd/units/invocation:session-[0-9]+\.scope|/run/motd\.dynamic|/var/log/journal/.+)$')
LOGIN_DIRS = ('/run', '/run/systemd/sessions', '/run/systemd/users', '/run/systemd/transient', '/run/systemd/units',
              '/var/log/journal')
# files whose modification time any reader changes (see the docstring)
READ_MARKS = re.compile(r'^.*/rpmdb\.sqlite-shm$')


def entry(path):
    st = os.lstat(path)
    kind = 'l' if stat.S_ISLNK(st.st_mode) else 'd' if stat.S_ISDIR(st.st_mode) else 'f' if stat.S_ISREG(st.st_mode) else 'o'
    target = os.readlink(path) if kind == 'l' else None
    return [kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_size if kind == 'f' else 0, st.st_mtime_ns, target]


def snapshot(root='/'):
    out = {}
    for top, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if os.path.join(top, d) not in SKIP)
        for name in [top] + [os.path.join(top, n) for n in files + dirs]:
            if name in out:
                continue
            try:
                out[name] = entry(name)
            except OSError:
                continue  # gone between the listing and the stat: it will show as missing in one of the two
    return out


def compare(before, after, limit=50):
    """Lines naming what differs (created, removed, changed with the fields before -> after)."""
    lines = []
    for path in sorted(set(before) | set(after)):
        a, b = before.get(path), after.get(path)
        only_mtime = bool(a and b and a[:5] == b[:5] and a[6:] == b[6:])
        if a == b or LOGIN.match(path) or (only_mtime and (path in LOGIN_DIRS or READ_MARKS.match(path))):
            continue
        if a is None:
            lines.append('created %s (%s)' % (path, b[0]))
        elif b is None:
            lines.append('removed %s' % path)
        else:
            fields = ('type', 'mode', 'uid', 'gid', 'size', 'mtime_ns', 'target')
            lines.append('changed %s: %s' % (path, ', '.join('%s %s -> %s' % (f, x, y) for f, x, y in zip(fields, a, b) if x != y)))
    return lines[:limit] + (['... %d more' % (len(lines) - limit)] if len(lines) > limit else [])


def main(argv):
    if len(argv) == 4 and argv[1] == '--compare':
        with open(argv[2], encoding='utf-8') as a, open(argv[3], encoding='utf-8') as b:
            found = compare(json.load(a), json.load(b))
        print('\n'.join(found) if found else 'no difference')
        return 1 if found else 0
    json.dump(snapshot(), sys.stdout, separators=(',', ':'), sort_keys=True)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
