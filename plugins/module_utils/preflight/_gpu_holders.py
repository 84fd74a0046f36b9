# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Who holds the GPUs (and ports) an SGLang server is about to use, and whose process each holder is.

A holder is classified as one of:

* ``own``: a process of the unit's current run (in the unit's cgroup while the unit is active). A restart stops it.
* ``orphan``: left behind by an earlier run of this server: an SGLang process (``sglang::scheduler_TP0``,
  ``sglang::detokenizer``, ``python -m sglang.launch_server``) or a descendant of one, running as the service user,
  re-parented (its parent is PID 1 or a systemd manager), and outside every other service's cgroup; or any process
  left in the cgroup of the unit while the unit is not active. Only these may be stopped, and only with cleanup.
* ``foreign``: everything else. Never stopped; a foreign holder of the server's GPU or port fails the pre-flight.

Pure functions over :class:`_procfs.Proc` objects; standard library only (runs on the target, Python 3.9+).
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field

OWN, ORPHAN, FOREIGN = 'own', 'orphan', 'foreign'
# The NVIDIA nodes every CUDA process opens whatever GPU it uses.
SHARED_DEVICES = ('/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools')
_GPU_NODE_RE = re.compile(r'(\d+)$')
# SGLang names its processes with setproctitle: sglang::scheduler_TP0, sglang::scheduler_DP0_TP1, sglang::detokenizer,
# sglang::data_parallel_controller ...; the launcher itself runs as "python -m sglang.launch_server".
_SGLANG_TITLE_RE = re.compile(r'^sglang::')
_SGLANG_ENTRY_POINTS = ('sglang.launch_server', 'sglang.srt.entrypoints')


@dataclass
class Holder:
    """A process holding one of the server's GPU devices or ports, with its class and the reason for it."""

    pid: int
    user: str
    command: str
    title: str
    unit: str
    kind: str
    reason: str
    devices: list = field(default_factory=list)
    gpus: list = field(default_factory=list)
    memory_mib: int = None

    def to_json(self):
        return {'pid': self.pid, 'user': self.user, 'command': self.command, 'title': self.title, 'unit': self.unit or None,
                'kind': self.kind, 'reason': self.reason, 'devices': list(self.devices), 'gpus': list(self.gpus),
                'memory_mib': self.memory_mib}

    @classmethod
    def from_json(cls, data):
        return cls(**dict((key, value) for key, value in data.items() if key in cls.__dataclass_fields__))

    def describe(self):
        where = ', unit %s' % self.unit if self.unit else ''
        memory = ', %d MiB' % self.memory_mib if self.memory_mib is not None else ''
        return 'pid %d %s (user %s%s%s)' % (self.pid, self.title, self.user, where, memory)


def gpu_index(path):
    """The GPU number of a device node (/dev/nvidia3 -> 3), or None."""
    found = _GPU_NODE_RE.search(os.path.basename(path))
    return int(found.group(1)) if found else None


def discover_gpu_devices(dev_root='/dev'):
    """{index: path} of the per-GPU device nodes (/dev/nvidia0, /dev/nvidia1, ...)."""
    found = {}
    for path in glob.glob(os.path.join(dev_root, 'nvidia[0-9]*')):
        index = gpu_index(path)
        if index is not None and os.path.basename(path) == 'nvidia%d' % index:
            found[index] = path
    return found


def visible_gpus(cuda_visible_devices, devices, uuids=None):
    """The subset of DEVICES ({index: path}) that CUDA_VISIBLE_DEVICES leaves the server.

    Indices are taken as device numbers (CUDA_DEVICE_ORDER=PCI_BUS_ID, the order nvidia-smi and the device nodes use);
    UUIDs (GPU-...) are resolved with UUIDS ({uuid: index}, from nvidia-smi). Like CUDA, the list ends at the first
    entry it cannot resolve. None or unset means every GPU.
    """
    if cuda_visible_devices is None:
        return dict(devices)
    chosen = {}
    for entry in str(cuda_visible_devices).split(','):
        entry = entry.strip()
        if entry.isdigit():
            index = int(entry)
        elif (uuids or {}).get(entry) is not None:
            index = uuids[entry]
        else:
            break
        if index not in devices:
            break
        chosen[index] = devices[index]
    return chosen


def parse_compute_apps(text, uuids):
    """nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits -> {pid: [(gpu, MiB)]}."""
    apps = {}
    for line in (text or '').splitlines():
        parts = [part.strip() for part in line.split(',')]
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        memory = int(parts[2]) if parts[2].isdigit() else None
        apps.setdefault(int(parts[0]), []).append((uuids.get(parts[1]), memory))
    return apps


