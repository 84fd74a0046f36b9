# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How the NVIDIA driver code runs commands on the managed host: argv lists, ``LC_ALL=C``, no shell, every
command and its return code recorded (modules return them as ``commands``)."""

from __future__ import annotations

C_ENV = {'LC_ALL': 'C', 'LANGUAGE': 'C', 'LANG': 'C'}
# System tool directories searched before PATH: a root cron or sudo PATH may lack the sbin directories.
_SYSTEM_DIRS = ['/usr/sbin', '/sbin', '/usr/bin', '/bin']


class HostCommands:
    """Runs commands through an AnsibleModule and keeps the record of what ran."""

    def __init__(self, module):
        self.module = module
        self.commands = []

    def run(self, argv, env=None):
        rc, out, err = self.module.run_command(argv, environ_update=env or C_ENV, check_rc=False)
        self.commands.append({'argv': list(argv), 'rc': rc})
        return rc, out, err

    def bin(self, name, path_first=False):
        """The tool's path or ``None``; ``path_first`` lets PATH win over the system directories."""
        return self.module.get_bin_path(name, opt_dirs=[] if path_first else _SYSTEM_DIRS)
