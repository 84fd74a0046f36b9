# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether the NVIDIA driver supports the CUDA runtime the installed torch was built for.

The torch build's CUDA version is read from installed distribution metadata, never by importing torch: the local
version of a PyTorch-index wheel (``2.8.0+cu128``), else torch's pin of the CUDA runtime wheel
(``Requires-Dist: nvidia-cuda-runtime-cu12==12.8.90``), else the installed runtime wheel itself.

The driver side is what the driver says (the ``CUDA Version`` of nvidia-smi's header) or, without nvidia-smi, the
driver version looked up in NVIDIA's table below. Standard library only (runs on the target, Python 3.9+).
"""

from __future__ import annotations

import importlib.metadata
import re

# Minimum Linux x86_64 driver of each CUDA toolkit's GA release: NVIDIA CUDA Toolkit Release Notes, Table 3 "CUDA Toolkit
# and Corresponding Driver Versions" ("Toolkit Driver Version"),
# https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (read 2026-12; 13.2 GA >=595.45.04 ...
# 12.8 GA >=570.26 ... 12.0 GA >=525.60.13). Minor version compatibility lets a 12.x runtime start on an older
# 12.x driver, but torch's libraries call driver entry points of their own toolkit (cuGreenCtxDestroy and the like
# need a 12.4+ driver); the failures come late ("undefined symbol", error 804), so the pre-flight asks for the toolkit's
# own minimum.
TOOLKIT_DRIVERS = (
    ('13.2', '595.45.04'), ('13.1', '590.44.01'), ('13.0', '580.65.06'),
    ('12.9', '575.51.03'), ('12.8', '570.26'), ('12.6', '560.28.03'), ('12.5', '555.42.02'),
    ('12.4', '550.54.14'), ('12.3', '545.23.06'), ('12.2', '535.54.03'), ('12.1', '530.30.02'),
    ('12.0', '525.60.13'), ('11.8', '520.61.05'), ('11.7', '515.43.04'), ('11.6', '510.39.01'),
    ('11.5', '495.29.05'), ('11.4', '470.42.01'), ('11.3', '465.19.01'), ('11.2', '460.27.03'),
    ('11.1', '455.23'), ('11.0', '450.51.05'),
)
TABLE_SOURCE = 'NVIDIA CUDA Toolkit Release Notes, Table 3 (CUDA Toolkit and Corresponding Driver Versions)'

_LOCAL_CUDA_RE = re.compile(r'\+cu(\d+)$')
# "nvidia-cuda-runtime-cu12==12.8.90" (PEP 508) or "nvidia-cuda-runtime-cu12 (==12.1.105)" (older metadata), with or
# without the -cuXX suffix.
_RUNTIME_PIN_RE = re.compile(r'^nvidia-cuda-runtime(?:-cu\d+)?\s*\(?\s*==\s*(\d+)\.(\d+)(?:\.[\w.]+)?', re.I)
_RUNTIME_DIST_RE = re.compile(r'^nvidia-cuda-runtime(?:-cu\d+)?$')


def version_key(version):
    """(570, 26) for '570.26'; () for anything that is not dotted numbers."""
    parts = []
    for part in str(version or '').split('.'):
        if not part.isdigit():
            return tuple(parts)
        parts.append(int(part))
    return tuple(parts)


def min_driver(cuda):
    """Minimum driver version of CUDA 'X.Y' per the table, or None when the table does not list it."""
    wanted = version_key(cuda)[:2]
    for toolkit, driver in TOOLKIT_DRIVERS:
        if version_key(toolkit) == wanted:
            return driver
    return None


def max_cuda(driver):
    """Newest CUDA 'X.Y' of the table whose minimum driver DRIVER meets, or None (older than every row)."""
    key = version_key(driver)
    if not key:
        return None
    for toolkit, minimum in TOOLKIT_DRIVERS:
        if key >= version_key(minimum):
            return toolkit
    return None


def _cuda_of_digits(digits):
    """'128' -> '12.8', '121' -> '12.1', '90' -> '9.0'."""
    return '%s.%s' % (digits[:-1], digits[-1])


def _canonical(name):
    return re.sub(r'[-_.]+', '-', name or '').lower()


def torch_cuda(version, requires=(), runtime_version=None):
    """{'torch', 'cuda', 'source'} of a torch VERSION and its Requires-Dist list; cuda None for a CPU build or when
    nothing says."""
    version = version or ''
    found = _LOCAL_CUDA_RE.search(version)
    if found:
        return {'torch': version, 'cuda': _cuda_of_digits(found.group(1)), 'source': 'torch local version +cu%s' % found.group(1)}
    if version.endswith('+cpu'):
        return {'torch': version, 'cuda': None, 'source': 'torch %s is a CPU build' % version}
    for requirement in requires or ():
        pin = _RUNTIME_PIN_RE.match(requirement)
        if pin:
            return {'torch': version, 'cuda': '%s.%s' % pin.groups(),
                    'source': 'torch Requires-Dist %s' % requirement.split(';', 1)[0].strip()}
    if runtime_version:
        key = version_key(runtime_version)
        return {'torch': version, 'cuda': '%d.%d' % key[:2], 'source': 'installed nvidia-cuda-runtime %s' % runtime_version}
    return {'torch': version, 'cuda': None, 'source': 'torch %s metadata names no CUDA runtime' % version}


def torch_build(site_dirs):
    """What the torch installed in SITE_DIRS was built for (from its installed metadata, never imported), or None
    when torch is not installed there."""
    torch, runtime = None, None
    for dist in importlib.metadata.distributions(path=list(site_dirs)):
        name = _canonical(dist.metadata['Name'])
        if name == 'torch' and torch is None:
            torch = dist
        elif _RUNTIME_DIST_RE.match(name) and runtime is None:
            runtime = dist.version
    if torch is None:
        return None
    build = torch_cuda(torch.version, torch.requires, runtime)
    build['cuda_runtime_wheel'] = runtime
    return build


def verdict(driver_version, driver_cuda, build):
    """(ok, message) for the driver (version, CUDA it reports or None) against torch's build ({'torch', 'cuda'}).

    ok is None when either side is unknown (no driver, no torch, a CPU build): nothing to compare.
    """
    if not build or not build.get('cuda'):
        return None, 'no CUDA build of torch installed (%s)' % (build or {}).get('source', 'torch not found')
    if not driver_version:
        return None, 'no NVIDIA driver found to compare with torch %s (CUDA %s)' % (build['torch'], build['cuda'])
    supported = driver_cuda or max_cuda(driver_version)
    source = 'nvidia-smi' if driver_cuda else 'the driver table'
    needed = version_key(build['cuda'])[:2]
    if supported and version_key(supported)[:2] >= needed:
        return True, 'driver %s supports CUDA %s >= %s of torch %s' % (driver_version, supported, build['cuda'], build['torch'])
    minimum = min_driver(build['cuda'])
    driver_way = 'a driver >= %s' % minimum if minimum else 'a driver of the CUDA %s generation' % build['cuda']
    return False, ('driver %s supports CUDA %s (%s), but torch %s was built for CUDA %s (%s): install %s, or a torch wheel '
                   'built for CUDA <= %s' % (driver_version, supported or 'older than 11.0', source, build['torch'],
                                             build['cuda'], build['source'], driver_way, supported or '11.0'))
