# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The host's processes as /proc shows them: owner, parent, command line, systemd unit, open files and mappings.

One read of /proc serves every pre-flight check (GPU holders, port holders, shared memory in use). ``proc_root``
is a parameter so that tests can point it at a prepared tree; the module always reads the real /proc. A process
that exits while it is read is skipped. Standard library only (runs on the target, Python 3.9+).
"""

from __future__ import annotations

import os
import pwd
import re
from dataclasses import dataclass, field

# A unit name in a cgroup path: the last component ending in .service or .scope (".../system.slice/sglang.service").
_UNIT_RE = re.compile(r'/([^/]+\.(?:service|scope))(?:/|$)')


@dataclass
class Proc:
    """One process: identity (pid + start time, so a reused pid is never mistaken for it), owner and what it holds."""

    pid: int
    ppid: int
    uid: int
    user: str
    start_time: int
    cmdline: list = field(default_factory=list)
    comm: str = ''
    cgroup: str = ''
    unit: str = ''
    fds: dict = field(default_factory=dict)
    mapped: list = field(default_factory=list)

    @property
    def title(self):
        """What ps shows: argv[0] as the process set it (setproctitle rewrites it), else the kernel's comm."""
        return self.cmdline[0] if self.cmdline else '[%s]' % self.comm

    def command(self, limit=300):
        text = ' '.join(self.cmdline) if self.cmdline else '[%s]' % self.comm
        return text if len(text) <= limit else text[:limit - 3] + '...'

    def holds(self, path):
        """Whether the process has PATH open (a file descriptor) or mapped into memory."""
        return path in self.fds.values() or path in self.mapped

    def to_json(self):
        return {'pid': self.pid, 'ppid': self.ppid, 'user': self.user, 'uid': self.uid, 'command': self.command(),
                'title': self.title, 'unit': self.unit or None, 'cgroup': self.cgroup}

    @classmethod
    def from_json(cls, data):
        known = set(cls.__dataclass_fields__)
        return cls(**dict((key, value) for key, value in data.items() if key in known))


BOOT_ID_PATH = '/proc/sys/kernel/random/boot_id'


def boot_id(path=None):
    """This boot's id (a new one after every reboot); '' when it cannot be read."""
    try:
        with open(path or BOOT_ID_PATH, encoding='ascii') as handle:
            return handle.read().strip()
    except OSError:
        return ''


def process_age(pid='self', proc_root='/proc'):
    """Seconds since process ``pid`` started (/proc/<pid>/stat starttime against /proc/uptime, both since boot;
    10 ms resolution), or 0.0 when /proc cannot tell (not Linux)."""
    try:
        with open('%s/%s/stat' % (proc_root, pid), encoding='utf-8', errors='replace') as handle:
            start_ticks = parse_stat(handle.read())[1]
        with open('%s/uptime' % proc_root, encoding='ascii') as handle:
            uptime = float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - start_ticks / float(os.sysconf('SC_CLK_TCK')))


def unit_of_cgroup(cgroup):
    """The systemd unit a cgroup path belongs to (the innermost .service or .scope), or ''."""
    found = _UNIT_RE.findall(cgroup or '')
    return found[-1] if found else ''


def parse_cgroup(text):
    """The process' cgroup path from /proc/<pid>/cgroup: the unified (0::) line, else the name=systemd line."""
    unified, named = '', ''
    for line in (text or '').splitlines():
        parts = line.split(':', 2)
        if len(parts) != 3:
            continue
        if parts[0] == '0' and parts[1] == '':
            unified = parts[2]
        elif parts[1] == 'name=systemd':
            named = parts[2]
    return unified or named


def parse_stat(text):
    """(ppid, start_time) from /proc/<pid>/stat; the command name may hold spaces and parentheses."""
    rest = text[text.rindex(')') + 2:].split()
    # rest[0] is field 3 (state): ppid is field 4, starttime field 22.
    return int(rest[1]), int(rest[19])


def parse_maps(text):
    """Distinct file paths mapped by a process (/proc/<pid>/maps), ' (deleted)' suffixes kept."""
    paths = []
    seen = set()
    for line in (text or '').splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith('/') and parts[5] not in seen:
            seen.add(parts[5])
            paths.append(parts[5])
    return paths


def _read(path, mode='r'):
    with open(path, mode) as handle:
        return handle.read()


def _user(uid, cache):
    if uid not in cache:
        try:
            cache[uid] = pwd.getpwuid(uid).pw_name
        except KeyError:
            cache[uid] = str(uid)
    return cache[uid]


def _open_files(base):
    fds = {}
    try:
        names = os.listdir(os.path.join(base, 'fd'))
    except OSError:
        return fds
    for name in names:
        try:
            fds[int(name)] = os.readlink(os.path.join(base, 'fd', name))
        except (OSError, ValueError):
            continue
    return fds


def read_process(pid, proc_root='/proc', users=None):
    """One process from PROC_ROOT/<pid>, or None when it is gone or unreadable."""
    base = os.path.join(proc_root, str(pid))
    users = {} if users is None else users
    try:
        ppid, start_time = parse_stat(_read(os.path.join(base, 'stat')))
        uid = os.stat(base).st_uid
        raw = _read(os.path.join(base, 'cmdline'), 'rb')
        comm = _read(os.path.join(base, 'comm')).strip()
        cgroup = parse_cgroup(_read(os.path.join(base, 'cgroup')))
    except (OSError, ValueError, IndexError):
        return None
    # setproctitle pads the rewritten argv with NULs (or spaces): drop empty trailing arguments.
    cmdline = [arg.decode('utf-8', 'replace') for arg in raw.split(b'\0')]
    while cmdline and not cmdline[-1].strip():
        cmdline.pop()
    try:
        mapped = parse_maps(_read(os.path.join(base, 'maps')))
    except OSError:
        mapped = []
    return Proc(pid=pid, ppid=ppid, uid=uid, user=_user(uid, users), start_time=start_time, cmdline=cmdline,
                comm=comm, cgroup=cgroup, unit=unit_of_cgroup(cgroup), fds=_open_files(base), mapped=mapped)


def read_processes(proc_root='/proc', skip=()):
    """Every process under PROC_ROOT except the pids in SKIP (the module's own), by pid."""
    users = {}
    procs = {}
    for name in os.listdir(proc_root):
        if not name.isdigit() or int(name) in skip:
            continue
        proc = read_process(int(name), proc_root, users)
        if proc is not None:
            procs[proc.pid] = proc
    return procs
