# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What ``llmops.sglang.sglang_guard`` puts on the host, and putting it there.

The guard runs the collection's own code on the host between Ansible runs. Nothing is copied by hand and nothing is
read from the collection's directory on the controller: the module itself imports the guard's entry point
(``guard/_round``), so the module_utils the guard needs are the ones the module runs with, and their sources are read
from the modules' loaders (a file, or AnsiballZ's zip), as ``deploy/_collection.code_digest`` hashes them. They are
written under ``<install dir>/lib/ansible_collections/...`` (regular packages, empty ``__init__.py`` where the
collection has namespace packages), beside a three-line entry program; a digest of them names the code the guard
runs. Files go through ``host/_config_file`` (atomic, owner and mode before the rename); files of an older guard
that the new one does not need are removed.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass

from ansible_collections.llmops.sglang.plugins.module_utils.host import _config_file as cf

PREFIX = 'ansible_collections.llmops.sglang.plugins.module_utils'
ENTRY = 'sglang-guard.py'
UNIT_DIR = '/etc/systemd/system'
MANAGED = '# Written by llmops.sglang.sglang_guard (docs/guard.md); changes here are overwritten.\n'
ENTRY_TEXT = MANAGED + '''import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'lib'))
from ansible_collections.llmops.sglang.plugins.module_utils.guard._round import main  # noqa: E402

sys.exit(main())
'''


def _source(module):
    loader = getattr(module, '__loader__', None)
    try:
        source = loader.get_source(module.__name__) if loader is not None else None
    except (ImportError, OSError):
        return None
    if source is None:
        return None
    return source if isinstance(source, bytes) else source.encode('utf-8', 'surrogateescape')


def runtime_sources(modules=None):
    """{path under lib/: bytes} of the collection's module_utils loaded in this process, and an empty ``__init__.py``
    for every package directory above them that has none (namespace packages become regular ones)."""
    files = {}
    for module in list(modules if modules is not None else sys.modules.values()):
        name = getattr(module, '__name__', '') or ''
        if name != PREFIX and not name.startswith(PREFIX + '.'):
            continue
        source = _source(module)
        if source is None:
            continue
        path = name.replace('.', '/') + ('/__init__.py' if hasattr(module, '__path__') else '.py')
        files[path] = source
    for path in list(files):
        parts = path.split('/')[:-1]
        for depth in range(1, len(parts) + 1):
            files.setdefault('/'.join(parts[:depth]) + '/__init__.py', b'')
    return files


def digest(files):
    """sha256 over the guard's code (path and content of every source, in path order), its first 16 hex digits."""
    total = hashlib.sha256()
    for path in sorted(files):
        total.update(('%s\0%d\0' % (path, len(files[path]))).encode('utf-8'))
        total.update(files[path])
    return total.hexdigest()[:16]


@dataclass(frozen=True)
class Layout:
    """Where the guard of one server lives."""

    name: str
    install_dir: str
    config_path: str
    unit_dir: str = UNIT_DIR

    @property
    def entry(self):
        return os.path.join(self.install_dir, ENTRY)

    @property
    def service(self):
        return os.path.join(self.unit_dir, self.name + '.service')

    @property
    def timer(self):
        return os.path.join(self.unit_dir, self.name + '.timer')


def service_text(layout, config, python):
    """The oneshot that runs one round. Its start bound covers a restart: the server's stop, its start (the guard's
    start_timeout), the generation request and the gateway's return. -B: a round writes no __pycache__ beside the code
    (the next install would find it stale and report a change)."""
    bound = int(2 * config.smoke_timeout + config.start_timeout + 600 + (config.gateway.return_timeout if config.gateway else 0))
    return (MANAGED + '[Unit]\nDescription=llmops.sglang guard of %s: one round\nAfter=%s\n\n'
            '[Service]\nType=oneshot\nExecStart=%s -I -B %s --config %s\nTimeoutStartSec=%d\nSyslogIdentifier=%s\n'
            % (config.unit, config.unit, python, layout.entry, layout.config_path, bound, layout.name))


def timer_text(layout, config):
    interval = max(1, int(round(config.interval)))
    return (MANAGED + '[Unit]\nDescription=llmops.sglang guard of %s, a round every %ds\n\n'
            '[Timer]\nOnActiveSec=%d\nOnUnitActiveSec=%d\nAccuracySec=1s\n\n[Install]\nWantedBy=timers.target\n'
            % (config.unit, interval, interval, interval))


def wanted_files(layout, config, python, sources):
    """{path: (content bytes, mode)} of everything the guard needs on the host."""
    files = dict((os.path.join(layout.install_dir, 'lib', rel), (data, 0o644)) for rel, data in sources.items())
    files[layout.entry] = (ENTRY_TEXT.encode('utf-8'), 0o644)
    files[layout.config_path] = (config.text().encode('utf-8'), 0o600)  # may hold the API key and the gateway's admin key
    files[layout.service] = (service_text(layout, config, python).encode('utf-8'), 0o644)
    files[layout.timer] = (timer_text(layout, config).encode('utf-8'), 0o644)
    return files


def stale_files(layout, wanted):
    """Files under the install directory's lib/ that the guard no longer needs (an older guard's)."""
    stale = []
    for root, dummy_dirs, names in os.walk(os.path.join(layout.install_dir, 'lib')):
        for name in names:
            path = os.path.join(root, name)
            if path not in wanted:
                stale.append(path)
    return sorted(stale)


def plan(wanted):
    """[(path, Plan)] of the files that differ from what is wanted (root-owned)."""
    todo = []
    for path, (content, mode) in sorted(wanted.items()):
        decision = cf.decide(cf.observe(path), cf.Wanted(content, 0, 0, mode))
        if decision.changed:
            todo.append((path, decision))
    return todo


def apply(wanted, todo, stale, verify_unit=None):
    """Write what differs (the service through ``verify_unit(name)`` when given; a timer alone fails systemd-analyze for
    its service missing beside it), remove the stale files."""
    for path, decision in todo:
        content, mode = wanted[path]
        target = cf.Wanted(content, 0, 0, mode)
        if decision.write:
            directory = os.path.dirname(path)
            if not os.path.isdir(directory):
                os.makedirs(directory, mode=0o755)
            verify = verify_unit(os.path.basename(path)) if verify_unit and path.endswith('.service') else None
            cf.write(path, target, verify=verify)
        else:
            cf.apply_attributes(path, target)
    for path in stale:
        os.unlink(path)
