# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""GPU health before a start: the server's GPUs are there, have no Xid fault since boot, no memory error waiting for a
reset, and pass DCGM's quick diagnostic where DCGM is installed.

Observing (:func:`read_inputs`): the kernel log since boot (a file when the host writes one, else ``journalctl -k -b
0``, else ``dmesg``), ``nvidia-smi -q``, and ``dcgmi diag -r 1`` (seconds). Deciding (:func:`decide`, pure): which GPUs
are the server's (``CUDA_VISIBLE_DEVICES``, the ``gpu_devices`` nodes, else the first ``tp x pp x dp`` from
``--base-gpu-id``), and for each what would make a start on it fail or hide a fault, with NVIDIA's meaning of it.
A fault fails the check; with ``mode='warn'`` it is reported as a warning and the start goes on.

Standard library only (runs on the target, Python 3.9+).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _dcgm as dcgm
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _smi_q as smi_q
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _xid as xid
from ansible_collections.llmops.sglang.plugins.module_utils.preflight._checks import FAILED, UNKNOWN, WARNING, Check

DCGM_TIMEOUT = 120
# A boot banner in a kernel log file that spans boots (rsyslog's kern.log): what follows the last one is this boot.
_BOOT_RE = re.compile(r'(?:\] |kernel: )Linux version \d')
_NVRM_RE = re.compile(r'NVRM|nvidia', re.I)


@dataclass
class HealthInputs:
    """The raw texts the check reads, and where each came from (None: not available on this host)."""

    kernel_log: Optional[str] = None
    kernel_source: Optional[str] = None
    smi: Optional[str] = None
    smi_rc: Optional[int] = None
    dcgm: Optional[str] = None
    dcgm_rc: Optional[int] = None


def this_boot(text):
    """The part of a kernel log file after its last boot banner (the whole text when it has none)."""
    last = None
    for last in _BOOT_RE.finditer(text or ''):
        pass
    return text[text.rfind('\n', 0, last.start()) + 1:] if last is not None else (text or '')


def whole_lines(text):
    """``text`` without an unterminated last line: a syslog daemon may be writing it while it is read, and its start
    alone can parse as another Xid ('... Xid (PCI:0000:9b:00): 11' of a 119 line). It is read whole next time."""
    return text[:text.rfind('\n') + 1]


def read_kernel_log(run, which, path=None):
    """(NVIDIA lines of this boot's kernel log, where they came from). ``path``: a kernel log file (rsyslog's
    ``/var/log/kern.log``, or a test's stand-in); else ``journalctl -k -b 0``, else ``dmesg``; (None, None) when none
    can be read."""
    if path:
        try:
            with open(path, encoding='utf-8', errors='replace') as handle:
                text = this_boot(whole_lines(handle.read()))
        except OSError:
            return None, None
        return _nvidia_lines(text), path
    for argv in (['journalctl', '-k', '-b', '0', '--no-pager', '-q', '-o', 'short-monotonic'], ['dmesg']):
        tool = which(argv[0])
        if not tool:
            continue
        rc, out, dummy = run([tool] + argv[1:])
        if rc == 0 and out.strip():
            return _nvidia_lines(out), ' '.join(argv)
    return None, None


def _nvidia_lines(text):
    """The NVIDIA lines and their continuation lines (an NVRM message may span lines that start with blanks)."""
    kept = [line for line in text.splitlines() if _NVRM_RE.search(line) or (line[:1].isspace() and line.strip())]
    return '\n'.join(kept) + ('\n' if kept else '')


def read_inputs(run, which, kernel_log=None, nvidia_smi=None, dcgm_diag=True):
    """Everything :func:`decide` reads, from the host."""
    inputs = HealthInputs()
    inputs.kernel_log, inputs.kernel_source = read_kernel_log(run, which, kernel_log)
    smi = nvidia_smi if nvidia_smi and os.path.exists(nvidia_smi) else which(nvidia_smi or 'nvidia-smi')
    if smi:
        inputs.smi_rc, out, err = run([smi, '-q'])
        inputs.smi = (out or '') + (err or '')
    dcgmi = which('dcgmi') if dcgm_diag else None
    if dcgmi:
        timeout = which('timeout')
        argv = ([timeout, str(DCGM_TIMEOUT)] if timeout else []) + [dcgmi, 'diag', '-r', '1']
        inputs.dcgm_rc, out, err = run(argv)
        inputs.dcgm = (out or '') + (err or '')
    return inputs


