# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Replace a file atomically. Private module_utils: runs on the target host, Python 3.9+, standard library only."""

from __future__ import annotations

import os
import tempfile


def write_atomic(path, data, move, suffix=''):
    """Write the bytes ``data`` to a temporary file beside ``path`` (mode 0600, fsync'ed), then ``move(tmp, path)``.

    ``move`` does the replace (``os.replace``, or ``AnsibleModule.atomic_move`` to keep the old file's owner and
    mode). The temporary file is removed whatever happens; OSError from any step propagates, and ``path`` is then
    untouched. ``suffix`` names the temporary files of one writer (``.<name>.XXXX<suffix>``).
    """
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix='.%s.' % os.path.basename(path), suffix=suffix)
    try:
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        move(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
