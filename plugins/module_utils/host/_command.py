# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one way this collection's modules run a command on the target host.

A runner is ``run(argv, data=None) -> (rc, stdout, stderr)``: an argv list (never a shell string), the C locale
(messages the code parses are in English), no pager or colours (systemctl, journalctl), ``rc`` handled by the
caller. ``data`` (bytes) is fed to stdin. Modules take :func:`module_runner`; code without an AnsibleModule
(benchmarks, ``run_round``, tests) takes :func:`local_run`, which behaves the same.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import os
import subprocess

# Locale and output settings of every command: parsed text is English, systemd tools neither page nor colour.
C_ENV = {'LC_ALL': 'C', 'LANGUAGE': 'C', 'SYSTEMD_PAGER': '', 'SYSTEMD_COLORS': '0'}


def module_runner(module, cwd='/'):
    """A runner over ``module.run_command``; ``cwd`` defaults to ``/`` so a checkout in the task's directory cannot
    shadow an installed package for ``python -c``."""

    def run(argv, data=None):
        extra = {} if data is None else {'data': data, 'binary_data': True}
        return module.run_command(argv, check_rc=False, cwd=cwd, environ_update=dict(C_ENV), **extra)
    return run


def local_run(argv, data=None, cwd='/'):
    """The same contract as :func:`module_runner` for callers without an AnsibleModule; an argv that cannot be
    started gives rc 127 and the OS error as stderr, as a shell would."""
    env = dict(os.environ)
    env.update(C_ENV)
    try:
        proc = subprocess.run(argv, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,  # pylint: disable=ansible-bad-function
                              cwd=cwd, check=False, stdin=None if data is not None else subprocess.DEVNULL)
    except OSError as exc:
        return 127, '', str(exc)
    return proc.returncode, proc.stdout.decode('utf-8', 'replace'), proc.stderr.decode('utf-8', 'replace')
