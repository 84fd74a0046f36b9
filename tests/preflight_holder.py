# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A process that holds files the way a CUDA process holds its device nodes, for the pre-flight tests.

    preflight_holder.py READY DETACH IGNORE_TERM PATH...

Opens every PATH (or maps it, for a "map:PATH" argument), writes its pid to READY and sleeps. With DETACH=1 it
double-forks first, so that it is re-parented (to PID 1 or the nearest subreaper) like the orphan of a dead SGLang
launcher; with IGNORE_TERM=1 it ignores SIGTERM. Run it with argv[0] set to a process title (``exec -a
sglang::scheduler_TP0``, or ``executable=`` in subprocess) to look like one of SGLang's processes.
Python 3.9+ standard library only (runs on the test hosts too).
"""

from __future__ import annotations

import mmap
import os
import signal
import sys
import time


def main(argv):
    ready, detach, ignore_term = argv[0], argv[1] == '1', argv[2] == '1'
    if detach:
        if os.fork():
            os._exit(0)  # pylint: disable=protected-access
        os.setsid()
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    held = []
    for arg in argv[3:]:
        if arg.startswith('map:'):
            with open(arg[4:], 'r+b') as handle:
                held.append(mmap.mmap(handle.fileno(), 0))
        else:
            held.append(open(arg, 'rb'))  # pylint: disable=consider-using-with
    with open(ready + '.tmp', 'w', encoding='utf-8') as out:
        out.write(str(os.getpid()))
    os.rename(ready + '.tmp', ready)
    time.sleep(3600)
    return held


if __name__ == '__main__':
    main(sys.argv[1:])