# ------------------------------------------------------------------------------------------------ the server's GPUs

@dataclass
class Wanted:
    """How the server names the GPUs it uses: nvidia-smi indices, UUIDs or device minor numbers, and where from."""

    indices: List[int] = field(default_factory=list)
    uuids: List[str] = field(default_factory=list)
    minors: List[int] = field(default_factory=list)
    by: str = ''


def _int(value, default):
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return default


def wanted_gpus(environment, gpu_devices, server_args):
    """The server's GPUs: CUDA_VISIBLE_DEVICES of its environment, else its device nodes (/dev/nvidia<minor>), else
    the tp x pp x dp GPUs SGLang takes from --base-gpu-id."""
    visible = (environment or {}).get('CUDA_VISIBLE_DEVICES')
    if visible is not None:
        wanted = Wanted(by='CUDA_VISIBLE_DEVICES=%s' % visible)
        for entry in str(visible).split(','):
            entry = entry.strip()
            if entry.isdigit():
                wanted.indices.append(int(entry))
            elif entry.startswith('GPU-'):
                wanted.uuids.append(entry)
            elif entry:
                break  # CUDA stops at the first entry it cannot read
        return wanted
    if gpu_devices:
        minors = [int(m.group(1)) for m in (re.search(r'(\d+)$', os.path.basename(path)) for path in gpu_devices) if m]
        return Wanted(minors=minors, by='gpu_devices %s' % ', '.join(gpu_devices))
    args = server_args or {}
    count = 1
    for names in (('tp-size', 'tp', 'tensor-parallel-size'), ('pp-size', 'pipeline-parallel-size'), ('dp-size', 'dp', 'data-parallel-size')):
        count *= max(1, next((_int(args[n], 1) for n in names if n in args), 1))
    base = _int(args.get('base-gpu-id', 0), 0)
    return Wanted(indices=list(range(base, base + count)), by='%d GPU(s) from --base-gpu-id %d (tp x pp x dp)' % (count, base))


def match(wanted, gpus):
    """[(label, gpu or None)] for each GPU the server wants; gpus in nvidia-smi index order."""
    matched = []
    for index in wanted.indices:
        matched.append(('GPU %d' % index, gpus[index] if 0 <= index < len(gpus) else None))
    for uuid in wanted.uuids:
        matched.append((uuid, next((gpu for gpu in gpus if gpu.uuid == uuid), None)))
    for minor in wanted.minors:
        found = [(i, gpu) for i, gpu in enumerate(gpus) if gpu.minor == minor]
        matched.append(('GPU %d' % found[0][0] if found else '/dev/nvidia%d' % minor, found[0][1] if found else None))
    return matched


# ------------------------------------------------------------------------------------------------ the decision

def _xid_problem(label, gpu_name, events):
    codes = []
    for event in events:
        if event.code not in codes:
            codes.append(event.code)
    meanings = '; '.join('%s x%d' % (next(e for e in events if e.code == code).describe(), len([e for e in events if e.code == code]))
                         for code in codes)
    return ('%s%s has %s in the kernel log since boot (last: %r). NVIDIA\'s catalog (%s) says the GPU needs a reset or the '
            'host a reboot: reset it (nvidia-smi -r -i <index>) or reboot, and check it before starting SGLang on it again'
            % (label, gpu_name, meanings, events[-1].line[-240:], xid.CATALOG_URL))


def _gpu_name(gpu, pci):
    parts = [part for part in (pci or (gpu.pci if gpu else ''), gpu.uuid if gpu else '') if part]
    return ' (%s)' % ', '.join(parts) if parts else ''


class _Verdict:
    """Collects the problems, warnings and per-GPU rows of one decision."""

    def __init__(self):
        self.problems, self.warnings, self.rows = [], [], []


