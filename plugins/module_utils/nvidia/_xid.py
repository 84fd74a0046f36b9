# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""NVIDIA Xid events in the kernel log: the lines, the GPU each names, and what NVIDIA says each code means.

The driver reports GPU errors as ``NVRM: Xid (PCI:0000:2b:00): 79, pid=..., name=..., <message>`` (older drivers:
``NVRM: Xid (0000:01:00): 3, ...``), announces a GPU's identity once as ``NVRM: GPU at PCI:0000:2b:00: GPU-<uuid>``
and, since R570, may log a GPU that fell off the bus without an Xid (``NVRM: The NVIDIA GPU 0000:b3:00.0 ... has
fallen off the bus``). Each code is read against NVIDIA's Xid catalog for Ampere and newer
(:data:`CATALOG_URL`): its description and its immediate action (the catalog's "Resolution Bucket"). The action
decides the severity the collection gives an event:

* ``fault``: the GPU needs a reset, a reboot or hardware attention (RESET_GPU, RESTART_BM, the ECC and NVLink
  workflows, ...). Starting a server on it, or restarting one, only hides the fault.
* ``app``: the application that hit it must restart (RESTART_APP: a page fault, a contained memory error).
* ``info``: nothing to do (IGNORE: row-remapper events, Xid 43/45 after an application was stopped).

Pure functions over text; standard library only (runs on the target, Python 3.9+).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional

CATALOG_URL = 'https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html'
FAULT, APP, INFO = 'fault', 'app', 'info'

# Xid code -> (mnemonic, NVIDIA's description, immediate action), from the catalog at CATALOG_URL (codes it lists as
# used on A100/H100/B100/GB200; "Unused" codes are left out and read as unknown).
_CE = 'Copy Engine Exception'
CATALOG = {
    8: ('ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT', 'GPU stopped processing', 'RESTART_APP'),
    11: ('ROBUST_CHANNEL_GR_ERROR_MISSING_HW', 'Invalid or corrupted push buffer stream', 'RESTART_APP'),
    13: ('ROBUST_CHANNEL_GR_EXCEPTION', 'Graphics Engine Exception', 'RESTART_APP'),
    14: ('ROBUST_CHANNEL_FAKE_ERROR', 'Fake or injected error from user space', 'IGNORE'),
    25: ('ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY', 'Invalid or illegal push buffer stream', 'RESTART_APP'),
    31: ('ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT', 'GPU memory page fault', 'RESTART_APP'),
    32: ('ROBUST_CHANNEL_PBDMA_ERROR', 'Invalid or corrupted push buffer stream', 'RESTART_APP'),
    37: ('ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD', 'Driver firmware error', 'IGNORE'),
    38: ('ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT', 'Driver firmware error', 'IGNORE'),
    39: ('ROBUST_CHANNEL_CE0_ERROR', _CE, 'RESTART_APP'),
    40: ('ROBUST_CHANNEL_CE1_ERROR', _CE, 'RESTART_APP'),
    41: ('ROBUST_CHANNEL_CE2_ERROR', _CE, 'RESTART_APP'),
    43: ('ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR', 'GPU stopped processing', 'IGNORE'),
    44: ('ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW', 'Graphics Engine fault during context switch', 'IGNORE'),
    45: ('ROBUST_CHANNEL_PREEMPTIVE_REMOVAL', 'Preemptive cleanup, due to previous errors', 'WORKFLOW_XID_45'),
    46: ('ROBUST_CHANNEL_GPU_TIMEOUT_ERROR', 'GPU stopped processing', 'RESET_GPU'),
    48: ('ROBUST_CHANNEL_GPU_ECC_DBE', 'Double Bit ECC Error', 'WORKFLOW_XID_48'),
    54: ('SILENT_RUNNING_PWR_REDUCED_CLOCKING', 'Auxiliary power is not connected to the GPU board', 'CHECK_MECHANICALS'),
    60: ('ROBUST_CHANNEL_SEC2_ERROR', 'Video processor exception', 'RESTART_APP'),
    62: ('PMU_HALT_ERROR', 'Internal micro-controller halt', 'RESET_GPU'),
    63: ('INFOROM_DRAM_RETIREMENT_EVENT', 'GPU memory remapping event', 'IGNORE'),
    64: ('INFOROM_DRAM_RETIREMENT_FAILURE', 'GPU memory remapping failure', 'RESET_GPU'),
    66: ('ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION', 'Illegal access by driver', 'IGNORE'),
    67: ('ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION', 'Illegal access by driver', 'IGNORE'),
    68: ('ROBUST_CHANNEL_NVDEC0_ERROR', 'NVDEC0 Exception', 'RESTART_APP'),
    69: ('ROBUST_CHANNEL_GR_CLASS_ERROR', 'Graphics Engine class error', 'RESTART_APP'),
    74: ('NVLINK_ERROR', 'NVLINK Error', 'WORKFLOW_NVLINK_ERR'),
    78: ('VGPU_START_ERROR', 'vGPU Start Error', 'UPDATE_SWFW'),
    79: ('ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS', 'GPU has fallen off the bus', 'RESTART_BM'),
    80: ('PBDMA_PUSHBUFFER_CRC_MISMATCH', 'Corrupted data sent to GPU', 'RESTART_APP'),
    92: ('EXCESSIVE_SBE_INTERRUPTS', 'High single-bit ECC error rate', 'IGNORE'),
    93: ('INFOROM_ERASE_LIMIT_EXCEEDED', 'Non-fatal violation of provisioned InfoROM wear limit', 'IGNORE'),
    94: ('ROBUST_CHANNEL_CONTAINED_ERROR', 'Contained memory error', 'RESTART_APP'),
    95: ('ROBUST_CHANNEL_UNCONTAINED_ERROR', 'Uncontained memory error', 'RESET_GPU'),
    106: ('SMBPBI_TEST_MESSAGE', 'SMBPBI Test Message', 'IGNORE'),
    107: ('SMBPBI_TEST_MESSAGE_SILENT', 'SMBPBI Test Message Silent', 'IGNORE'),
    109: ('ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR', 'Context Switch Timeout Error', 'RESET_GPU'),
    110: ('SEC_FAULT_ERROR', 'Security Fault Error', 'RESET_GPU'),
    119: ('GSP_RPC_TIMEOUT', 'GSP RPC Timeout', 'RESET_GPU'),
    120: ('GSP_ERROR', 'GSP Error', 'RESET_GPU'),
    121: ('C2C_ERROR', 'C2C Error', 'IGNORE'),
    136: ('ALI_TRAINING_FAIL', 'Link Training Failed', 'RESET_GPU'),
    137: ('NVLINK_PRIV_ERR', 'NVLink Privilege Error', 'IGNORE'),
    140: ('UNRECOVERABLE_ECC_ERROR_ESCAPE', 'ECC Unrecovered Error', 'RESET_GPU'),
    141: ('ROBUST_CHANNEL_FAST_PATH_ERROR', 'CUDA Fast Path Error', 'IGNORE'),
    143: ('GPU_INIT_ERROR', 'GPU Initialization Error', 'RESET_GPU'),
    151: ('ROBUST_CHANNEL_KEY_ROTATION_ERROR', 'Key rotation Error', 'RESTART_VM'),
    152: ('ROBUST_CHANNEL_DLA_SMMU_ERROR', 'DLA SMMU Error', 'IGNORE'),
    153: ('ROBUST_CHANNEL_DLA_TIMEOUT', 'DLA timeout Error', 'IGNORE'),
    154: ('GPU_RECOVERY_ACTION_CHANGED', 'GPU Recovery Action Changed', 'XID_154'),
    155: ('NVLINK_SW_DEFINED_ERROR', 'NVLINK: SW Defined Error', 'RESET_GPU'),
    156: ('RESOURCE_RETIREMENT_EVENT', 'Resource Retirement Event', 'RESET_GPU'),
    157: ('RESOURCE_RETIREMENT_FAILURE', 'Resource Retirement Failure', 'IGNORE'),
    158: ('GPU_FATAL_TIMEOUT', 'GPU Fatal Timeout', 'RESET_GPU'),
    159: ('ROBUST_CHANNEL_CHI_NON_DATA_ERROR', 'CHI Non-Data Error', 'CHECK_UVM'),
    160: ('CHANNEL_RETIREMENT_EVENT', 'Channel Retirement Event', 'IGNORE'),
    161: ('CHANNEL_RETIREMENT_FAILURE', 'Channel Retirement Failure', 'IGNORE'),
    167: ('PCIE_FATAL_TIMEOUT', 'PCIE_FATAL_TIMEOUT', 'RESET_GPU'),
    168: ('REDUCED_GPU_MEMORY_CAPACITY', 'Errors found in WPR (write protected region)', 'RESET_GPU'),
    169: ('SEC2_HALT_ERROR', 'Internal micro-controller halt', 'RESET_GPU'),
    171: ('UNCORRECTABLE_DRAM_ERROR', 'Uncorrectable DRAM error (details of an Xid 48)', 'WORKFLOW_XID_48'),
    172: ('UNCORRECTABLE_SRAM_ERROR', 'Uncorrectable SRAM error (details of an Xid 48)', 'WORKFLOW_XID_48'),
}
# Engine exceptions of the video, JPEG, OFA and further copy engines: the application restarts.
for _code, _engine in ((70, 'CE3'), (71, 'CE4'), (72, 'CE5'), (75, 'CE6'), (76, 'CE7'), (77, 'CE8'), (82, 'NVJPG0'),
                       (83, 'NVDEC1'), (84, 'NVDEC2'), (85, 'CE9'), (86, 'OFA0'), (88, 'NVDEC3'), (89, 'NVDEC4'),
                       (96, 'NVDEC5'), (97, 'NVDEC6'), (98, 'NVDEC7'), (99, 'NVJPG1'), (100, 'NVJPG2'), (101, 'NVJPG3'),
                       (102, 'NVJPG4'), (103, 'NVJPG5'), (104, 'NVJPG6'), (105, 'NVJPG7'), (139, 'OFA1')):
    CATALOG[_code] = ('ROBUST_CHANNEL_%s_ERROR' % _engine, '%s Error' % _engine, 'RESTART_APP')
for _code in range(126, 136):
    CATALOG[_code] = ('ROBUST_CHANNEL_CE%d_ERROR' % (_code - 116), _CE, 'RESTART_APP')
# NVLink 5 errors (B100/GB200): the line itself says Fatal or Nonfatal, and the catalog's action follows it.
for _code, _unit in ((144, 'SAW'), (145, 'RLW'), (146, 'TLW'), (147, 'TREX'), (148, 'NVLPW_CTRL'), (149, 'NETIR'), (150, 'MSE')):
    CATALOG[_code] = ('NVLINK_%s_ERROR' % _unit, 'NVLINK: %s Error' % _unit, 'WORKFLOW_NVLINK5_ERR')

_APP_ACTIONS = ('RESTART_APP', 'CHECK_APP/CUDA')
_INFO_ACTIONS = ('IGNORE', 'WORKFLOW_XID_45')

# "NVRM: Xid (PCI:0000:2b:00): 79, pid=1101234, name=nvc:[driver], GPU has fallen off the bus."
_XID_RE = re.compile(r'NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.\d)?\):\s*(?P<code>\d+),\s*(?P<rest>.*)')
_PID_RE = re.compile(r"^pid='?(?P<pid>[^,']*)'?,\s*name=(?P<name>[^,]*),\s*")
_GPU_AT_RE = re.compile(r'NVRM: GPU at (?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.\d)?:\s*(?P<uuid>GPU-[0-9a-fA-F-]+)')
# R570+: "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus." and the three-line "The NVIDIA GPU 0000:b3:00.0 ... has
# NVRM: fallen off the bus and is not responding to commands."
_OFF_BUS_RE = re.compile(r'NVRM: (?P<the>The NVIDIA )?GPU (?:at )?(?:PCI:)?(?P<pci>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.\d)?\b')
_RECOVERY_NONE_RE = re.compile(r'to 0x0 \(None\)')


def pci_key(address):
    """'0000:2b:00' for every spelling of a GPU's PCI address: nvidia-smi's '00000000:2B:00.0', the kernel log's
    'PCI:0000:2b:00', 'NVRM: GPU 0000:2b:00.0'; '' when it is none."""
    text = (address or '').strip().lower()
    if text.startswith('pci:'):
        text = text[4:]
    parts = text.split(':')
    if len(parts) != 3:
        return ''
    domain, bus, device = parts
    return '%s:%s:%s' % (domain[-4:].rjust(4, '0'), bus.rjust(2, '0'), device.split('.')[0].rjust(2, '0'))


@dataclass
class XidEvent:
    """One Xid (or an off-the-bus report without one) on one GPU, read against the catalog."""

    code: int
    pci: str
    message: str
    line: str
    severity: str
    action: str
    meaning: str
    mnemonic: str = ''
    pid: Optional[str] = None
    process: Optional[str] = None

    def to_json(self):
        return asdict(self)

    def describe(self):
        """'Xid 79 (GPU has fallen off the bus; NVIDIA: RESTART_BM)'."""
        return 'Xid %d (%s; NVIDIA: %s)' % (self.code, self.meaning, self.action)


def classify(code, message=''):
    """(severity, action, meaning, mnemonic) of an Xid code; the line's message decides the NVLink 5 and 154 codes."""
    entry = CATALOG.get(code)
    if entry is None:
        return FAULT, 'UNKNOWN', 'not in the Xid catalog recorded from %s' % CATALOG_URL, ''
    mnemonic, meaning, action = entry
    if action == 'WORKFLOW_NVLINK5_ERR':
        fatal = re.search(r'\bFatal\b', message) is not None
        return (FAULT if fatal else INFO), ('RESET_GPU' if fatal else 'IGNORE'), meaning, mnemonic
    if action == 'XID_154':
        return (INFO if _RECOVERY_NONE_RE.search(message) else FAULT), action, meaning, mnemonic
    if action in _APP_ACTIONS:
        return APP, action, meaning, mnemonic
    if action in _INFO_ACTIONS:
        return INFO, action, meaning, mnemonic
    return FAULT, action, meaning, mnemonic


def _event(code, pci, message, line):
    severity, action, meaning, mnemonic = classify(code, message)
    pid = process = None
    found = _PID_RE.match(message)
    if found:
        pid, process, message = found.group('pid'), found.group('name').strip(), message[found.end():]
    return XidEvent(code=code, pci=pci_key(pci), message=message.strip(), line=line.strip(), severity=severity,
                    action=action, meaning=meaning, mnemonic=mnemonic, pid=pid, process=process)


def parse(text):
    """Every Xid event of a kernel log (dmesg, ``journalctl -k``, syslog), in log order. An off-the-bus report without
    an Xid line becomes an Xid 79 event of its GPU."""
    events = []
    lines = (text or '').replace('#012', '\n').splitlines()
    for number, line in enumerate(lines):
        found = _XID_RE.search(line)
        if found:
            events.append(_event(int(found.group('code')), found.group('pci'), found.group('rest'), line))
            continue
        off = _OFF_BUS_RE.search(line)
        said = 'fallen off the bus' in line or (off and off.group('the') and 'fallen off the bus' in ' '.join(lines[number:number + 3]))
        if off and said:
            events.append(_event(79, off.group('pci'), 'GPU has fallen off the bus (reported without an Xid)', line))
    return events


def gpu_uuids(text):
    """{pci key: uuid} from ``NVRM: GPU at PCI:...: GPU-<uuid>`` lines (the driver names a GPU before its first Xid)."""
    return dict((pci_key(m.group('pci')), m.group('uuid')) for m in _GPU_AT_RE.finditer(text or ''))


def by_gpu(events, severities=(FAULT,)):
    """{pci key: [events]} of the events of the given severities, in log order."""
    grouped: Dict[str, List[XidEvent]] = {}
    for event in events:
        if event.severity in severities:
            grouped.setdefault(event.pci, []).append(event)
    return grouped
