# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""This collection's identity on the target host: its version and a digest of the code a module brought along.

A deployment record counts the collection's own code as an input without reaching into the collection's
directory from a role (which breaks when the role is used outside the collection tree): the module that writes the
record hashes the source of the module_utils it runs with, wherever Ansible put them (a file, or AnsiballZ's zip).

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import hashlib

# galaxy.yml's version; tests/unit/plugins/module_utils/test_collection.py keeps the two equal.
VERSION = '0.2.0'


def code_digest(modules):
    """sha256 over the source of the given module objects, in name order (their loaders read files and zips alike)."""
    digest = hashlib.sha256()
    for module in sorted(modules, key=lambda m: m.__name__):
        source = module.__loader__.get_source(module.__name__) or b''
        if not isinstance(source, bytes):  # importlib's loaders give text, Ansible's collection loader gives bytes
            source = source.encode('utf-8', 'surrogateescape')
        digest.update(('%s\0%d\0' % (module.__name__, len(source))).encode('utf-8'))
        digest.update(source)
    return digest.hexdigest()
