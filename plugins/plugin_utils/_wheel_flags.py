# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The server flags of an SGLang release read from its wheel, without installing it (controller side).

A deploy in check mode on a host where pip would create or change the venv cannot read the release from the host (it
is not there yet); the wheel it would install is in sglang_service_wheelhouse on the controller. The flags are read the
way llmops.sglang.sglang_server_flags reads an installed release (``sglang._flags.parse_server_flags`` over the
source files, read from the zip archive in memory), so a misspelled flag or a value the release refuses fails the dry
run with the same message as the real one.
"""

from __future__ import annotations

import os
import re
import zipfile
from typing import Any, Dict, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _flags as sf


class WheelFlagsError(Exception):
    def __init__(self, msg: str):
        super().__init__(msg)
        self.msg = msg


def find_wheel(wheelhouse: str, version: str) -> Optional[str]:
    """The sglang wheel of ``version`` in ``wheelhouse`` (a directory on the controller), or None."""
    if not wheelhouse or not os.path.isdir(wheelhouse):
        return None
    wanted = re.compile(r'^sglang-%s-[^-]+-[^-]+-[^-]+\.whl$' % re.escape(version))
    names = sorted(n for n in os.listdir(wheelhouse) if wanted.match(n))
    return os.path.join(wheelhouse, names[0]) if names else None


def wheel_sources(archive: zipfile.ZipFile):
    """A loader ``modname -> text or None`` over the ``sglang`` package inside a wheel."""
    names = set(archive.namelist())

    def load(modname):
        if modname != 'sglang' and not modname.startswith('sglang.'):
            return None
        for rel in sf.module_relpath(modname):
            if rel in names:
                return archive.read(rel).decode('utf-8', 'replace')
        return None
    return load


def check_with_wheel(wheelhouse: str, version: str, args: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Check ``args`` against the flags of the wheel of ``version``; None when there is no such wheel. Raises
    WheelFlagsError naming the flags and values the release refuses."""
    path = find_wheel(wheelhouse, version)
    if path is None:
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            parsed = sf.parse_server_flags(wheel_sources(archive))
    except (OSError, zipfile.BadZipFile, sf.FlagSourceError) as exc:
        raise WheelFlagsError('Could not read the server flags of SGLang %s from %s: %s' % (version, path, exc)) from None
    unknown, problems = sf.check_args(args, parsed)
    if unknown or problems:
        parts = ([sf.unknown_message(unknown, version, release='SGLang')] if unknown else []) + problems
        raise WheelFlagsError('%s. Fix the server arguments (flag names are checked against %s, read from the wheel %s) or '
                              'install the SGLang release that has these flags.'
                              % ('; '.join(parts), ', '.join(parsed['files'][:3]), os.path.basename(path)))
    return {'wheel': path, 'flags': len(parsed['flags'])}
