# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Evidence of the NVIDIA driver on a host: what the kernel, NVML, the kernel log and the library files say.

Private module_utils of llmops.sglang.nvidia_driver_match and nvidia_driver_info.

Every ``parse_*`` function takes the text a command or file produced and returns structured facts; nothing
here decides whether the driver matches (that is :mod:`nvidia._verdict`).  :class:`EvidenceReader` collects
the raw texts on a live host (argv lists, ``LC_ALL=C``, no shell) into one evidence mapping, and
:func:`read_driver_versions` answers the three versions other checks ask for.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import asdict, dataclass, field

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._packages import read_package_database
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._versions import DRIVER_VERSION_RE, V as _V, VERSION_RE

PROC_VERSION_PATH = '/proc/driver/nvidia/version'
SYS_MODULE_VERSION_PATH = '/sys/module/nvidia/version'
SYS_MODULE_PATH = '/sys/module/nvidia'


def _re_phrase(phrase):
    """Regex for a phrase whose words may be split over NVRM continuation lines."""
    joiner = r'(?:\s+NVRM:)?\s+'
    return joiner.join(re.escape(word) for word in phrase.split())


# ---------------------------------------------------------------------------
# /proc/driver/nvidia/version, /sys/module/nvidia/version, modinfo
# ---------------------------------------------------------------------------

# Both the /proc file ("NVRM version: NVIDIA UNIX ...") and the dmesg banner
# ("NVRM: loading NVIDIA UNIX ...") carry the same text after "NVIDIA UNIX":
#   proprietary:  "x86_64 Kernel Module  520.56.06  Thu Oct  6 ..."
#   open:         "Open Kernel Module for x86_64  565.57.01  Release Build ..."
#   Jetson L4T:   "Open Kernel Module for aarch64  35.3.1  Release Build ..."
_BANNER_BODY = (
    r'NVIDIA UNIX\s+(?:'
    r'(?P<open>Open)\s+Kernel\s+Module\s+for\s+(?P<open_arch>\S+)'
    r'|(?P<arch>(?!Open\b)\S+)\s+Kernel\s+Module'
    r'|Kernel\s+Module)'
    r'\s+(?P<version>' + _V + r')\b'
)
_PROC_RE = re.compile(r'NVRM version:\s*' + _BANNER_BODY)
_PROC_FALLBACK_RE = re.compile(r'NVRM version:[^\n]*?\s(?P<version>\d{2,3}\.\d+(?:\.\d+)?)(?=\s|$)')
_GCC_RE = re.compile(r'^GCC version:\s*(?P<gcc>.*?)\s*$', re.M)


def _banner_facts(match):
    if match.group('open'):
        flavor, arch = 'open', match.group('open_arch')
    elif match.group('arch'):
        flavor, arch = 'proprietary', match.group('arch')
    else:
        flavor, arch = None, None
    return {'version': match.group('version'), 'flavor': flavor, 'arch': arch}


def parse_proc_version(text):
    """Parse ``/proc/driver/nvidia/version``.

    Returns ``{'version', 'flavor', 'arch', 'gcc', 'banner'}`` or ``None`` when
    the text holds no NVRM version line.
    """
    if not text:
        return None
    match = _PROC_RE.search(text)
    if match:
        facts = _banner_facts(match)
    else:
        # Unknown wording between "NVRM version:" and the version: take the first version on the line.
        match = _PROC_FALLBACK_RE.search(text)
        if not match:
            return None
        facts = {'version': match.group('version'), 'flavor': 'open' if re.search(r'\bOpen Kernel Module\b', match.group(0)) else None,
                 'arch': None}
    line_end = text.find('\n', match.start())
    facts['banner'] = text[match.start():line_end if line_end >= 0 else None].strip()
    gcc = _GCC_RE.search(text)
    facts['gcc'] = gcc.group('gcc') if gcc else None
    return facts


def parse_sys_module_version(text):
    """Parse ``/sys/module/nvidia/version`` (a bare version and a newline)."""
    if not text:
        return None
    value = text.strip()
    return value if VERSION_RE.match(value) else None


