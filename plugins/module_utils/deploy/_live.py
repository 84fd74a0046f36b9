# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the running server actually runs, read from the process itself, and how it differs from what a deployment wants.

Files and records say what a deployment wrote; only ``/proc/<MainPID>`` says what the server started with. A controller
killed between writing the new files and restarting, a hand edit, or a damaged record all leave a server that runs an
older configuration than its files: this module notices it whatever the records say.

observe: ``read_process(pid)`` (``cmdline``, ``environ``, its start time from ``stat``) and ``newest_change(paths)``;
decide: ``differences(wanted, live, changed_after_start)``, a pure function naming what differs (flags, variable names,
files), never a value (the environment holds secrets).
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

# SGLang's launcher reads an API key from a --config file in the unit's credential directory (%d in ExecStart=);
# the controller cannot know the expanded path, the process's own CREDENTIALS_DIRECTORY says it.
CREDENTIALS_TOKEN = '%d'


def value_digest(value: str) -> str:
    """The digest a wanted environment value is passed as (module arguments and results never hold the value)."""
    return hashlib.sha256(value.encode('utf-8', 'surrogateescape')).hexdigest()


@dataclass(frozen=True)
class Wanted:
    """What the deployment wants the server to run: its argv (ExecStart= split back into words), the digest of every
    environment variable it sets, and the files the server reads at its start (unit, environment, --config files)."""

    argv: Tuple[str, ...] = ()
    environment: Dict[str, str] = field(default_factory=dict)
    files: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Live:
    """The server process as the kernel shows it."""

    pid: int
    argv: Tuple[str, ...]
    environment: Dict[str, str]       # name -> digest of the value
    started_at: float                 # seconds since the epoch
    credentials: str = ''             # its CREDENTIALS_DIRECTORY, if any

    def to_json(self) -> Dict[str, object]:
        return {'pid': self.pid, 'started_at': round(self.started_at, 2), 'argv': list(self.argv)}


def _start_time(pid: int) -> float:
    """The process's start in seconds since the epoch, to a clock tick: field 22 of /proc/<pid>/stat counts ticks since
    boot (CLOCK_BOOTTIME); /proc/stat's btime is whole seconds, too coarse beside a file written just before a restart.
    The comm field may hold spaces and parentheses, so fields are counted after its last ')'."""
    with open('/proc/%d/stat' % pid, 'rb') as stat:
        text = stat.read()
    ticks = int(text[text.rindex(b')') + 2:].split()[19])
    since_start = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf('SC_CLK_TCK')
    return time.time() - since_start


def _words(raw: bytes) -> Tuple[str, ...]:
    return tuple(w.decode('utf-8', 'surrogateescape') for w in raw.split(b'\0') if w)


def read_process(pid: int) -> Optional[Live]:
    """The process ``pid`` now, or None when it is gone or unreadable (another user's process without root)."""
    if not pid:
        return None
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as cmdline:
            argv = _words(cmdline.read())
        with open('/proc/%d/environ' % pid, 'rb') as environ:
            pairs = [w.partition('=') for w in _words(environ.read())]
        started = _start_time(pid)
    except (OSError, ValueError, IndexError):
        return None
    environment = dict((name, value_digest(value)) for name, _sep, value in pairs)
    credentials = next((value for name, _sep, value in pairs if name == 'CREDENTIALS_DIRECTORY'), '')
    return Live(pid=pid, argv=argv, environment=environment, started_at=started, credentials=credentials)


def newest_change(paths: Sequence[str]) -> Dict[str, float]:
    """The modification time of each regular file among ``paths`` (directories change with what the server writes in
    them, and are left out; a missing file has nothing to say)."""
    times = {}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if os.path.isfile(path):
            times[path] = st.st_mtime
    return times


def _flags(argv: Sequence[str]) -> Dict[str, Tuple[str, ...]]:
    """``--flag value...`` words by flag; the words before the first flag under ''."""
    found: Dict[str, List[str]] = {'': []}
    current = ''
    for word in argv:
        if word.startswith('--'):
            name, sep, value = word.partition('=')
            current = name
            found.setdefault(current, [])
            if sep:
                found[current].append(value)
        else:
            found.setdefault(current, []).append(word)
    return dict((k, tuple(v)) for k, v in found.items())


def _expand(argv: Sequence[str], credentials: str) -> Tuple[str, ...]:
    if not credentials:
        return tuple(argv)
    return tuple(w.replace(CREDENTIALS_TOKEN, credentials.rstrip('/')) for w in argv)


def _command_matches(wanted: Tuple[str, ...], live: Tuple[str, ...]) -> bool:
    """The same program: the same words, or a script run through its interpreter (``#!`` adds the interpreter in
    front: /proc shows ``python3 /usr/local/bin/x`` for ExecStart=/usr/local/bin/x)."""
    if wanted == live:
        return True
    return bool(wanted) and len(live) > len(wanted) and live[-len(wanted):] == wanted


def argv_differences(wanted: Sequence[str], live: Sequence[str]) -> List[str]:
    """The flags whose words differ (added, removed or another value), or 'the command' when the program differs."""
    want, have = _flags(wanted), _flags(live)
    found = [] if _command_matches(want.pop(''), have.pop('')) else ['the command']
    found += sorted(flag for flag in set(want) | set(have) if want.get(flag) != have.get(flag))
    return found


def differences(wanted: Wanted, live: Live, changed: Dict[str, float]) -> List[str]:
    """What the running server runs differently from ``wanted`` (pure): its argv's flags, the names of environment
    variables that are missing or have another value, and the files the server read at its start that changed after
    it (``changed``: path -> modification time, from newest_change()). Empty when the process runs what is wanted."""
    found = []
    if wanted.argv:
        flags = argv_differences(_expand(wanted.argv, live.credentials), live.argv)
        if flags:
            found.append('arguments: %s' % ', '.join(flags))
    names = sorted(name for name, digest in wanted.environment.items() if live.environment.get(name) != digest)
    if names:
        found.append('environment: %s' % ', '.join(names))
    newer = sorted(path for path, mtime in changed.items() if mtime > live.started_at)
    if newer:
        found.append('changed after its start: %s' % ', '.join(newer))
    return found
