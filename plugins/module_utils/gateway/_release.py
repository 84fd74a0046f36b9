# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which gateway release a venv holds, and what it can do, read from its own files (no import, no run).

The gateway is published as ``smg`` (package ``smg``) and earlier as ``sglang-router`` (package ``sglang_router``).
Both parse their command line in ``router_args.py``; a release has the control-plane worker API this collection needs
(``/workers`` with admin keys) when that file defines ``--control-plane-api-keys`` (sglang-router 0.3.0 does not,
0.3.2 and every smg release do).

Python 3.9+, standard library only.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import asdict, dataclass
from typing import Optional

PACKAGES = {'smg': 'smg', 'sglang-router': 'sglang_router'}


@dataclass
class Release:
    distribution: str
    version: Optional[str]
    package_dir: str
    control_plane: bool
    launch_module: str

    def to_json(self):
        return asdict(self)


def capabilities(router_args_source: str) -> dict:
    """What a release's ``router_args.py`` offers (pure)."""
    return {'control_plane': 'control_plane_api_keys' in router_args_source}


def _dist_version(site: str, distribution: str) -> Optional[str]:
    name = distribution.replace('-', '_')
    for meta in glob.glob(os.path.join(site, '%s-*.dist-info' % name), recursive=False):
        path = os.path.join(meta, 'METADATA')
        try:
            with open(path, encoding='utf-8', errors='replace') as handle:
                for line in handle:
                    match = re.match(r'^Version:\s*(\S+)', line)
                    if match:
                        return match.group(1)
                    if not line.strip():
                        break
        except OSError:
            continue
    return None


def locate(venv: str, distribution: str) -> Optional[Release]:
    """The release of ``distribution`` installed in ``venv`` (None when it is not there)."""
    package = PACKAGES[distribution]
    for site in sorted(glob.glob(os.path.join(venv, 'lib', 'python3*', 'site-packages'))):
        package_dir = os.path.join(site, package)
        args_file = os.path.join(package_dir, 'router_args.py')
        if not os.path.isfile(args_file):
            continue
        with open(args_file, encoding='utf-8', errors='replace') as handle:
            caps = capabilities(handle.read())
        return Release(distribution, _dist_version(site, distribution), package_dir, caps['control_plane'],
                       '%s.launch_router' % package)
    return None