def parse_modinfo(text):
    """Parse ``modinfo nvidia`` (or ``modinfo -F version``/``-F license`` output).

    modinfo reads the module file on disk for the running kernel, which is not
    necessarily the loaded module.
    """
    facts = {'version': None, 'license': None, 'filename': None}
    if not text:
        return facts
    for line in text.splitlines():
        key, sep, value = line.partition(':')
        if not sep:
            continue
        key = key.strip()
        if key in facts and facts[key] is None:
            facts[key] = value.strip()
    if facts['version'] is None and VERSION_RE.match(text.strip()):
        facts['version'] = text.strip()
    return facts


def flavor_from_license(license_text):
    """modinfo license: ``Dual MIT/GPL`` is the open module, ``NVIDIA`` the proprietary one."""
    if not license_text:
        return None
    value = license_text.strip()
    if value == 'Dual MIT/GPL':
        return 'open'
    if value == 'NVIDIA':
        return 'proprietary'
    return None


# ---------------------------------------------------------------------------
# Kernel log: dmesg, journalctl -k, syslog
# ---------------------------------------------------------------------------

_LOG_PREFIXES = (
    # dmesg: "[   12.014918] " or dmesg -T: "[Mon Jun 30 11:07:05 2023] "
    re.compile(r'^\[\s*\d+\.\d+\]\s?'),
    re.compile(r'^\[[A-Z][a-z]{2} [A-Z][a-z]{2}\s+\d+ \d\d:\d\d:\d\d \d{4}\]\s?'),
    # syslog / journalctl short: "Jun 30 11:07:05 gpu-0 kernel: "
    re.compile(r'^[A-Z][a-z]{2}\s+\d+\s+\d\d:\d\d:\d\d\s+\S+\s+kernel:\s?(?:\[\s*\d+\.\d+\]\s?)?'),
    # journalctl -o short-iso / rsyslog RFC 3339: "2023-06-30T11:07:05+0000 gpu-0 kernel: "
    re.compile(r'^\d{4}-\d\d-\d\dT\S+\s+\S+\s+kernel:\s?(?:\[\s*\d+\.\d+\]\s?)?'),
)

_API_MISMATCH_RE = re.compile(
    r'API mismatch:\s+the client'
    r'(?:\s+\'(?P<client_name>[^\']*)\'\s+\(pid\s+(?P<pid>\d+)\))?'
    r'(?:\s+NVRM:)?\s+has(?:\s+NVRM:)?\s+the(?:\s+NVRM:)?\s+version\s+(?P<client>' + _V + r'),'
    r'(?:\s+NVRM:)?\s+but(?:\s+NVRM:)?\s+' + _re_phrase('this kernel module has the version') + r'\s+(?P<module>' + _V + r')'
)
_LOAD_RE = re.compile(r'NVRM: loading\s+' + _BANNER_BODY)
_TAINT_NVIDIA_RE = re.compile(r"\bnvidia: module license 'NVIDIA' taints kernel")
_TAINT_OPEN_RE = re.compile(r"\bnvidia: module license 'Dual MIT/GPL'")
_UNLOAD_RES = (
    re.compile(r'\bnvidia-nvlink: Unregistered(?: the)? Nvlink Core'),
    re.compile(r'\bnvidia[-_]modeset: Unloading\b'),
    re.compile(r'\[nvidia-drm\][^\n]*Unloading driver'),
)
# format per https://github.com/void-linux/void-packages/issues/4473 and
# https://github.com/voidlinux/void-packages/issues/5745
_MODESET_MISMATCH_RE = re.compile(
    r'nvidia[-_]modeset: Version mismatch:\s+nvidia\.ko\((?P<nvidia>' + _V + r')\)\s+'
    r'nvidia[-_]modeset(?:\.ko)?\((?P<modeset>' + _V + r')\)'
)
# format per https://github.com/Nobara-Project/rpm-sources/issues/526
_GSP_MISMATCH_RE = re.compile(
    r'GSP firmware image version mismatch:\s+(?:NVRM:\s+)?got version (?P<got>' + _V + r'),\s+expected version (?P<expected>' + _V + r')'
)
_GSP_MISSING_RE = re.compile(r'Direct firmware load for nvidia/(?P<version>' + _V + r')/(?P<file>gsp_\w+\.bin) failed')


def normalize_kernel_log(text):
    """Undo syslog's ``#012`` newline escapes and strip timestamps/host prefixes."""
    if not text:
        return ''
    text = text.replace('#012', '\n').replace('\r', '')
    lines = []
    for line in text.splitlines():
        for prefix in _LOG_PREFIXES:
            line = prefix.sub('', line, count=1)
        lines.append(line.strip())
    return '\n'.join(lines)


