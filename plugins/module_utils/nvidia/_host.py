# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""How the NVIDIA driver code runs commands on the managed host: the collection's one runner
(:mod:`_command`: argv lists, the C locale, no shell), with every command and its return code recorded (modules
return them as ``commands``) and the extra environment the package tools need."""

from __future__ import annotations

import os

from ansible_collections.llmops.sglang.plugins.module_utils.host._command import C_ENV, module_runner

# System tool directories searched before PATH: a root cron or sudo PATH may lack the sbin directories.
_SYSTEM_DIRS = ['/usr/sbin', '/sbin', '/usr/bin', '/bin']


# The tools whose queries write the host: dnf (and yum, dnf on EL8+) keeps its repositories' metadata in its cache and
# logs every run to /var/log/dnf*.log and hawkey.log, even a "list".
_DNF_TOOLS = ('dnf', 'yum')
_COMPLETION_CACHE_PLUGIN = 'generate_completion_cache'


def dry_run_dnf_argv(argv, scratch):
    """``argv`` with dnf's cache and logs in ``scratch`` (a directory of the module's own, removed with it), so that a
    query in check mode writes nothing of the host's; other tools' argv unchanged."""
    if not argv or os.path.basename(argv[0]) not in _DNF_TOOLS:
        return list(argv)
    cache = os.path.join(scratch, 'cache')
    # as root dnf reads system_cachedir, not cachedir; dnf's own generate_completion_cache plugin writes the shell
    # completion's /var/cache/dnf/packages.db on every run, whatever the cache directory (found on a test host)
    return [argv[0], '--setopt=cachedir=%s' % cache, '--setopt=system_cachedir=%s' % cache, '--setopt=logdir=%s' % scratch,
            '--disableplugin=' + _COMPLETION_CACHE_PLUGIN] + list(argv[1:])


class HostCommands:
    """Runs commands through an AnsibleModule and keeps the record of what ran. In check mode a dnf query keeps its
    metadata cache and logs in the module's temporary directory (:func:`dry_run_dnf_argv`)."""

    def __init__(self, module):
        self.module = module
        self.commands = []
        self._run = module_runner(module)

    def run(self, argv, env=None):
        """``(rc, stdout, stderr)``; ``env`` adds variables to the runner's locale (apt's DEBIAN_FRONTEND)."""
        if self.module.check_mode:
            argv = dry_run_dnf_argv(argv, os.path.join(self.module.tmpdir, 'dnf'))
        if env:
            rc, out, err = self.module.run_command(argv, check_rc=False, cwd='/', environ_update=dict(C_ENV, **env))
        else:
            rc, out, err = self._run(argv)
        self.commands.append({'argv': list(argv), 'rc': rc})
        return rc, out, err

    def bin(self, name, path_first=False):
        """The tool's path or ``None``; ``path_first`` lets PATH win over the system directories."""
        return self.module.get_bin_path(name, opt_dirs=[] if path_first else _SYSTEM_DIRS)