def _judge_gpus(verdict, wanted, report, events, diag):
    faults = xid.by_gpu(events)
    app = xid.by_gpu(events, (xid.APP,))
    mapped = bool(report and report.gpus)
    unmapped = [event for group in faults.values() for event in group]  # without nvidia-smi: said once, for the server
    for label, gpu in match(wanted, report.gpus if report else []):
        pci = gpu.pci if gpu else ''
        row = {'gpu': label, 'pci': pci or None, 'uuid': gpu.uuid if gpu else None, 'present': gpu is not None or not mapped,
               'xids': [], 'memory': [], 'dcgm': []}
        if mapped and gpu is None:
            verdict.problems.append('%s is the server\'s (%s) but nvidia-smi lists only %d GPU(s) (%s): it is gone (fallen off the '
                                    'bus, or taken by another driver). Check dmesg for Xid 79 and the GPU\'s seating and power; '
                                    'reboot the host' % (label, wanted.by, len(report.gpus), ', '.join(g.pci for g in report.gpus)))
        mine, unmapped = (faults.get(pci, []), unmapped) if mapped else (unmapped, [])
        if mine:
            row['xids'] = sorted(set(event.code for event in mine))
            verdict.problems.append(_xid_problem(label, _gpu_name(gpu, pci or mine[0].pci), mine))
        for event in (app.get(pci, []) if mapped else []):
            verdict.warnings.append('%s: %s since boot: the application that hit it had to restart; the GPU itself is fine per NVIDIA'
                                    % (label, event.describe()))
        for kind, text in (gpu.faults() if gpu else []):
            row['memory'].append(kind)
            verdict.problems.append('%s%s: %s' % (label, _gpu_name(gpu, pci), text))
        verdict.warnings.extend('%s: %s' % (label, text) for text in (gpu.warnings() if gpu else []))
        index = _int(label[4:], None) if label.startswith('GPU ') else None
        for test in (diag.failed if diag else []):
            if not test.failed_gpus or index in test.failed_gpus:
                row['dcgm'].append(test.name)
        verdict.rows.append(row)


def _judge_dcgm(verdict, diag, rows):
    if diag is not None and diag.unavailable:
        verdict.warnings.append('dcgmi diag -r 1 did not run: %s (is nv-hostengine running?)' % diag.unavailable)
    for test in diag.failed if diag else []:
        gpus = ', '.join(row['gpu'] for row in rows if test.name in row['dcgm'])
        if not gpus:
            continue
        verdict.problems.append('dcgmi diag -r 1: %s failed on %s%s. Run dcgmi diag -r 2 on it for more, and fix it before the start'
                                % (test.name, gpus, (': ' + '; '.join(test.errors)) if test.errors else ''))


def decide(inputs, wanted, mode='fail'):
    """Check ``gpu_health`` from the host's texts (:class:`HealthInputs`) for the server's GPUs (:class:`Wanted`)."""
    check = Check('gpu_health', details={'wanted': wanted.by, 'kernel_log': inputs.kernel_source, 'gpus': []})
    report = smi_q.parse(inputs.smi) if inputs.smi is not None else None
    events = xid.parse(inputs.kernel_log) if inputs.kernel_log else []
    diag = dcgm.parse(inputs.dcgm) if inputs.dcgm is not None else None
    verdict = _Verdict()
    if report is not None and report.failure:
        verdict.problems.append('nvidia-smi -q failed: %s. A GPU that nvidia-smi cannot reach has fallen off the bus or hangs: '
                                'check dmesg for Xid 79, reseat or power-cycle it, reboot the host' % report.failure)
    _judge_gpus(verdict, wanted, report, events, diag)
    _judge_dcgm(verdict, diag, verdict.rows)
    check.details.update(gpus=verdict.rows, xids=[event.to_json() for event in events if event.severity != xid.INFO][-20:],
                         smi=report.to_json() if report is not None else None, dcgm=diag.to_json() if diag is not None else None,
                         warnings=verdict.warnings)
    check.problems = verdict.problems
    if verdict.problems:
        check.status = FAILED if mode == 'fail' else WARNING
    elif report is None and not events:
        check.status = UNKNOWN
    faulty = len([row for row in verdict.rows if row['xids'] or row['memory'] or row['dcgm'] or not row['present']])
    check.summary = _summary(report, verdict.rows, faulty, diag, inputs)
    return check


def _summary(report, rows, faulty, diag, inputs):
    if report is None and inputs.kernel_log is None:
        return 'no nvidia-smi and no kernel log: nothing to check'
    text = '%d GPU(s) of the server, %s' % (len(rows), '%d faulty' % faulty if faulty else 'healthy')
    if report is None:
        text += ' (no nvidia-smi: Xids only)'
    if diag is not None:
        text += ', dcgmi diag %s' % ('unavailable' if diag.unavailable else 'failed' if diag.failed else 'passed')
    return text