def parse_kernel_log(text):
    """Parse NVIDIA lines of dmesg, ``journalctl -k`` or syslog.

    Returns ``{'events': [...]}`` in log order.  Event kinds:

    - ``load``: ``NVRM: loading NVIDIA UNIX ... Kernel Module  X`` (version, flavor, arch)
    - ``unload``: the stack going away (nvidia-modeset/nvidia-drm unloading, Nvlink Core unregistered)
    - ``api_mismatch``: user space (client) and the kernel module disagree (client, module, client_name)
    - ``taint_nvidia`` / ``license_open``: module license lines
    - ``modeset_mismatch``: nvidia-modeset.ko built from another version than nvidia.ko (kernel side only)
    - ``gsp_mismatch`` / ``gsp_missing``: GSP firmware of another version, or missing (kernel side only)
    """
    flat = normalize_kernel_log(text)
    events = []
    for match in _LOAD_RE.finditer(flat):
        event = _banner_facts(match)
        event['kind'] = 'load'
        events.append((match.start(), event))
    for match in _API_MISMATCH_RE.finditer(flat):
        events.append((match.start(), {
            'kind': 'api_mismatch', 'client': match.group('client'), 'module': match.group('module'),
            'client_name': match.group('client_name'), 'pid': int(match.group('pid')) if match.group('pid') else None,
        }))
    for match in _TAINT_NVIDIA_RE.finditer(flat):
        events.append((match.start(), {'kind': 'taint_nvidia'}))
    for match in _TAINT_OPEN_RE.finditer(flat):
        events.append((match.start(), {'kind': 'license_open'}))
    for regex in _UNLOAD_RES:
        for match in regex.finditer(flat):
            events.append((match.start(), {'kind': 'unload', 'line': match.group(0)}))
    for match in _MODESET_MISMATCH_RE.finditer(flat):
        events.append((match.start(), {'kind': 'modeset_mismatch', 'nvidia_ko': match.group('nvidia'), 'modeset_ko': match.group('modeset')}))
    for match in _GSP_MISMATCH_RE.finditer(flat):
        events.append((match.start(), {'kind': 'gsp_mismatch', 'got': match.group('got'), 'expected': match.group('expected')}))
    for match in _GSP_MISSING_RE.finditer(flat):
        events.append((match.start(), {'kind': 'gsp_missing', 'version': match.group('version'), 'file': match.group('file')}))
    events.sort(key=lambda item: item[0])
    return {'events': [event for dummy, event in events]}


# ---------------------------------------------------------------------------
# nvidia-smi
# ---------------------------------------------------------------------------

# The table header ("NVIDIA-SMI 560.35.03   Driver Version: 560.35.03   CUDA Version: 12.6"), "nvidia-smi -q"
# ("Driver Version                            : 535.104.05") and "nvidia-smi --version"
# ("NVIDIA-SMI version  : 590.48.01" / "NVML version        : 590.48" / "DRIVER version      : 590.48.01").
_SMI_HEADER_RE = re.compile(r'NVIDIA-SMI(?:\s+version\s*:)?\s+(?P<smi>' + _V + r')')
_SMI_DRIVER_RE = re.compile(r'(?:Driver Version|DRIVER version|KMD version)\s*:\s*(?P<driver>' + _V + r')')
_SMI_CUDA_RE = re.compile(r'CUDA Version\s*:\s*(?P<cuda>\d+\.\d+)')
_NVML_MISMATCH_RE = re.compile(r'Failed to initialize NVML: Driver/library version mismatch', re.I)
_NVML_LIB_RE = re.compile(r'NVML library version:\s*(?P<nvml>' + _V + r')')
# format per https://github.com/Bruce-Lee-LY/cuda_hook/issues/15
_SMI_BINARY_MISMATCH_RE = re.compile(r'Mismatch in versions between nvidia-smi and NVML')
# format per https://github.com/NVIDIA/nvidia-docker/issues/988
_SMI_NO_DRIVER_RE = re.compile(r"NVIDIA-SMI has failed because it couldn.t communicate with the NVIDIA driver")
_NVML_OTHER_FAILURE_RE = re.compile(r'Failed to initialize NVML: (?P<error>.+)')
_QUERY_LINE_RE = re.compile(r'^\s*(?P<version>' + _V + r')\s*$')


