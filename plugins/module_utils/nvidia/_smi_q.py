# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""``nvidia-smi -q``: the GPUs it lists and the memory health of each (ECC errors, retired pages, remapped rows,
reset status), and nvidia-smi's own failure when a GPU no longer answers.

The report is an indented tree of ``Key : value`` lines under one ``GPU <bus id>`` section per GPU. Memory health, per
NVIDIA's GPU memory error management (Ampere and newer remap rows, older GPUs retire pages):

* uncorrectable ECC errors since the driver loaded (``Volatile``): the data that held them is lost, the GPU needs a
  reset (``Aggregate`` counts the GPU's whole life: reported, not blocking);
* a page retirement or row remapping that is pending: it takes effect at the next GPU reset;
* a row remapping failure: NVIDIA's RMA criterion;
* ``GPU Reset Status`` asking for a reset.

Pure functions over text; standard library only (runs on the target, Python 3.9+).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._xid import pci_key

_KV_RE = re.compile(r'^(?P<key>\S.*?)\s+:\s?(?P<value>.*)$')
_GPU_RE = re.compile(r'^GPU (?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$')
# "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error" (also "GPU0000:07:00.0")
_HANDLE_RE = re.compile(r'Unable to (?:determine|detect) the device handle for GPU ?(?P<bus>[0-9A-Fa-f]{3,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)'
                        r':?\s*(?P<error>.*)')
_NO_DEVICES_RE = re.compile(r'No devices were found')


def parse_tree(text):
    """The report as nested dicts: ``{key: value or {sub tree}}``; keys as printed, ``[...]`` elisions skipped."""
    root = {}
    stack = [(-1, root)]
    for raw in (text or '').splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith('[...]') or stripped.startswith('=') or stripped.startswith('`'):
            continue
        indent = len(raw) - len(raw.lstrip())
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        found = _KV_RE.match(stripped)
        if found and not _GPU_RE.match(stripped):
            parent[found.group('key')] = found.group('value').strip()
            continue
        node = {}
        parent[stripped] = node
        stack.append((indent, node))
    return root


def _find(tree, *names):
    """The value under the first key matching each name in turn (case-insensitive), or None."""
    node = tree
    for name in names:
        if not isinstance(node, dict):
            return None
        match = [key for key in node if key.lower() == name.lower()]
        if not match:
            return None
        node = node[match[0]]
    return node


def _count(value):
    if isinstance(value, dict):
        return _count(value.get('Total'))
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None  # N/A, Not Supported


def _yes(value):
    text = str(value or '').strip().lower()
    return True if text == 'yes' else False if text == 'no' else None


def _sum_uncorrectable(section):
    """Uncorrectable errors of a Volatile/Aggregate section: every '* Uncorrectable*' counter (SRAM, DRAM, parity,
    SEC-DED), or the pre-Ampere 'Double Bit' total; None when the GPU reports none (ECC off, N/A)."""
    if not isinstance(section, dict):
        return None
    counts = [_count(value) for key, value in section.items() if 'uncorrectable' in key.lower() and not isinstance(value, dict)]
    double = _find(section, 'Double Bit')
    if double is not None:
        counts.append(_count(double))
    known = [count for count in counts if count is not None]
    return sum(known) if known else None


@dataclass
class GpuMemoryHealth:
    """One GPU of ``nvidia-smi -q``: identity and memory health (None where the GPU does not report a value)."""

    pci: str = ''
    uuid: str = ''
    minor: Optional[int] = None
    product: str = ''
    ecc_volatile_uncorrectable: Optional[int] = None
    ecc_aggregate_uncorrectable: Optional[int] = None
    retired_pending: Optional[bool] = None
    retired_double_bit: Optional[int] = None
    remap_pending: Optional[bool] = None
    remap_failure: Optional[bool] = None
    remap_uncorrectable: Optional[int] = None
    reset_required: Optional[bool] = None
    drain_and_reset: Optional[bool] = None

    def to_json(self):
        return asdict(self)

    def faults(self):
        """[(kind, what and what to do)] of what makes this GPU unfit to start a server on."""
        found = []
        if self.ecc_volatile_uncorrectable:
            found.append(('ecc_uncorrectable', '%d uncorrectable ECC error(s) since the driver loaded (nvidia-smi -q: ECC Errors, '
                          'Volatile): reset the GPU (nvidia-smi -r -i <index>) or reboot' % self.ecc_volatile_uncorrectable))
        if self.retired_pending:
            found.append(('retired_pages_pending', 'memory pages are pending retirement (Pending Page Blacklist: Yes): they are '
                          'retired at the next GPU reset; reset it (nvidia-smi -r -i <index>) while nothing runs on it'))
        if self.remap_failure:
            found.append(('row_remap_failure', 'a row remapping failed (Remapping Failure Occurred: Yes), NVIDIA\'s RMA criterion: '
                          'run the field diagnostic and replace the GPU if it confirms'))
        if self.remap_pending:
            found.append(('row_remap_pending', 'a row remapping is pending (Remapped Rows, Pending: Yes): it takes effect at the '
                          'next GPU reset; reset it (nvidia-smi -r -i <index>) while nothing runs on it'))
        if self.reset_required or self.drain_and_reset:
            found.append(('reset_required', 'the driver asks for a GPU reset (GPU Reset Status): drain it and reset it'))
        return found

    def warnings(self):
        if self.ecc_aggregate_uncorrectable and not self.ecc_volatile_uncorrectable:
            return ['%d uncorrectable ECC error(s) over the GPU\'s life (Aggregate), none since the driver loaded'
                    % self.ecc_aggregate_uncorrectable]
        return []


def _gpu(bus, tree):
    minor = _count(_find(tree, 'Minor Number'))
    return GpuMemoryHealth(
        pci=pci_key(bus) if bus else '', uuid=str(_find(tree, 'GPU UUID') or ''), minor=minor, product=str(_find(tree, 'Product Name') or ''),
        ecc_volatile_uncorrectable=_sum_uncorrectable(_find(tree, 'ECC Errors', 'Volatile') or _find(tree, 'Volatile')),
        ecc_aggregate_uncorrectable=_sum_uncorrectable(_find(tree, 'ECC Errors', 'Aggregate') or _find(tree, 'Aggregate')),
        retired_pending=_yes(_find(tree, 'Retired Pages', 'Pending Page Blacklist') or _find(tree, 'Retired Pages', 'Pending Page Retirement')),
        retired_double_bit=_count(_find(tree, 'Retired Pages', 'Double Bit ECC')),
        remap_pending=_yes(_find(tree, 'Remapped Rows', 'Pending')),
        remap_failure=_yes(_find(tree, 'Remapped Rows', 'Remapping Failure Occurred')),
        remap_uncorrectable=_count(_find(tree, 'Remapped Rows', 'Uncorrectable Error')),
        reset_required=_yes(_find(tree, 'GPU Reset Status', 'Reset Required')),
        drain_and_reset=_yes(_find(tree, 'GPU Reset Status', 'Drain and Reset Recommended')))


@dataclass
class SmiReport:
    """What ``nvidia-smi -q`` said: its GPUs in index order, or the failure it printed instead."""

    gpus: List[GpuMemoryHealth] = field(default_factory=list)
    failure: str = ''
    failed_pci: str = ''

    def to_json(self):
        return {'gpus': [gpu.to_json() for gpu in self.gpus], 'failure': self.failure, 'failed_pci': self.failed_pci}


def parse(text):
    """``nvidia-smi -q`` (whole, or an excerpt: sections without a ``GPU`` header count as one GPU of unknown address)."""
    report = SmiReport()
    handle = _HANDLE_RE.search(text or '')
    if handle:
        report.failure = handle.group(0).strip()
        report.failed_pci = pci_key(handle.group('bus'))
        return report
    if _NO_DEVICES_RE.search(text or ''):
        report.failure = 'No devices were found'
        return report
    tree = parse_tree(text)
    for key, value in tree.items():
        found = _GPU_RE.match(key)
        if found and isinstance(value, dict):
            report.gpus.append(_gpu(found.group('bus'), value))
    if not report.gpus and any(_find(tree, name) is not None for name in ('ECC Errors', 'Volatile', 'Retired Pages', 'Remapped Rows')):
        report.gpus.append(_gpu('', tree))
    return report
