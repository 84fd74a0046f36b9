# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A block of work on the host that a lost controller cannot cut in half.

When the controller dies (SIGKILL of ansible-playbook, a dropped link), the module's SSH session is hung up (SIGHUP,
relayed by sudo) and its pipes close (SIGPIPE on the next write). Either would end the module wherever it is. Work
that must finish once begun (a restart between its stop and its start, a set of patched files) runs in ``shielded()``.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import contextlib
import signal

# Signals a lost SSH session sends; SIGKILL cannot be ignored (and needs a person).
SHIELDED_SIGNALS = (signal.SIGHUP, signal.SIGPIPE)


@contextlib.contextmanager
def shielded():
    """Ignore the signals of a lost SSH session for the block, then put the previous handlers back."""
    previous = dict((signum, signal.signal(signum, signal.SIG_IGN)) for signum in SHIELDED_SIGNALS)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