def parse_nvidia_smi(text):
    """Parse ``nvidia-smi`` output (header table or an error) and ``--query-gpu`` answers.

    Returns a dict: ``smi_version`` (the NVIDIA-SMI field, user space),
    ``driver_version`` (the Driver Version field, the loaded module), ``cuda_version``,
    ``nvml_mismatch`` (Driver/library version mismatch), ``nvml_version`` (the
    ``NVML library version: X.Y`` line, major.minor as printed), ``query_versions``
    (one per GPU from ``--query-gpu=driver_version --format=csv,noheader``),
    ``smi_binary_mismatch`` (nvidia-smi binary vs libnvidia-ml, not kernel drift),
    ``no_driver`` and ``nvml_error`` (other NVML failures).
    """
    facts = {
        'smi_version': None, 'driver_version': None, 'cuda_version': None,
        'nvml_mismatch': False, 'nvml_version': None, 'query_versions': [],
        'smi_binary_mismatch': False, 'no_driver': False, 'nvml_error': None,
    }
    if not text:
        return facts
    match = _SMI_HEADER_RE.search(text)
    if match:
        facts['smi_version'] = match.group('smi')
    match = _SMI_DRIVER_RE.search(text)
    if match:
        facts['driver_version'] = match.group('driver')
    match = _SMI_CUDA_RE.search(text)
    if match:
        facts['cuda_version'] = match.group('cuda')
    if _NVML_MISMATCH_RE.search(text):
        facts['nvml_mismatch'] = True
    else:
        match = _NVML_OTHER_FAILURE_RE.search(text)
        if match:
            facts['nvml_error'] = match.group('error').strip()
    match = _NVML_LIB_RE.search(text)
    if match:
        facts['nvml_version'] = match.group('nvml')
    facts['smi_binary_mismatch'] = bool(_SMI_BINARY_MISMATCH_RE.search(text))
    facts['no_driver'] = bool(_SMI_NO_DRIVER_RE.search(text))
    for line in text.splitlines():
        match = _QUERY_LINE_RE.match(line)
        if match:
            facts['query_versions'].append(match.group('version'))
    return facts


# ---------------------------------------------------------------------------
# Library file names (ldconfig -p, ls -l of a library directory)
# ---------------------------------------------------------------------------

_LIB_RE = re.compile(r'(?<![\w.+-])(?P<name>lib[\w+-]+?\.so)\.(?P<version>\d+(?:\.\d+){1,2})(?![\w.])')
_NVIDIA_LIB_NAME_RE = re.compile(r'^lib(?:nvidia-[\w+-]+|cuda|cudadebugger|nvcuvid|nvoptix|GLX_nvidia|EGL_nvidia|GLESv1_CM_nvidia|GLESv2_nvidia)\.so$')


def parse_library_names(text):
    """Versioned NVIDIA driver library file names in any listing.

    Takes ``ls -l`` output, resolved ``ldconfig -p`` targets, or plain paths, and
    returns ``{'libnvidia-ml.so': ['550.90.07'], ...}`` for driver libraries whose
    file name carries a driver version (``libnvidia-ml.so.550.90.07``,
    ``libcuda.so.550.90.07``).  Libraries versioned on their own (libnvidia-egl-wayland
    1.1.x, libnvidia-container 1.x) and unrelated ones (libicudata.so.70.1) are left out.
    """
    found = {}
    for match in _LIB_RE.finditer(text or ''):
        name, version = match.group('name'), match.group('version')
        if not _NVIDIA_LIB_NAME_RE.match(name) or not DRIVER_VERSION_RE.match(version):
            continue
        versions = found.setdefault(name, [])
        if version not in versions:
            versions.append(version)
    return found


_LDCONFIG_RE = re.compile(r'^\s*(?P<soname>\S+)\s+\((?P<flags>[^)]*)\)(?:.*?)=>\s+(?P<path>\S+)\s*$')


def parse_ldconfig_p(text):
    """``ldconfig -p`` lines as ``[(soname, flags, path)]`` (NVIDIA driver libraries only)."""
    entries = []
    for line in (text or '').splitlines():
        match = _LDCONFIG_RE.match(line)
        if not match:
            continue
        soname = match.group('soname')
        base = soname.split('.so', 1)[0] + '.so'
        if _NVIDIA_LIB_NAME_RE.match(base):
            entries.append((soname, match.group('flags'), match.group('path')))
    return entries


