# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One configuration file (a systemd unit, an environment file) as wanted: content, owner, group and mode.

observe -> decide -> write: the new content goes through ``_atomic_write`` (a full file system raises its
NoSpaceError, naming the path, the free and the needed bytes, with the old file untouched), and the temporary file
gets its owner and mode before it replaces the old one, so a secret file is never readable by others, not even for
a moment. Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from typing import Optional

from ansible_collections.llmops.sglang.plugins.module_utils.host._atomic_write import write_atomic


class VerifyError(Exception):
    """The new content was refused by its verifier; the old file is untouched. ``msg`` says what the verifier said."""

    def __init__(self, msg, output):
        super().__init__(msg)
        self.msg = msg
        self.output = output


@dataclass(frozen=True)
class FileState:
    """What is on disk at a path (``content`` None: no file)."""

    content: Optional[bytes]
    uid: int = -1
    gid: int = -1
    mode: int = -1

    def to_json(self):
        return {'exists': self.content is not None, 'uid': self.uid, 'gid': self.gid, 'mode': '%04o' % self.mode
                if self.mode >= 0 else None}


@dataclass(frozen=True)
class Wanted:
    content: bytes
    uid: int
    gid: int
    mode: int


@dataclass(frozen=True)
class Plan:
    """``write``: the content differs (or there is no file); ``fix``: only owner, group or mode differ."""

    write: bool
    fix: bool

    @property
    def changed(self):
        return self.write or self.fix


def observe(path):
    try:
        with open(path, 'rb') as handle:
            content = handle.read()
            st = os.fstat(handle.fileno())
    except FileNotFoundError:
        return FileState(None)
    return FileState(content, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode))


def decide(now, wanted):
    if now.content != wanted.content:
        return Plan(write=True, fix=False)
    return Plan(write=False, fix=(now.uid, now.gid, now.mode) != (wanted.uid, wanted.gid, wanted.mode))


def apply_attributes(path, wanted):
    os.chown(path, wanted.uid, wanted.gid)
    os.chmod(path, wanted.mode)   # after chown, which may clear setuid/setgid bits


def backup_name(path, now=None):
    """Where the old file is kept: the name AnsibleModule.backup_local gives (``<path>.<pid>.<time>~``)."""
    return '%s.%d.%s~' % (path, os.getpid(), time.strftime('%Y-%m-%d@%H:%M:%S', time.localtime(now)))


def write(path, wanted, verify=None, backup=False):
    """Replace ``path`` with ``wanted`` atomically; returns the backup's path (``backup`` and an old file) or None.

    ``verify(tmp_path)`` runs on the complete temporary file (owner and mode already set) and may raise VerifyError;
    then, as on any error, ``path`` is left as it was. The backup is a hard link to the old file made just before the
    rename: it needs no space, so a nearly full disk cannot fail between the backup and the replace.
    """
    kept = []

    def move(tmp, dest):
        apply_attributes(tmp, wanted)
        if verify is not None:
            verify(tmp)
        if backup and os.path.exists(dest):
            kept.append(backup_name(dest))
            os.link(dest, kept[0])
        os.replace(tmp, dest)

    write_atomic(path, wanted.content, move, suffix='.tmp')
    return kept[0] if kept else None


def unit_verifier(unit_name, run, systemd_analyze):
    """A ``verify`` for :func:`write`: ``systemd-analyze verify`` on a copy named ``unit_name`` (it wants a unit
    suffix), in a directory of its own. Any output counts as a failure: systemd starts units it warns about, but a
    warning in a unit we write is a mistake of ours or of the caller's variables."""

    def verify(tmp):
        scratch = tempfile.mkdtemp(prefix='llmops-unit-')
        try:
            copy = os.path.join(scratch, unit_name)
            shutil.copyfile(tmp, copy)
            rc, out, err = run([systemd_analyze, 'verify', copy])
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        output = (out + err).strip().replace(copy, unit_name)
        if rc != 0 or output:
            raise VerifyError('systemd-analyze verify refused the new %s (rc %d): %s; the unit file was left as it was'
                              % (unit_name, rc, output or 'no output'), output)
    return verify
