# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Shared memory an earlier run of the server left in /dev/shm: POSIX semaphores (``sem.*``) and segments (torch's
``torch_*``, multiprocessing's ``psm_*``, NCCL's ``nccl-*``) owned by the service user that no process holds open or
mapped. An unclean kill leaves them behind ("leaked semaphore objects"); they fill /dev/shm and can make the next
start fail. Only files of the service user that nobody holds are ever removed. Standard library only (Python 3.9+).
"""

from __future__ import annotations

import os
import stat


def _held_paths(procs):
    held = set()
    for proc in procs.values():
        held.update(target for target in proc.fds.values() if target.startswith('/'))
        held.update(path[:-len(' (deleted)')] if path.endswith(' (deleted)') else path for path in proc.mapped)
    return held


def kind_of(name):
    return 'semaphore' if name.startswith('sem.') else 'segment'


def find_leaks(shm_dir, procs, uid):
    """[{'path', 'kind', 'size', 'mtime'}] of regular files in SHM_DIR owned by UID that no process in PROCS holds."""
    if uid is None:
        return []
    held = _held_paths(procs)
    leaks = []
    try:
        names = sorted(os.listdir(shm_dir))
    except OSError:
        return []
    for name in names:
        path = os.path.join(shm_dir, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_uid != uid or path in held:
            continue
        leaks.append({'path': path, 'kind': kind_of(name), 'size': info.st_size, 'mtime': int(info.st_mtime)})
    return leaks


def remove(leaks, uid):
    """Remove the leaked files (again only if still a regular file of UID); return the paths removed."""
    removed = []
    for leak in leaks:
        try:
            info = os.lstat(leak['path'])
            if stat.S_ISREG(info.st_mode) and info.st_uid == uid:
                os.unlink(leak['path'])
                removed.append(leak['path'])
        except OSError:
            continue
    return removed