# ---------------------------------------------------------------------------
# Host context: distribution family, container
# ---------------------------------------------------------------------------

def parse_os_release(text):
    """``/etc/os-release`` -> ``{'id', 'id_like', 'family'}`` (family debian|redhat|None)."""
    values = {}
    for line in (text or '').splitlines():
        key, sep, value = line.partition('=')
        if sep:
            values[key.strip()] = value.strip().strip('"\'')
    ids = [values.get('ID', '').lower()] + values.get('ID_LIKE', '').lower().split()
    family = None
    for ident in ids:
        if ident in ('debian', 'ubuntu'):
            family = 'debian'
            break
        if ident in ('rhel', 'fedora', 'centos', 'rocky', 'almalinux', 'ol', 'amzn'):
            family = 'redhat'
            break
    return {'id': values.get('ID'), 'id_like': values.get('ID_LIKE'), 'family': family}


def detect_container(files):
    """Decide from file contents whether this runs inside a container.

    ``files`` maps a path to its text, or ``True`` for a marker that exists, or
    ``None`` when absent: ``/run/systemd/container`` (systemd-nspawn, LXC, podman),
    ``/proc/1/environ`` (``container=``), ``/.dockerenv``, ``/run/.containerenv``
    (podman), ``/proc/1/cgroup`` (LXC/docker paths under cgroup v1).
    Returns ``(in_container, kind, evidence)``.
    """
    value = files.get('/run/systemd/container')
    if isinstance(value, str) and value.strip():
        return True, value.strip(), '/run/systemd/container'
    environ = files.get('/proc/1/environ')
    if isinstance(environ, str):
        for item in environ.split('\0'):
            if item.startswith('container=') and item[len('container='):]:
                return True, item[len('container='):], '/proc/1/environ'
    if files.get('/.dockerenv'):
        return True, 'docker', '/.dockerenv'
    if files.get('/run/.containerenv'):
        return True, 'podman', '/run/.containerenv'
    cgroup = files.get('/proc/1/cgroup')
    if isinstance(cgroup, str):
        for line in cgroup.splitlines():
            path = line.split(':', 2)[-1]
            if path.startswith('/lxc') or '/lxc.payload' in path:
                return True, 'lxc', '/proc/1/cgroup'
            if path.startswith('/docker/') or '/kubepods' in path:
                return True, 'docker', '/proc/1/cgroup'
    return False, None, None


def read_text(path, limit=1 << 20):
    """File contents as text, ``None`` when absent or unreadable."""
    try:
        with open(path, 'rb') as handle:
            return handle.read(limit).decode('utf-8', 'replace')
    except (IOError, OSError):
        return None


# ---------------------------------------------------------------------------
# GPUs on the PCI bus
# ---------------------------------------------------------------------------

NVIDIA_PCI_VENDOR = '10de'
# PCI device-ID ranges of NVIDIA GPUs by architecture, first match wins. Ranges follow the device IDs of the
# PCI ID repository (https://pci-ids.ucw.cz/read/PC/10de): GB10x/GB20x 29xx-2Fxx, AD10x 26xx-28xx, GH100 23xx,
# GA10x 20Bx/22xx-25xx, TU10x 1Exx-1Fxx/21xx, GV100 1DBx, GP10x 15xx-1Dxx.
GPU_ARCHITECTURE_RANGES = (
    ('blackwell', 0x2900, 0x2FFF),
    ('ada', 0x2600, 0x28FF),
    ('hopper', 0x2300, 0x23FF),
    ('ampere', 0x20B0, 0x25FF),
    ('turing', 0x1E00, 0x21FF),
    ('volta', 0x1DB0, 0x1DBF),
    ('pascal', 0x1580, 0x1DFF),
)
# "lspci -n -d 10de:": "01:00.0 0300: 10de:2684 (rev a1)"; display controllers are class 03xx (a GPU's HDMI
# audio function shares the vendor ID and is class 0403).
_LSPCI_RE = re.compile(r'^(?P<slot>\S+)\s+(?P<cls>[0-9a-f]{4}):\s+(?P<vendor>[0-9a-f]{4}):(?P<device>[0-9a-f]{4})', re.I | re.M)


