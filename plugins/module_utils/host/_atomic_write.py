# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Replace a file atomically. Private module_utils: runs on the target host, Python 3.9+, standard library only."""

from __future__ import annotations

import errno
import os
import tempfile

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


class NoSpaceError(OSError):
    """The file system of ``path`` is full: names the path, the free space and the bytes needed; ``path`` is untouched."""

    def __init__(self, path, needed, free, cause):
        self.path, self.needed, self.free = path, needed, free
        super().__init__(cause.errno, 'no space left on the file system of %s: %s free, %s needed to write it; it was '
                                      'left as it was. Free space there and run again'
                         % (path, human_bytes(free), human_bytes(needed)))

    def to_json(self):
        """The numbers of the message, for a module's result (its ``no_space`` key)."""
        return {'path': self.path, 'free': self.free, 'needed': self.needed}


def human_bytes(count):
    for unit in ('bytes', 'KiB', 'MiB', 'GiB'):
        if count < 1024 or unit == 'GiB':
            return ('%d %s' % (count, unit)) if unit == 'bytes' else ('%.1f %s' % (count, unit))
        count /= 1024.0
    return ''


def free_bytes(directory):
    """Bytes an unprivileged writer may still use in ``directory``'s file system (0 when it cannot be read)."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


def write_atomic(path, data, move, suffix=''):
    """Write the bytes ``data`` to a temporary file beside ``path`` (mode 0600, fsync'ed), then ``move(tmp, path)``.

    ``move`` does the replace (``os.replace``, or ``AnsibleModule.atomic_move`` to keep the old file's owner and
    mode). The temporary file is removed whatever happens; OSError from any step propagates, and ``path`` is then
    untouched. A full file system raises NoSpaceError, whose message names the path and the free space.
    ``suffix`` names the temporary files of one writer (``.<name>.XXXX<suffix>``).
    """
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix='.%s.' % os.path.basename(path), suffix=suffix)
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise NoSpaceError(path, len(data), free_bytes(directory), exc)
        raise
    try:
        try:
            with os.fdopen(fd, 'wb') as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            if exc.errno in NO_SPACE:
                os.unlink(tmp)  # free what the partial write took before measuring what is left
                raise NoSpaceError(path, len(data), free_bytes(directory), exc)
            raise
        move(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
