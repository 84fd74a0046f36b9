# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVIDIA driver version numbers: what one looks like and how two are compared."""

from __future__ import annotations

import re

# A driver version as NVIDIA prints it: 570.148.06, 570.144, 515.57, or an
# L4T release number such as 35.3.1 on Jetson.
V = r'\d+(?:\.\d+)+'
VERSION_RE = re.compile(r'^' + V + r'$')
# Desktop/datacenter driver versions have a three-digit branch (R470, R535, ...).
DRIVER_VERSION_RE = re.compile(r'^\d{3}\.\d+(?:\.\d+)?$')
# Jetson L4T release numbers (35.3.1, 36.4) only count for nvidia-l4t-* packages.
L4T_VERSION_RE = re.compile(r'^\d{2}\.\d+(?:\.\d+)?$')
# A package name that carries a driver branch: nvidia-utils-565, libnvidia-compute-535-server, nvidia-headless-580-open.
NAME_BRANCH_RE = re.compile(r'-(?P<branch>\d{3})(?:-server)?(?:-open)?(?:-server)?$')

# First driver branch that had an open kernel module (R515).
OPEN_MODULE_FIRST_BRANCH = 515


def major(version):
    """The branch of a version (``'570.148.08'`` -> 570), ``None`` when there is none."""
    try:
        return int(version.split('.', 1)[0])
    except (AttributeError, ValueError):
        return None


def version_consistent(userspace, module, nvml=False):
    """Compare a user-space version with the module's.

    Versions are compared exactly.  Only a value printed by the NVML line
    (``nvml=True``, major.minor) is compared as a prefix: NVML ``570.86`` agrees
    with module ``570.86.16``.  A real two-part version such as ``575.64`` from a
    package or file name never prefix-matches ``575.64.03``.
    """
    if userspace == module:
        return True
    return bool(nvml and module.startswith(userspace + '.'))


def version_key(version):
    """Sort key: numeric parts as numbers (``'535.9'`` before ``'535.10'``)."""
    return [int(part) if part.isdigit() else part for part in re.split(r'[.]', version)]