def gpu_architecture(device_id):
    """The architecture of an NVIDIA GPU from its PCI device ID (``'2684'`` -> ``'ada'``), ``'unknown'`` outside the table."""
    try:
        number = int(device_id, 16)
    except (TypeError, ValueError):
        return 'unknown'
    for arch, first, last in GPU_ARCHITECTURE_RANGES:
        if first <= number <= last:
            return arch
    return 'unknown'


def _gpu(slot, device_id):
    device_id = device_id.lower()
    return {'slot': slot, 'pci_id': '%s:%s' % (NVIDIA_PCI_VENDOR, device_id), 'architecture': gpu_architecture(device_id)}


def parse_lspci(text):
    """NVIDIA display controllers in ``lspci -n`` output: ``[{'slot', 'pci_id', 'architecture'}]`` in bus order."""
    gpus = []
    for match in _LSPCI_RE.finditer(text or ''):
        if match.group('vendor').lower() == NVIDIA_PCI_VENDOR and match.group('cls').startswith('03'):
            gpus.append(_gpu(match.group('slot'), match.group('device')))
    return gpus


def read_sysfs_gpus(root='/sys/bus/pci/devices'):
    """NVIDIA display controllers from sysfs (``vendor`` 0x10de, ``class`` 0x03xxxx), when lspci is not installed."""
    gpus = []
    for path in sorted(glob.glob(os.path.join(root, '*'))):
        vendor, cls, device = (read_text(os.path.join(path, name)) for name in ('vendor', 'class', 'device'))
        if not (vendor and cls and device):
            continue
        if vendor.strip().lower() == '0x' + NVIDIA_PCI_VENDOR and cls.strip().lower().startswith('0x03'):
            gpus.append(_gpu(os.path.basename(path), device.strip()[2:]))
    return gpus


# ---------------------------------------------------------------------------
# Live host
# ---------------------------------------------------------------------------

CONTAINER_MARKERS = ('/run/systemd/container', '/proc/1/environ', '/.dockerenv', '/run/.containerenv', '/proc/1/cgroup')
_KERNEL_LOG_KEEP_RE = re.compile(r'NVRM|nvidia|#012')


class EvidenceReader:
    """Collects the raw evidence texts on the managed host, through ``host`` (a :class:`nvidia._host.HostCommands`).

    The mapping :meth:`gather` returns is what :func:`nvidia._verdict.evaluate` reads (and what the recorded
    corpus under tests/fixtures/nvidia holds): texts, never conclusions.
    """

    def __init__(self, host):
        self.host = host

    def gather(self, package_manager='auto', smi_table=False):
        """All evidence; ``smi_table`` also runs plain ``nvidia-smi`` (its header carries the CUDA version)."""
        evidence = self._files()
        run, which = self.host.run, self.host.bin
        modinfo = which('modinfo')
        if modinfo:
            rc, out, dummy = run([modinfo, 'nvidia'])
            if rc == 0:
                evidence['modinfo'] = out
        smi = which('nvidia-smi')
        if smi:
            rc, out, err = run([smi, '--query-gpu=driver_version', '--format=csv,noheader'])
            evidence['nvidia_smi_query'] = (out or '') + (err or '')
            if smi_table:
                rc, out, err = run([smi])
                evidence['nvidia_smi'] = (out or '') + (err or '')
        evidence['kernel_log'] = self._kernel_log()
        evidence['libraries'] = self._library_files()
        family = parse_os_release(evidence['os_release'])['family']
        evidence.update(read_package_database(self.host, package_manager, family))
        return evidence

    @staticmethod
    def _files():
        proc = read_text(PROC_VERSION_PATH)
        files = {}
        for path in CONTAINER_MARKERS:
            files[path] = os.path.exists(path) if path in ('/.dockerenv', '/run/.containerenv') else read_text(path)
        return {
            'proc_version': proc,
            'sys_module_version': read_text(SYS_MODULE_VERSION_PATH),
            'module_loaded': bool(proc) or os.path.isdir(SYS_MODULE_PATH),
            'os_release': read_text('/etc/os-release') or read_text('/usr/lib/os-release'),
            'container_files': files,
        }

    def _library_files(self):
        ldconfig = self.host.bin('ldconfig')
        if not ldconfig:
            return None
        rc, out, dummy = self.host.run([ldconfig, '-p'])
        if rc != 0:
            return None
        return '\n'.join(os.path.realpath(path) for dummy_soname, dummy_flags, path in parse_ldconfig_p(out))

    def _kernel_log(self):
        for argv in (['dmesg'], ['journalctl', '-k', '-b', '0', '--no-pager', '-q', '-o', 'short']):
            tool = self.host.bin(argv[0])
            if not tool:
                continue
            rc, out, dummy = self.host.run([tool] + argv[1:])
            if rc == 0 and out:
                return '\n'.join(line for line in out.splitlines() if _KERNEL_LOG_KEEP_RE.search(line) or line[:1].isspace())
        return None

    def gpus(self):
        """NVIDIA GPUs and their architecture: ``lspci -n -d 10de:`` (first on PATH), else sysfs."""
        lspci = self.host.bin('lspci', path_first=True)
        if lspci:
            rc, out, dummy = self.host.run([lspci, '-n', '-d', NVIDIA_PCI_VENDOR + ':'])
            if rc == 0:
                return parse_lspci(out), 'lspci'
        return read_sysfs_gpus(), '/sys/bus/pci/devices'