def parse_gpu_uuids(text):
    """nvidia-smi --query-gpu=index,uuid --format=csv,noheader -> {uuid: index}."""
    uuids = {}
    for line in (text or '').splitlines():
        parts = [part.strip() for part in line.split(',')]
        if len(parts) == 2 and parts[0].isdigit():
            uuids[parts[1]] = int(parts[0])
    return uuids


def is_sglang(proc):
    """Whether a process is one of SGLang's, by its title (setproctitle) or its entry point."""
    if _SGLANG_TITLE_RE.match(proc.title) or _SGLANG_TITLE_RE.match(proc.comm):
        return True
    return any(arg in _SGLANG_ENTRY_POINTS for arg in proc.cmdline[1:4])


def _reparented(proc, procs):
    if proc.ppid <= 1:
        return True
    parent = procs.get(proc.ppid)
    # A user manager or another systemd instance acting as a subreaper adopts orphans too.
    return parent is not None and parent.comm == 'systemd'


def _orphan_root(proc, procs, uid):
    """The re-parented SGLang ancestor (or the process itself) of the service user that makes PROC an orphan, or None."""
    seen = set()
    while proc is not None and proc.pid not in seen and proc.uid == uid:
        seen.add(proc.pid)
        if is_sglang(proc) and _reparented(proc, procs):
            return proc
        proc = procs.get(proc.ppid)
    return None


def classify(proc, procs, unit, unit_active, service_uid):
    """(kind, reason) of one process; see the module docstring for the rules."""
    if unit and proc.unit == unit:
        if unit_active:
            return OWN, 'runs in the cgroup of %s, the current run of this server' % unit
        return ORPHAN, 'left in the cgroup of %s although the unit is not active' % unit
    if proc.unit.endswith('.service'):
        return FOREIGN, 'belongs to another service, %s' % proc.unit
    if service_uid is None:
        return FOREIGN, 'the service user is unknown, so no process can be told to be this server\'s'
    if proc.uid != service_uid:
        return FOREIGN, 'runs as %s, not as the service user' % proc.user
    root = _orphan_root(proc, procs, service_uid)
    if root is None:
        if is_sglang(proc):
            return FOREIGN, 'an SGLang process of the service user whose parent (pid %d) is alive: a server started by hand' % proc.ppid
        return FOREIGN, 'a process of the service user that is not an SGLang process of an earlier run'
    if root.pid == proc.pid:
        return ORPHAN, 'an SGLang process of the service user re-parented to pid %d, outside %s: left by an earlier run' % (
            proc.ppid, unit or 'the unit')
    return ORPHAN, 'a child of orphan pid %d (%s), left by an earlier run' % (root.pid, root.title)


def find_holders(procs, gpu_devices, unit, unit_active, service_uid, compute_apps=None, shared=SHARED_DEVICES):
    """Holders of the server's GPU devices ({index: path}) or of the shared NVIDIA nodes, classified.

    COMPUTE_APPS ({pid: [(gpu, MiB)]}, from nvidia-smi) adds memory use and processes that /proc does not show (other
    PID namespaces); those are foreign (pid unknown here).
    """
    by_path = dict((path, index) for index, path in gpu_devices.items())
    apps = compute_apps or {}
    holders = []
    for pid in sorted(procs):
        proc = procs[pid]
        held = [path for path in list(by_path) + list(shared) if proc.holds(path)]
        used = [gpu for gpu, dummy in apps.get(pid, []) if gpu in gpu_devices]
        if not held and not used:
            continue
        kind, reason = classify(proc, procs, unit, unit_active, service_uid)
        gpus = sorted(set([by_path[path] for path in held if path in by_path] + used))
        memory = sum(mib for dummy, mib in apps.get(pid, []) if mib is not None) if pid in apps else None
        holders.append(Holder(pid=pid, user=proc.user, command=proc.command(), title=proc.title, unit=proc.unit,
                              kind=kind, reason=reason, devices=held, gpus=gpus, memory_mib=memory))
    for pid in sorted(set(apps) - set(procs)):
        gpus = sorted(set(gpu for gpu, dummy in apps[pid] if gpu in gpu_devices))
        if gpus:
            memory = sum(mib for dummy, mib in apps[pid] if mib is not None)
            holders.append(Holder(pid=pid, user='?', command='?', title='?', unit='', kind=FOREIGN, gpus=gpus, memory_mib=memory,
                                  reason='nvidia-smi lists it on the GPU but this host\'s /proc does not show it (another PID namespace)'))
    return holders


def blocking(holders):
    """Foreign holders that stand in the server's way: those on one of its GPUs (a foreign process holding only the
    shared control nodes uses another GPU)."""
    return [holder for holder in holders if holder.kind == FOREIGN and holder.gpus]
