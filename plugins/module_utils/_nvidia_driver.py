# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Find and fix drift between the loaded NVIDIA kernel module and the user-space driver.

Private module_utils of llmops.sglang.nvidia_driver_match.

The first half is pure: every ``parse_*`` function takes the text a command or
file produced and returns structured facts, and :func:`evaluate` turns the
collected evidence into the result (kernel module version and flavor, the
user-space versions, match, mismatches, the exact package pins a fix would
install).  The second half gathers the evidence on a live host through
``module.run_command`` (argv lists, ``LC_ALL=C``, no shell) and plans and runs
the apt or dnf fix.
"""

from __future__ import annotations

import os
import re

# A driver version as NVIDIA prints it: 570.148.06, 570.144, 515.57, or an
# L4T release number such as 35.3.1 on Jetson.
_V = r'\d+(?:\.\d+)+'
_VERSION_RE = re.compile(r'^' + _V + r'$')
# Desktop/datacenter driver versions have a three-digit branch (R470, R535, ...).
_DRIVER_VERSION_RE = re.compile(r'^\d{3}\.\d+(?:\.\d+)?$')
# Jetson L4T release numbers (35.3.1, 36.4) only count for nvidia-l4t-* packages.
_L4T_VERSION_RE = re.compile(r'^\d{2}\.\d+(?:\.\d+)?$')

# First driver branch that had an open kernel module (R515).
OPEN_MODULE_FIRST_BRANCH = 515

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
    return value if _VERSION_RE.match(value) else None


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
    if facts['version'] is None and _VERSION_RE.match(text.strip()):
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
        if not _NVIDIA_LIB_NAME_RE.match(name) or not _DRIVER_VERSION_RE.match(version):
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
# Packages: dpkg and rpm
# ---------------------------------------------------------------------------

# The machine format this module asks dpkg-query for when it runs live.
DPKG_QUERY_FORMAT = '${db:Status-Abbrev}\\t${binary:Package}\\t${Version}\\t${Architecture}\\t${binary:Summary}\\n'
RPM_QUERY_FORMAT = '%{NAME}\\t%{EPOCHNUM}\\t%{VERSION}\\t%{RELEASE}\\t%{ARCH}\\t%{SUMMARY}\\n'

_DPKG_ROW_RE = re.compile(r'^(?P<status>[uihrp][ncHUFWti][ R]?)\s+(?P<name>\S+)\s+(?P<version>\S+)\s+(?P<arch>\S+)(?:\s+(?P<summary>.*?))?\s*$')
_DNF_LIST_RE = re.compile(r'^(?P<name>\S+)\.(?P<arch>x86_64|i686|i586|i386|noarch|aarch64|ppc64le|s390x|armv7hl)\s+'
                          r'(?:(?P<epoch>\d+):)?(?P<version>[^-\s]+)-(?P<release>\S+)(?:\s+(?P<repo>\S+))?\s*$')
_DNF_NAME_ONLY_RE = re.compile(r'^\S+\.(?:x86_64|i686|i586|i386|noarch|aarch64|ppc64le|s390x|armv7hl)\s*$')
_RPM_ARCHES = ('x86_64', 'i686', 'i586', 'i386', 'noarch', 'aarch64', 'ppc64le', 's390x', 'armv7hl', 'src')


def split_debian_version(version):
    """``1:525.85.12-1`` -> (epoch, upstream, revision)."""
    epoch = None
    if ':' in version:
        epoch, version = version.split(':', 1)
    if '-' in version:
        upstream, revision = version.rsplit('-', 1)
    else:
        upstream, revision = version, None
    return epoch, upstream, revision


def parse_dpkg(text):
    """Parse ``dpkg -l`` (column view) or the tab-separated ``dpkg-query -W`` format above.

    Returns ``[{'status', 'name', 'arch', 'version', 'upstream', 'revision', 'summary'}]``.
    A ``name:arch`` qualifier is split off into ``arch_qualifier``.
    """
    packages = []
    for line in (text or '').splitlines():
        if not line.strip():
            continue
        if '\t' in line:
            parts = line.split('\t')
            if len(parts) < 4:
                continue
            status, name, version, arch = (part.strip() for part in parts[:4])
            summary = parts[4].strip() if len(parts) > 4 else ''
            if not version:
                continue
        else:
            match = _DPKG_ROW_RE.match(line)
            if not match:
                continue
            status, name, version, arch = match.group('status', 'name', 'version', 'arch')
            summary = match.group('summary') or ''
        qualifier = None
        if ':' in name:
            name, qualifier = name.split(':', 1)
        epoch, upstream, revision = split_debian_version(version)
        packages.append({
            'status': status.strip(), 'name': name, 'arch_qualifier': qualifier, 'arch': arch,
            'version': version, 'epoch': epoch, 'upstream': upstream, 'revision': revision,
            'summary': summary, 'manager': 'dpkg',
        })
    return packages


def _join_wrapped_dnf_lines(text):
    """dnf wraps a long "name.arch" onto its own line and indents the version below it."""
    lines = []
    for line in (text or '').splitlines():
        if lines and line[:1].isspace() and _DNF_NAME_ONLY_RE.match(lines[-1]):
            lines[-1] = lines[-1].rstrip() + ' ' + line.strip()
        else:
            lines.append(line)
    return lines


def parse_rpm(text):
    """Parse ``rpm -qa`` NEVRA lines, the tab-separated ``rpm -qa --qf`` format above, or ``dnf list installed``.

    ``dnf list`` rows count only when their repository column starts with ``@`` (installed).
    """
    packages = []
    for line in _join_wrapped_dnf_lines(text):
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        if '\t' in line:
            parts = line.split('\t')
            if len(parts) < 5:
                continue
            name, epoch, version, release, arch = (part.strip() for part in parts[:5])
            summary = parts[5].strip() if len(parts) > 5 else ''
            epoch = None if epoch in ('', '0', '(none)') else epoch
        elif len(line.split()) >= 2 and _DNF_LIST_RE.match(line):
            # dnf/yum list installed: "nvidia-driver.x86_64   3:570.86.16-1.el8   @cuda-rhel8-x86_64"
            match = _DNF_LIST_RE.match(line)
            if match.group('repo') and not match.group('repo').startswith('@'):
                continue  # an available, not an installed, package
            name, arch, epoch = match.group('name'), match.group('arch'), match.group('epoch')
            version, release = match.group('version'), match.group('release')
            summary = ''
        elif len(line.split()) > 1:
            continue
        else:
            arch = None
            base = line
            head, dot, tail = line.rpartition('.')
            if dot and tail in _RPM_ARCHES:
                base, arch = head, tail
            pieces = base.rsplit('-', 2)
            if len(pieces) != 3:
                continue
            name, version, release = pieces
            epoch = None
            if ':' in version:
                epoch, version = version.split(':', 1)
            summary = ''
        packages.append({
            'status': 'ii', 'name': name, 'arch_qualifier': None, 'arch': arch,
            'version': '%s-%s' % (version, release), 'epoch': epoch, 'upstream': version, 'revision': release,
            'summary': summary, 'manager': 'rpm',
        })
    return packages


_PACMAN_RE = re.compile(r'^(?:[\w-]+/)?(?P<name>[\w.+@-]+)\s+(?:(?P<epoch>\d+):)?(?P<version>[^-\s]+)-(?P<release>[\w.]+)(?:\s.*)?$')


def parse_pacman(text):
    """Parse ``pacman -Q`` / ``pacman -Qs`` output (Arch-style hosts; read-only, the fix does not use pacman)."""
    packages = []
    for line in (text or '').splitlines():
        if not line.strip() or line[:1].isspace():
            continue
        match = _PACMAN_RE.match(line.strip())
        if not match:
            continue
        packages.append({
            'status': 'ii', 'name': match.group('name'), 'arch_qualifier': None, 'arch': None,
            'version': '%s-%s' % (match.group('version'), match.group('release')), 'epoch': match.group('epoch'),
            'upstream': match.group('version'), 'revision': match.group('release'), 'summary': '', 'manager': 'pacman',
        })
    return packages


# Kernel-side packages: the fix never installs, removes or counts them.
_KERNEL_SIDE_RE = re.compile(
    r'(?:(?<!^nvidia-driver-latest)-dkms$|^nvidia-dkms\b|^dkms-|^kmod-|^akmod|^nvidia-kmod|kernel|firmware|kmodsrc'
    r'|^linux-(?:modules|objects|signatures|image|headers)|^nvidia-l4t-(?:kernel|bootloader|initrd|display-kernel|dtb|oot))'
)
# Tools versioned on their own, container toolkit, CUDA toolkit, helpers.
_OWN_VERSION_RE = re.compile(
    r'(?:^nvidia-settings|^nvidia-xconfig|^nvidia-modprobe|^nvidia-persistenced|xnvctrl|^nvidia-container|^libnvidia-container'
    r'|^nvidia-docker|^glx-alternative|^nvidia-support$|^nvidia-installer-cleanup|^nvidia-legacy-check|^nvidia-detect$|^nvidia-prime|pinning'
    r'|^cuda-(?!drivers)|^nvidia-cuda-|^nvidia-opencl-dev|^cuda$|^libnvidia-egl-(?:wayland|gbm|xcb|xlib)|^nvidia-egl-wayland)',
    re.I,
)
_DRIVER_NAME_RE = re.compile(r'nvidia|cuda|nvcuvid|nvoptix', re.I)
_NAME_BRANCH_RE = re.compile(r'-(?P<branch>\d{3})(?:-server)?(?:-open)?(?:-server)?$')
_INSTALLED_STATUSES = ('ii', 'hi')
_PACMAN_MODULE_RE = re.compile(r'^nvidia(?:-open)?(?:-beta)?(?:-\d{3}xx)?(?:-lts|-zen|-hardened)?$')


def classify_package(pkg):
    """Why a package is (``'userspace'``) or is not part of the driver's user space.

    Returns one of ``userspace``, ``not-installed``, ``kernel-side``, ``own-version``,
    ``transitional``, ``unrelated``.
    """
    name = pkg['name']
    if pkg['status'][:2] not in _INSTALLED_STATUSES:
        return 'not-installed'
    if pkg.get('manager') == 'pacman' and _PACMAN_MODULE_RE.match(name):
        # Arch packages "nvidia", "nvidia-open", "nvidia-lts" are the kernel modules themselves.
        return 'kernel-side'
    if not _DRIVER_NAME_RE.search(name):
        return 'unrelated'
    if _KERNEL_SIDE_RE.search(name):
        return 'kernel-side'
    if _OWN_VERSION_RE.search(name):
        return 'own-version'
    summary = (pkg.get('summary') or '').lower()
    if 'transitional' in summary or 'dummy package' in summary:
        return 'transitional'
    upstream = pkg['upstream']
    if name.startswith('nvidia-l4t-'):
        return 'userspace' if _L4T_VERSION_RE.match(upstream) else 'own-version'
    if not _DRIVER_VERSION_RE.match(upstream):
        return 'own-version'
    branch = _NAME_BRANCH_RE.search(name)
    if branch and branch.group('branch') != upstream.split('.', 1)[0]:
        # nvidia-driver-545 at 550.x: a transitional package pointing at another branch.
        return 'transitional'
    return 'userspace'


# ---------------------------------------------------------------------------
# Host context
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


# ---------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------

def _major(version):
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


def _revision_is_fixed(revision, manager):
    """A packaging revision that does not carry a per-upload counter."""
    if revision is None:
        return False
    if manager == 'dpkg':
        return bool(re.match(r'^(?:0ubuntu)?1$', revision))
    return bool(re.match(r'^1(?:\.(?:el\d+(?:_\d+)*|fc\d+|amzn\d+))?$', revision))


def _pin(pkg, version_release, qualify_arch):
    name = pkg['name']
    if pkg['manager'] == 'dpkg':
        if qualify_arch and pkg.get('arch_qualifier'):
            name = '%s:%s' % (name, pkg['arch_qualifier'])
        return '%s=%s' % (name, version_release)
    pin = '%s-%s' % (name, version_release)
    if qualify_arch and pkg.get('arch'):
        pin = '%s.%s' % (pin, pkg['arch'])
    return pin


def _pick_available(pkg, module_version, available):
    """From the package manager's list of versions, the one whose upstream is the module's."""
    candidates = []
    for version in available or []:
        if pkg['manager'] == 'dpkg':
            dummy, upstream, revision = split_debian_version(version)
            full = version
        else:
            body = version.split(':', 1)[-1]
            upstream, dummy, revision = body.partition('-')
            full = body
        if upstream == module_version:
            candidates.append((revision == pkg['revision'], full))
    if not candidates:
        return None
    # Prefer the installed package's own revision scheme, then the first listed
    # (apt-cache madison and dnf list --showduplicates list the newest first).
    candidates.sort(key=lambda item: not item[0])
    return candidates[0][1]


def plan_fix_packages(packages, module_version, available=None):
    """Exact pins that bring every drifted user-space package to the module's version.

    Without ``available`` (the package manager's versions per package name), a
    pin is derived only when it is certain: same package name, the module's
    version and the same fixed revision (``-1``, ``-0ubuntu1``, ``-1.elN``).
    Revisions with a per-upload counter (``-0ubuntu0.24.04.1``, ``-4~deb12u1``)
    and packages whose name carries another branch are left out.  Returns
    ``(pins, skipped)`` where skipped lists ``{'name', 'reason'}``.
    """
    pins, skipped = [], []
    if not module_version:
        return pins, skipped
    drifted = [pkg for pkg in packages if not version_consistent(pkg['upstream'], module_version)]
    counts = {}
    for pkg in drifted:
        counts[pkg['name']] = counts.get(pkg['name'], 0) + 1
    seen = set()
    for pkg in drifted:
        qualify = counts[pkg['name']] > 1
        branch = _NAME_BRANCH_RE.search(pkg['name'])
        target = None
        if available is not None:
            target = _pick_available(pkg, module_version, available.get(pkg['name']))
            if target is None:
                skipped.append({'name': pkg['name'],
                                'reason': 'no version %s of %s is available from the configured repositories' % (module_version, pkg['name'])})
                continue
        else:
            if branch and branch.group('branch') != module_version.split('.', 1)[0]:
                skipped.append({'name': pkg['name'],
                                'reason': 'the package name carries branch %s, the module is %s' % (branch.group('branch'), module_version)})
                continue
            if not _revision_is_fixed(pkg['revision'], pkg['manager']):
                skipped.append({'name': pkg['name'],
                                'reason': 'revision %s carries a per-upload counter; the %s revision cannot be derived' % (pkg['revision'], module_version)})
                continue
            target = '%s-%s' % (module_version, pkg['revision'])
            if pkg.get('epoch') and pkg['manager'] == 'dpkg':
                target = '%s:%s' % (pkg['epoch'], target)
        pin = _pin(pkg, target, qualify)
        if pin not in seen:
            seen.add(pin)
            pins.append(pin)
    return pins, skipped


def _module_from_log(events):
    """Kernel-module facts from the kernel log (API mismatch first, then the last banner)."""
    last_load = None
    unloaded_after = False
    for event in events:
        if event['kind'] == 'load':
            last_load = event
            unloaded_after = False
        elif event['kind'] == 'unload' and last_load is not None:
            unloaded_after = True
    return last_load, unloaded_after


def evaluate(evidence):
    """Turn collected evidence into the facts this module reports.

    ``evidence`` keys (all optional): ``proc_version``, ``sys_module_version``,
    ``modinfo``, ``nvidia_smi``, ``nvidia_smi_query``, ``kernel_log``, ``dpkg``,
    ``rpm``, ``libraries`` (text with library file names), ``os_release``,
    ``container_files`` (see :func:`detect_container`), ``distro_family`` and
    ``in_container`` (context when the other evidence cannot show it),
    ``flavor_hint``, ``available`` ({package name: [versions]}).
    """
    notes = []
    findings = []

    proc = parse_proc_version(evidence.get('proc_version'))
    sys_version = parse_sys_module_version(evidence.get('sys_module_version'))
    modinfo = parse_modinfo(evidence.get('modinfo'))
    smi = parse_nvidia_smi(evidence.get('nvidia_smi'))
    query = parse_nvidia_smi(evidence.get('nvidia_smi_query'))
    for field in ('smi_version', 'driver_version', 'cuda_version'):
        # Whichever nvidia-smi output carried the table header or the --version lines.
        smi[field] = smi[field] or query[field]
    log_events = parse_kernel_log(evidence.get('kernel_log'))['events']
    libraries = parse_library_names(evidence.get('libraries'))
    dpkg = parse_dpkg(evidence.get('dpkg'))
    rpm = parse_rpm(evidence.get('rpm'))
    pacman = parse_pacman(evidence.get('pacman'))

    # -- kernel module version, in the README's order of preference --------
    module_version, module_source = None, None
    last_load, unloaded_after = _module_from_log(log_events)
    if proc:
        module_version, module_source = proc['version'], PROC_VERSION_PATH
        if sys_version and sys_version != proc['version']:
            notes.append('%s says %s but %s says %s' % (PROC_VERSION_PATH, proc['version'], SYS_MODULE_VERSION_PATH, sys_version))
    elif sys_version:
        module_version, module_source = sys_version, SYS_MODULE_VERSION_PATH
    elif smi['driver_version']:
        module_version, module_source = smi['driver_version'], 'nvidia-smi'
    elif query['query_versions'] or smi['query_versions']:
        versions = query['query_versions'] or smi['query_versions']
        module_version, module_source = versions[0], 'nvidia-smi --query-gpu=driver_version'
        if len(set(versions)) > 1:
            notes.append('nvidia-smi reported several driver versions: %s' % ', '.join(sorted(set(versions))))
    # An API mismatch logged before the last loading banner belongs to an earlier load of the module.
    last_load_index = max([index for index, event in enumerate(log_events) if event['kind'] == 'load'] or [-1])
    current_api = [event for index, event in enumerate(log_events) if event['kind'] == 'api_mismatch' and index > last_load_index]
    if module_version is None and current_api:
        module_version, module_source = current_api[-1]['module'], 'kernel log (NVRM API mismatch)'
    if module_version is None and last_load is not None and not unloaded_after:
        module_version, module_source = last_load['version'], 'kernel log (NVRM loading banner)'
    # modinfo reads the module FILE on disk: it is module_file_version, never the loaded module (a host that has
    # installed a driver but not rebooted has a file and no loaded module).
    if last_load is not None and unloaded_after:
        notes.append('the kernel log shows the NVIDIA stack unloaded after loading %s' % last_load['version'])

    # -- flavor --------------------------------------------------------------
    flavor, flavor_source = None, None
    if proc and proc['flavor']:
        flavor, flavor_source = proc['flavor'], PROC_VERSION_PATH
    if flavor is None:
        for event in reversed(log_events):
            if event['kind'] == 'load' and event['flavor'] and (module_version is None or event['version'] == module_version):
                flavor, flavor_source = event['flavor'], 'kernel log (NVRM loading banner)'
                break
    if flavor is None and any(event['kind'] == 'taint_nvidia' for event in log_events):
        flavor, flavor_source = 'proprietary', "kernel log (module license 'NVIDIA' taints kernel)"
    if flavor is None and any(event['kind'] == 'license_open' for event in log_events):
        flavor, flavor_source = 'open', "kernel log (module license 'Dual MIT/GPL')"
    # The file's license is the loaded module's flavor only when the file is the loaded version.
    if flavor is None and modinfo['license'] and module_version is not None and modinfo['version'] in (None, module_version):
        flavor = flavor_from_license(modinfo['license'])
        flavor_source = 'modinfo license' if flavor else None
    major = _major(module_version)
    if flavor is None and major is not None and 100 <= major < OPEN_MODULE_FIRST_BRANCH:
        flavor, flavor_source = 'proprietary', 'branch %d has no open kernel module (open modules start at R515)' % major
    hint = evidence.get('flavor_hint')
    if flavor is None and hint in ('open', 'proprietary'):
        flavor, flavor_source = hint, 'flavor option'
    elif flavor and hint in ('open', 'proprietary') and hint != flavor:
        notes.append('the flavor option says %s but the loaded module is %s' % (hint, flavor))

    # -- lookalikes: reported as what they are -----------------------------
    if smi['smi_binary_mismatch']:
        findings.append({'kind': 'nvidia-smi-vs-nvml', 'message': 'the nvidia-smi binary and libnvidia-ml disagree (an nvidia-smi from another driver, '
                         'or an interposed libnvidia-ml); this is not kernel/user-space drift'})
    if smi['no_driver'] or query['no_driver']:
        findings.append({'kind': 'no-driver',
                         'message': 'nvidia-smi could not talk to the NVIDIA kernel driver (module not loaded or no /dev/nvidia* in this namespace)'})
    for source in (smi, query):
        if source['nvml_error']:
            findings.append({'kind': 'nvml-error', 'message': 'NVML failed: %s' % source['nvml_error']})
    for event in log_events:
        if event['kind'] == 'modeset_mismatch':
            findings.append({'kind': 'modeset-vs-nvidia-ko', 'message': 'nvidia-modeset.ko %s does not match nvidia.ko %s: a kernel-side build problem '
                             '(rebuild/reinstall the kernel modules), not user-space drift' % (event['modeset_ko'], event['nvidia_ko'])})
        elif event['kind'] == 'gsp_mismatch':
            findings.append({'kind': 'gsp-firmware-mismatch', 'message': 'GSP firmware %s does not match the kernel module %s: a kernel-side '
                             'firmware package problem, not user-space drift' % (event['got'], event['expected'])})
        elif event['kind'] == 'gsp_missing':
            findings.append({'kind': 'gsp-firmware-missing', 'message': 'GSP firmware nvidia/%s/%s is missing: install the firmware package '
                             'matching the kernel module' % (event['version'], event['file'])})

    # -- user space ----------------------------------------------------------
    userspace = []  # (version, component, from_nvml)
    packages = []
    excluded = []
    module_major = _major(module_version)
    for pkg in dpkg + rpm + pacman:
        kind = classify_package(pkg)
        if kind == 'userspace' and pkg['name'].startswith('nvidia-l4t-') and module_major is not None and module_major >= 100:
            # Jetson from L4T R36 on: the module reports a driver version (540.4.0), the L4T packages the
            # release (36.4.3): two numbering schemes that cannot be compared.
            kind = 'l4t-release'
        if kind == 'userspace':
            packages.append(pkg)
            userspace.append((pkg['upstream'], 'package %s' % pkg['name'], False))
        elif kind not in ('unrelated',):
            excluded.append({'name': pkg['name'], 'version': pkg['version'], 'reason': kind})
    library_versions = {}
    for name, versions in sorted(libraries.items()):
        library_versions[name] = versions[0] if len(versions) == 1 else ', '.join(versions)
        for version in versions:
            userspace.append((version, 'library %s' % name, False))
    if smi['smi_version']:
        userspace.append((smi['smi_version'], 'nvidia-smi', False))
    relevant_api = []
    load_positions = [index for index, event in enumerate(log_events) if event['kind'] == 'load']
    for index, event in enumerate(log_events):
        if event['kind'] != 'api_mismatch':
            continue
        if load_positions and index < load_positions[-1]:
            notes.append('ignored an NVRM API mismatch logged before the module was loaded again (%s)' % log_events[load_positions[-1]]['version'])
            continue
        if module_version and event['module'] != module_version:
            notes.append('ignored an older NVRM API mismatch against module %s (loaded: %s)' % (event['module'], module_version))
            continue
        relevant_api.append(event)
        who = 'NVRM client %s' % ("'%s'" % event['client_name'] if event['client_name'] else '')
        userspace.append((event['client'], who.strip(), False))
    nvml_version = smi['nvml_version'] or query['nvml_version']
    if nvml_version:
        userspace.append((nvml_version, 'NVML library', True))
    nvml_answered = bool(smi['driver_version'] or query['query_versions'] or smi['query_versions'])
    if nvml_answered and not (smi['nvml_mismatch'] or query['nvml_mismatch']):
        answered = smi['driver_version'] or (query['query_versions'] or smi['query_versions'])[0]
        userspace.append((answered, 'NVML (answered)', False))

    full_versions = set(version for version, dummy, nvml in userspace if not nvml)
    listed = set(full_versions)
    for version, dummy, nvml in userspace:
        if nvml and not any(version_consistent(version, full, nvml=True) for full in full_versions):
            listed.add(version)
    userspace_versions = sorted(listed, key=_version_key)

    # -- match -------------------------------------------------------------
    mismatches = []
    reported = set()
    if module_version:
        for version, component, nvml in userspace:
            if not version_consistent(version, module_version, nvml=nvml) and (component, version) not in reported:
                reported.add((component, version))
                mismatches.append({'component': component, 'version': version, 'expected': module_version})
    nvml_mismatch = smi['nvml_mismatch'] or query['nvml_mismatch']
    distinct = _distinct_userspace(userspace)
    if nvml_mismatch and not any(item['component'].startswith('NVML') for item in mismatches):
        mismatches.append({'component': 'NVML library', 'version': nvml_version, 'expected': module_version,
                           'message': 'Failed to initialize NVML: Driver/library version mismatch'})
    if len(distinct) > 1 and not module_version:
        for version in sorted(distinct, key=_version_key):
            mismatches.append({'component': 'user space', 'version': version, 'expected': None,
                               'message': 'user-space parts disagree: %s' % ', '.join(sorted(distinct, key=_version_key))})
    if mismatches or relevant_api or nvml_mismatch or len(distinct) > 1:
        match = False
    elif nvml_answered:
        match = True
    elif module_version and userspace:
        match = True
    else:
        match = None

    # -- context -------------------------------------------------------------
    distro_family = parse_os_release(evidence.get('os_release'))['family'] if evidence.get('os_release') else None
    if distro_family is None:
        distro_family = evidence.get('distro_family')
    if distro_family is None and dpkg:
        distro_family = 'debian'
    if distro_family is None and rpm:
        distro_family = 'redhat'
    in_container, container_kind = evidence.get('in_container'), None
    if evidence.get('container_files') is not None:
        in_container, container_kind, dummy = detect_container(evidence['container_files'])

    # -- fix ---------------------------------------------------------------
    fix_packages, fix_skipped = [], []
    fixable = [pkg for pkg in packages if pkg['manager'] in ('dpkg', 'rpm')]
    if module_version and fixable and match is not True:
        fix_packages, fix_skipped = plan_fix_packages(fixable, module_version, evidence.get('available'))

    return {
        'kernel_module_version': module_version,
        'kernel_module_flavor': flavor,
        'kernel_module_source': module_source,
        'kernel_module_flavor_source': flavor_source,
        'module_file_version': modinfo['version'],
        'userspace_versions': userspace_versions,
        'nvml_version': nvml_version,
        'libraries': library_versions,
        'packages': [{'name': pkg['name'] + (':' + pkg['arch_qualifier'] if pkg.get('arch_qualifier') else ''),
                      'version': pkg['version'], 'arch': pkg['arch']} for pkg in packages],
        'excluded_packages': excluded,
        'match': match,
        'mismatches': mismatches,
        'findings': findings,
        'distro_family': distro_family,
        'in_container': in_container,
        'container_kind': container_kind,
        'fix_packages': fix_packages,
        'fix_skipped': fix_skipped,
        'package_manager': 'apt' if dpkg else ('dnf' if rpm else None),
        'notes': notes,
    }


def _distinct_userspace(userspace):
    """Distinct user-space versions, with an NVML major.minor folded into a full version it prefixes."""
    fulls = set(version for version, dummy, nvml in userspace if not nvml)
    distinct = set(fulls)
    for version, dummy, nvml in userspace:
        if nvml and not any(version_consistent(version, full, nvml=True) for full in fulls):
            distinct.add(version)
    return distinct


def _version_key(version):
    return [int(part) if part.isdigit() else part for part in re.split(r'[.]', version)]


# ---------------------------------------------------------------------------
# Live host: gathering, fix planning and the fix itself
# ---------------------------------------------------------------------------

C_ENV = {'LC_ALL': 'C', 'LANGUAGE': 'C', 'LANG': 'C'}
CONTAINER_MARKERS = ('/run/systemd/container', '/proc/1/environ', '/.dockerenv', '/run/.containerenv', '/proc/1/cgroup')
APT_ENV = dict(C_ENV, DEBIAN_FRONTEND='noninteractive', NEEDRESTART_MODE='l')
APT_INSTALL_OPTIONS = ['-y', '--no-install-recommends', '--allow-downgrades', '--allow-change-held-packages',
                       '-o', 'Dpkg::Options::=--force-confdef', '-o', 'Dpkg::Options::=--force-confold']
# dnf/yum install options the fix uses: no weak dependencies (the driver's Recommends pull in X.org and more).
DNF_INSTALL_OPTIONS = ['--setopt=install_weak_deps=False']
MODULE_RELOAD_HINT = 'modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia'


class FixError(Exception):
    """The fix could not be planned or applied; ``context`` says what was seen."""

    def __init__(self, msg, **context):
        super(FixError, self).__init__(msg)
        self.context = context


def read_text(path, limit=1 << 20):
    """File contents as text, ``None`` when absent or unreadable."""
    try:
        with open(path, 'rb') as handle:
            return handle.read(limit).decode('utf-8', 'replace')
    except (IOError, OSError):
        return None


_APT_SIM_RE = re.compile(r'^(?P<op>Inst|Remv|Conf)\s+(?P<name>\S+)(?:\s+\[(?P<old>[^\]]+)\])?(?:\s+\((?P<new>\S+))?')


def parse_apt_simulation(text):
    """``apt-get -s install`` output -> ``{'install': [(name, old, new)], 'remove': [(name, old)]}``."""
    plan = {'install': [], 'remove': []}
    for line in (text or '').splitlines():
        match = _APT_SIM_RE.match(line.strip())
        if not match:
            continue
        name = match.group('name').split(':', 1)[0]
        if match.group('op') == 'Inst':
            plan['install'].append((name, match.group('old'), match.group('new')))
        elif match.group('op') == 'Remv':
            plan['remove'].append((name, match.group('old')))
    return plan


def parse_apt_madison(text):
    """``apt-cache madison NAME`` -> ``{name: [version, ...]}`` in the order apt lists them."""
    versions = {}
    for line in (text or '').splitlines():
        parts = [part.strip() for part in line.split('|')]
        if len(parts) >= 3 and parts[0] and parts[1]:
            bucket = versions.setdefault(parts[0], [])
            if parts[1] not in bucket:
                bucket.append(parts[1])
    return versions


def parse_dnf_list(text):
    """``dnf list --showduplicates NAME`` -> ``{name: ['epoch:version-release', ...]}``."""
    versions = {}
    for line in (text or '').splitlines():
        parts = line.split()
        if len(parts) < 2 or '.' not in parts[0] or parts[0].endswith(':'):
            continue
        name = parts[0].rsplit('.', 1)[0]
        if not re.match(r'^(?:\d+:)?\d', parts[1]):
            continue
        bucket = versions.setdefault(name, [])
        if parts[1] not in bucket:
            bucket.append(parts[1])
    return versions


_DNF_SECTIONS = {
    'Installing': 'install', 'Upgrading': 'install', 'Reinstalling': 'install', 'Downgrading': 'install',
    'Installing dependencies': 'install', 'Installing weak dependencies': 'install',
    'Installing group/module packages': 'install', 'Installing group packages': 'install',
    'Removing': 'remove', 'Removing dependent packages': 'remove', 'Removing unused dependencies': 'remove',
}
_DNF_ROW_RE = re.compile(r'^\s+(?P<name>\S+)\s+(?P<arch>\S+)\s+(?P<evr>(?:\d+:)?[^-\s]+-\S+)\s+(?P<repo>\S+)\s+[\d.]+\s*[kMGT]?\s*$')
_DNF_REPLACING_RE = re.compile(r'^\s+replacing\s+(?P<name>\S+?)\.(?P<arch>[^.\s]+)\s+(?P<evr>\S+)\s*$')


def parse_dnf_transaction(text):
    """The transaction table dnf 4 prints before it asks (``dnf --assumeno install ...``).

    Returns ``{'install': [(name, evr, section)], 'remove': [(name, evr)], 'resolved': bool}``: every
    package dnf would install, upgrade, downgrade or reinstall (with the table's section title), every
    package it would remove, including packages an obsoleting package replaces (``replacing`` lines).
    ``resolved`` is false when no transaction table was printed (dnf failed to resolve, or nothing to do).
    Long package names wrap: dnf prints the name alone and the rest of the row on the next line.
    """
    plan = {'install': [], 'remove': [], 'resolved': False}
    title, kind, pending = None, None, None
    for line in (text or '').splitlines():
        if not line.strip():
            continue
        if not line[:1].isspace():
            title = line.strip().rstrip(':')
            kind = _DNF_SECTIONS.get(title) if line.rstrip().endswith(':') else None
            if title.startswith('Dependencies resolved'):
                plan['resolved'] = True
            pending = None
            continue
        if kind is None:
            continue
        replacing = _DNF_REPLACING_RE.match(line)
        if replacing:
            plan['remove'].append((replacing.group('name'), replacing.group('evr')))
            continue
        if pending is not None:
            line = ' ' + pending + ' ' + line.strip()
            pending = None
        row = _DNF_ROW_RE.match(line)
        if row and kind == 'remove':
            plan['remove'].append((row.group('name'), row.group('evr')))
        elif row:
            plan['install'].append((row.group('name'), row.group('evr'), title))
        elif len(line.split()) == 1:
            pending = line.strip()
    return plan


def parse_versionlock_list(text):
    """``dnf versionlock list`` -> the lock entries (``name-[epoch:]version-release.arch`` patterns), excludes (``!``) left out."""
    locks = []
    for line in (text or '').splitlines():
        line = line.strip()
        if not line or line.startswith(('#', '!')) or ' ' in line or line.endswith(':'):
            continue
        if re.match(r'^\S+-(?:\d+:)?[^-\s]+-[^-\s]+$', line):
            locks.append(line)
    return locks


def versionlock_name(entry):
    """The package name of a versionlock entry (``nvidia-driver-NVML-3:535.261.03-1.el8.*`` -> ``nvidia-driver-NVML``)."""
    return entry.rsplit('-', 2)[0]


def pin_name(pin, manager):
    """The package name of a pin (``name=version`` for apt, ``name-version-release[.arch]`` for dnf)."""
    if manager == 'apt':
        return pin.split('=', 1)[0].split(':', 1)[0]
    # name-version-release[.arch]: drop .arch, then version and release
    body = pin
    head, dot, tail = body.rpartition('.')
    if dot and tail in _RPM_ARCHES:
        body = head
    return body.rsplit('-', 2)[0]


def pin_version(pin, manager):
    """The ``version`` (apt) or ``version-release`` (dnf) of a pin."""
    if manager == 'apt':
        return pin.split('=', 1)[1]
    body = pin
    head, dot, tail = body.rpartition('.')
    if dot and tail in _RPM_ARCHES:
        body = head
    parts = body.rsplit('-', 2)
    return '%s-%s' % (parts[1], parts[2])


_pin_name = pin_name
_pin_version = pin_version


def _checked_plan(tool, manager, plan, pins, replaced, argv, out, new_version):
    """The dry-run plan (``{'install': [(name, ...)], 'remove': [(name, ...)]}``) of installing ``pins`` as the fix
    uses it, with ``extra``: the packages it would also install, as ``(name, new_version(entry))``.

    Raises FixError, naming them, when the plan removes packages the fix does not replace or installs kernel-side
    packages.
    """
    removals = [entry[0] for entry in plan['remove'] if entry[0] not in replaced]
    if removals:
        raise FixError('%s would remove %s to install %s; the fix never removes packages it does not replace. Resolve the conflict by hand'
                       % (tool, ', '.join(removals), ' '.join(pins)), argv=argv, stdout=out)
    kernel = [entry[0] for entry in plan['install'] if _KERNEL_SIDE_RE.search(entry[0])]
    if kernel:
        raise FixError('%s would also install or upgrade kernel-side packages (%s) to install %s; the fix never touches the kernel module. '
                       'Install matching user space by hand' % (tool, ', '.join(kernel), ' '.join(pins)), argv=argv, stdout=out)
    wanted = set(_pin_name(pin, manager) for pin in pins)
    extra = [(entry[0], new_version(entry)) for entry in plan['install'] if entry[0] not in wanted]
    return {'argv': argv, 'install': plan['install'], 'remove': plan['remove'], 'extra': extra}


class NvidiaDriverHost:
    """Evidence gathering and the package fix on the managed host."""

    def __init__(self, module):
        self.module = module
        self.commands = []

    # -- running things ------------------------------------------------------
    def run(self, argv, env=None):
        rc, out, err = self.module.run_command(argv, environ_update=env or C_ENV, check_rc=False)
        self.commands.append({'argv': list(argv), 'rc': rc})
        return rc, out, err

    def bin(self, name):
        return self.module.get_bin_path(name, opt_dirs=['/usr/sbin', '/sbin', '/usr/bin', '/bin'])

    # -- gathering -------------------------------------------------------------
    def gather(self, package_manager='auto'):
        evidence = {}
        evidence['proc_version'] = read_text(PROC_VERSION_PATH)
        evidence['sys_module_version'] = read_text(SYS_MODULE_VERSION_PATH)
        evidence['module_loaded'] = bool(evidence['proc_version']) or os.path.isdir(SYS_MODULE_PATH)
        evidence['os_release'] = read_text('/etc/os-release') or read_text('/usr/lib/os-release')
        files = {}
        for path in CONTAINER_MARKERS:
            if path in ('/.dockerenv', '/run/.containerenv'):
                files[path] = os.path.exists(path)
            else:
                files[path] = read_text(path)
        evidence['container_files'] = files

        modinfo = self.bin('modinfo')
        if modinfo:
            rc, out, dummy = self.run([modinfo, 'nvidia'])
            if rc == 0:
                evidence['modinfo'] = out

        smi = self.bin('nvidia-smi')
        if smi:
            rc, out, err = self.run([smi, '--query-gpu=driver_version', '--format=csv,noheader'])
            evidence['nvidia_smi_query'] = (out or '') + (err or '')

        evidence['kernel_log'] = self._kernel_log()

        ldconfig = self.bin('ldconfig')
        if ldconfig:
            rc, out, dummy = self.run([ldconfig, '-p'])
            if rc == 0:
                names = []
                for soname, dummy_flags, path in parse_ldconfig_p(out):
                    names.append(os.path.realpath(path))
                evidence['libraries'] = '\n'.join(names)

        family = parse_os_release(evidence['os_release'])['family']
        if package_manager in ('auto', 'apt') and (package_manager == 'apt' or family != 'redhat'):
            dpkg_query = self.bin('dpkg-query')
            if dpkg_query:
                rc, out, dummy = self.run([dpkg_query, '-W', '-f', DPKG_QUERY_FORMAT])
                if rc == 0:
                    evidence['dpkg'] = out
        if package_manager in ('auto', 'dnf') and (package_manager == 'dnf' or family != 'debian') and not evidence.get('dpkg'):
            rpm = self.bin('rpm')
            if rpm:
                rc, out, dummy = self.run([rpm, '-qa', '--qf', RPM_QUERY_FORMAT])
                if rc == 0:
                    evidence['rpm'] = out
        if package_manager == 'auto' and not evidence.get('dpkg') and not evidence.get('rpm'):
            pacman = self.bin('pacman')
            if pacman:
                rc, out, dummy = self.run([pacman, '-Q'])
                if rc == 0:
                    evidence['pacman'] = out
        return evidence

    def _kernel_log(self):
        keep = re.compile(r'NVRM|nvidia|#012')
        dmesg = self.bin('dmesg')
        if dmesg:
            rc, out, dummy = self.run([dmesg])
            if rc == 0 and out:
                return '\n'.join(line for line in out.splitlines() if keep.search(line) or line[:1].isspace())
        journalctl = self.bin('journalctl')
        if journalctl:
            rc, out, dummy = self.run([journalctl, '-k', '-b', '0', '--no-pager', '-q', '-o', 'short'])
            if rc == 0 and out:
                return '\n'.join(line for line in out.splitlines() if keep.search(line) or line[:1].isspace())
        return None

    def available_versions(self, manager, names):
        """Versions the configured repositories offer, per package name."""
        if not names:
            return {}
        if manager == 'apt':
            tool = self.bin('apt-cache')
            if not tool:
                return None
            rc, out, dummy = self.run([tool, 'madison'] + sorted(set(names)))
            # Nothing listed at all (no apt-get update in a fresh container): unknown, not "none available".
            return parse_apt_madison(out) or None if rc == 0 else None
        tool = self.bin('dnf')
        if not tool:
            return None
        rc, out, dummy = self.run([tool, '-q', 'list', '--showduplicates'] + sorted(set(names)))
        return parse_dnf_list(out) or None

    # -- apt -------------------------------------------------------------------
    def apt_simulate(self, pins, replaced):
        """Dry-run the apt transaction and refuse anything beyond the planned pins."""
        apt_get = self.bin('apt-get')
        if not apt_get:
            raise FixError('apt-get was not found on the host; install matching user-space packages by hand: %s' % ' '.join(pins))
        argv = [apt_get, '-s', 'install'] + APT_INSTALL_OPTIONS + list(pins)
        rc, out, err = self.run(argv, env=APT_ENV)
        if rc != 0:
            raise FixError('apt-get could not plan the install of %s (rc=%d): %s; check that the repository that provides these '
                           'exact versions is configured and apt-get update has run' % (' '.join(pins), rc, (err or out).strip()[-2000:]),
                           argv=argv, rc=rc, stdout=out, stderr=err)
        # apt's plan lists (name, old version, new version)
        return _checked_plan('apt-get', 'apt', parse_apt_simulation(out), pins, replaced, argv, out, lambda entry: entry[2])

    def dpkg_versions(self, names):
        dpkg_query = self.bin('dpkg-query')
        rc, out, dummy = self.run([dpkg_query, '-W', '-f', DPKG_QUERY_FORMAT] + sorted(set(names)))
        found = {}
        for pkg in parse_dpkg(out):
            if pkg['status'][:2] in _INSTALLED_STATUSES:
                found[pkg['name']] = pkg['version']
        return found

    def apt_fix(self, pins, previous):
        """Install the pins in one apt transaction, verify, hold; restore on failure."""
        apt_get = self.bin('apt-get')
        argv = [apt_get, 'install'] + APT_INSTALL_OPTIONS + list(pins)
        rc, out, err = self.run(argv, env=APT_ENV)
        wanted = dict((_pin_name(pin, 'apt'), _pin_version(pin, 'apt')) for pin in pins)
        now = self.dpkg_versions(wanted)
        wrong = dict((name, now.get(name)) for name, version in wanted.items() if now.get(name) != version)
        if rc != 0 or wrong:
            restored = self._apt_restore(previous, now)
            raise FixError('apt-get install %s failed (rc=%d)%s: %s. %s'
                           % (' '.join(pins), rc, '; not at the pinned version: %s' % wrong if wrong else '', (err or out).strip()[-2000:],
                              'The previous packages are in place.' if restored['ok'] else 'Restoring the previous packages failed: %s' % restored),
                           argv=argv, rc=rc, stdout=out, stderr=err, restored=restored)
        mark = self.bin('apt-mark')
        hold_argv = [mark, 'hold'] + sorted(wanted)
        rc, out, err = self.run(hold_argv, env=APT_ENV)
        if rc != 0:
            raise FixError('installed %s but apt-mark hold failed (rc=%d): %s; hold the packages by hand' % (' '.join(pins), rc, err.strip()),
                           argv=hold_argv, rc=rc, stdout=out, stderr=err)
        return {'installed': pins, 'held': sorted(wanted), 'stdout_lines': out.splitlines()[-20:]}

    def _apt_restore(self, previous, now):
        """Put back the versions that were installed before a failed transaction."""
        changed = dict((name, version) for name, version in previous.items() if now.get(name) != version)
        if not changed:
            return {'ok': True, 'restored': []}
        pins = ['%s=%s' % (name, version) for name, version in sorted(changed.items())]
        rc, out, err = self.run([self.bin('apt-get'), 'install'] + APT_INSTALL_OPTIONS + pins, env=APT_ENV)
        after = self.dpkg_versions(changed)
        ok = rc == 0 and all(after.get(name) == version for name, version in changed.items())
        return {'ok': ok, 'restored': pins, 'rc': rc, 'stderr': (err or '')[-2000:]}

    # -- dnf -------------------------------------------------------------------
    def _dnf(self, pins):
        dnf = self.bin('dnf') or self.bin('yum')
        if not dnf:
            raise FixError('dnf was not found on the host; install matching user-space packages by hand: %s' % ' '.join(pins))
        return dnf

    def dnf_simulate(self, pins, replaced):
        """Resolve the dnf transaction without running it and refuse anything beyond the planned pins.

        Version locks are left out of the dry run (``--disableplugin=versionlock``): the fix lifts the locks of
        the packages it replaces before it installs.
        """
        dnf = self._dnf(pins)
        argv = [dnf, '--assumeno', '--disableplugin=versionlock'] + DNF_INSTALL_OPTIONS + ['install'] + list(pins)
        rc, out, err = self.run(argv)
        plan = parse_dnf_transaction(out)
        text = (out or '') + (err or '')
        if not plan['resolved'] and 'Nothing to do' not in text:
            raise FixError('dnf could not plan the install of %s (rc=%d): %s; check that the repository that provides these exact '
                           'versions is configured and enabled' % (' '.join(pins), rc, _tail(err or out)),
                           argv=argv, rc=rc, stdout=out, stderr=err)
        # dnf's plan lists (name, new epoch:version-release, section title)
        return _checked_plan('dnf', 'dnf', plan, pins, replaced, argv, out, lambda entry: entry[1])

    def rpm_versions(self, names):
        """Installed ``version-release`` per package name (rpm database)."""
        rpm = self.bin('rpm')
        dummy, out, dummy2 = self.run([rpm, '-q', '--qf', RPM_QUERY_FORMAT] + sorted(set(names)))
        found = {}
        for pkg in parse_rpm('\n'.join(line for line in (out or '').splitlines() if '\t' in line)):
            found[pkg['name']] = pkg['version']
        return found

    def dnf_locks(self, dnf, names):
        """The versionlock entries on NAMES, or None when the versionlock plugin is not there."""
        rc, out, dummy = self.run([dnf, '-q', 'versionlock', 'list'])
        if rc != 0:
            return None
        wanted = set(names)
        return [entry for entry in parse_versionlock_list(out) if versionlock_name(entry) in wanted]

    def dnf_fix(self, pins, previous):
        """Lift the locks on the replaced packages, install the pins in one transaction, verify, lock.

        On failure the versions installed before and the lock entries that were lifted are put back.
        """
        dnf = self._dnf(pins)
        wanted = dict((_pin_name(pin, 'dnf'), _pin_version(pin, 'dnf')) for pin in pins)
        names = sorted(wanted)
        locks = self.dnf_locks(dnf, names)
        if locks is None:
            raise FixError('the dnf versionlock plugin is not available (dnf versionlock list failed), so the fix could not hold %s; install '
                           'python3-dnf-plugin-versionlock (yum-plugin-versionlock on EL7) and run again' % ' '.join(pins))
        if locks:
            delete_argv = [dnf, '-q', 'versionlock', 'delete'] + sorted(set(locks))
            rc, out, err = self.run(delete_argv)
            if rc != 0:
                raise FixError('dnf versionlock delete failed (rc=%d): %s; nothing was installed' % (rc, _tail(err or out)),
                               argv=delete_argv, rc=rc, stdout=out, stderr=err)
        argv = [dnf, '-y'] + DNF_INSTALL_OPTIONS + ['install'] + list(pins)
        rc, out, err = self.run(argv)
        now = self.rpm_versions(names)
        wrong = dict((name, now.get(name)) for name, version in wanted.items() if now.get(name) != version)
        if rc != 0 or wrong:
            restored = self._dnf_restore(dnf, previous, now, locks)
            raise FixError('dnf install %s failed (rc=%d)%s: %s. %s'
                           % (' '.join(pins), rc, '; not at the pinned version: %s' % wrong if wrong else '', _tail(err or out),
                              'The previous packages and version locks are in place.' if restored['ok']
                              else 'Restoring the previous packages and locks failed: %s' % restored),
                           argv=argv, rc=rc, stdout=out, stderr=err, restored=restored)
        lock_argv = [dnf, '-q', 'versionlock', 'add'] + list(pins)
        rc, out, err = self.run(lock_argv)
        if rc != 0:
            raise FixError('installed %s but dnf versionlock add failed (rc=%d): %s; lock the packages by hand'
                           % (' '.join(pins), rc, _tail(err or out)), argv=lock_argv, rc=rc, stdout=out, stderr=err)
        return {'installed': pins, 'held': names, 'unlocked': locks, 'stdout_lines': (out or '').splitlines()[-20:]}

    def _dnf_restore(self, dnf, previous, now, locks):
        """Put back the versions and lock entries that were there before a failed transaction."""
        changed = dict((name, version) for name, version in previous.items() if now.get(name) != version)
        result = {'ok': True, 'restored': [], 'locks': list(locks)}
        if changed:
            pins = ['%s-%s' % (name, version) for name, version in sorted(changed.items())]
            rc, dummy, err = self.run([dnf, '-y'] + DNF_INSTALL_OPTIONS + ['install'] + pins)
            after = self.rpm_versions(changed)
            result.update(restored=pins, rc=rc, stderr=_tail(err))
            result['ok'] = rc == 0 and all(after.get(name) == version for name, version in changed.items())
        if locks:
            rc, dummy, err = self.run([dnf, '-q', 'versionlock', 'add'] + list(locks))
            back = self.dnf_locks(dnf, [versionlock_name(entry) for entry in locks]) or []
            missing = [entry for entry in locks if entry not in back]
            if rc != 0 or missing:
                result.update(ok=False, locks_missing=missing, lock_rc=rc, lock_stderr=_tail(err))
        return result


def _tail(text, limit=2000):
    return (text or '').strip()[-limit:]


def recommend(facts, module_loaded):
    """What the right fix is: ``none``, ``install_userspace``, ``reboot`` or ``load_module``."""
    if facts['match'] is not False:
        return 'none' if module_loaded or facts['kernel_module_version'] else 'load_module'
    if facts['in_container']:
        return 'install_userspace'
    module_file = facts.get('module_file_version')
    if module_file and module_file == facts['kernel_module_version']:
        # The module on disk is the loaded one: user space moved on its own.
        return 'install_userspace'
    return 'reboot'


def describe(facts, action):
    """One message: what differs and what the fix is."""
    module = facts['kernel_module_version']
    parts = []
    if facts['match'] is False:
        differing = ['%s %s' % (item['component'], item['version']) for item in facts['mismatches'] if item.get('version')]
        parts.append('NVIDIA driver drift: kernel module %s (from %s) but user space has %s'
                     % (module or 'unknown', facts['kernel_module_source'] or 'no source', ', '.join(differing) or ', '.join(facts['userspace_versions'])))
        if action == 'install_userspace':
            if facts['fix_packages']:
                parts.append('fix=true installs %s and holds them' % ' '.join(facts['fix_packages']))
            else:
                parts.append('install user-space packages of version %s (no exact pin could be derived: %s)'
                             % (module or 'matching the host module',
                                '; '.join(item['reason'] for item in facts.get('fix_skipped', [])) or 'no package listing'))
        elif action == 'reboot':
            parts.append('on this bare host the installed driver (%s) is newer than the loaded module; reboot, or reload the module when nothing '
                         'uses the GPU (%s)' % (', '.join(facts['userspace_versions']), MODULE_RELOAD_HINT))
    elif facts['match'] is None:
        if not facts['kernel_module_version']:
            parts.append('no NVIDIA kernel module is loaded (%s and %s are absent)' % (PROC_VERSION_PATH, SYS_MODULE_PATH))
        else:
            parts.append('kernel module %s is loaded but no user-space driver version was found (no packages, library files or nvidia-smi)' % module)
    else:
        parts.append('kernel module and user space agree on %s' % module)
    for finding in facts['findings']:
        parts.append(finding['message'])
    return '; '.join(parts)


def render_state(kernel, userspace, packages):
    lines = ['kernel module: %s' % (kernel or 'none'), 'user space: %s' % (', '.join(userspace) or 'none')]
    for pkg in packages:
        lines.append('package %s %s' % (pkg['name'], pkg['version']))
    return '\n'.join(lines) + '\n'