@dataclass
class DriverVersions:
    """The three driver versions a pre-flight check compares (``None`` when the host does not show one)."""

    kernel_module: str | None = None
    kernel_module_source: str | None = None
    userspace: str | None = None
    userspace_source: str | None = None
    cuda_driver: str | None = None
    notes: list = field(default_factory=list)

    def to_json(self):
        return asdict(self)


def driver_versions(evidence):
    """:class:`DriverVersions` from an evidence mapping (pure): the loaded module (``/proc``, ``/sys``), the
    user-space driver as NVML answers it (else the NVML library line, else libnvidia-ml's file name), and the
    CUDA driver version NVML reports (``nvidia-smi`` header)."""
    result = DriverVersions()
    proc = parse_proc_version(evidence.get('proc_version'))
    sys_version = parse_sys_module_version(evidence.get('sys_module_version'))
    if proc:
        result.kernel_module, result.kernel_module_source = proc['version'], PROC_VERSION_PATH
    elif sys_version:
        result.kernel_module, result.kernel_module_source = sys_version, SYS_MODULE_VERSION_PATH
    table = parse_nvidia_smi(evidence.get('nvidia_smi'))
    query = parse_nvidia_smi(evidence.get('nvidia_smi_query'))
    result.cuda_driver = table['cuda_version'] or query['cuda_version']
    answered = query['query_versions'] or table['query_versions']
    libraries = parse_library_names(evidence.get('libraries')).get('libnvidia-ml.so') or []
    if table['smi_version'] or table['driver_version']:
        # The table's NVIDIA-SMI field is the user-space build; Driver Version is the loaded module.
        result.userspace, result.userspace_source = table['smi_version'] or table['driver_version'], 'nvidia-smi'
    elif answered and not (query['nvml_mismatch'] or table['nvml_mismatch']):
        result.userspace, result.userspace_source = answered[0], 'NVML (nvidia-smi --query-gpu=driver_version)'
    elif query['nvml_version'] or table['nvml_version']:
        result.userspace, result.userspace_source = query['nvml_version'] or table['nvml_version'], 'NVML library version line'
    elif libraries:
        result.userspace, result.userspace_source = libraries[0], 'library libnvidia-ml.so'
    if len(libraries) > 1:
        result.notes.append('several libnvidia-ml.so versions: %s' % ', '.join(libraries))
    return result


def read_driver_versions(host):
    """Read the loaded kernel module, the user-space driver and NVML's CUDA driver version on the live host.

    ``host`` is a :class:`nvidia._host.HostCommands`; returns :class:`DriverVersions`.  Reuse this (pre-flight
    checks) instead of parsing ``nvidia-smi`` again.
    """
    reader = EvidenceReader(host)
    evidence = reader._files()
    smi = host.bin('nvidia-smi')
    if smi:
        rc, out, err = host.run([smi])
        evidence['nvidia_smi'] = (out or '') + (err or '')
        rc, out, err = host.run([smi, '--query-gpu=driver_version', '--format=csv,noheader'])
        evidence['nvidia_smi_query'] = (out or '') + (err or '')
    evidence['libraries'] = reader._library_files()
    return driver_versions(evidence)
