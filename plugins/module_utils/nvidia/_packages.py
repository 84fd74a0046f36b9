# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Package databases and package-tool output for the NVIDIA driver: dpkg, rpm, pacman, apt and dnf listings,
dry-run transactions, dnf version locks, exact pins.

Private module_utils of llmops.sglang.nvidia_driver_match and nvidia_driver_info.  Parsers are pure; the
``read_*``/``*_versions`` functions query the live package database through a :class:`nvidia._host.HostCommands`.
"""

from __future__ import annotations

import re

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._versions import DRIVER_VERSION_RE, L4T_VERSION_RE, NAME_BRANCH_RE

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
KERNEL_SIDE_RE = re.compile(
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
INSTALLED_STATUSES = ('ii', 'hi')
_PACMAN_MODULE_RE = re.compile(r'^nvidia(?:-open)?(?:-beta)?(?:-\d{3}xx)?(?:-lts|-zen|-hardened)?$')


def classify_package(pkg):
    """Why a package is (``'userspace'``) or is not part of the driver's user space.

    Returns one of ``userspace``, ``not-installed``, ``kernel-side``, ``own-version``,
    ``transitional``, ``unrelated``.
    """
    name = pkg['name']
    if pkg['status'][:2] not in INSTALLED_STATUSES:
        return 'not-installed'
    if pkg.get('manager') == 'pacman' and _PACMAN_MODULE_RE.match(name):
        # Arch packages "nvidia", "nvidia-open", "nvidia-lts" are the kernel modules themselves.
        return 'kernel-side'
    if not _DRIVER_NAME_RE.search(name):
        return 'unrelated'
    if KERNEL_SIDE_RE.search(name):
        return 'kernel-side'
    if _OWN_VERSION_RE.search(name):
        return 'own-version'
    summary = (pkg.get('summary') or '').lower()
    if 'transitional' in summary or 'dummy package' in summary:
        return 'transitional'
    upstream = pkg['upstream']
    if name.startswith('nvidia-l4t-'):
        return 'userspace' if L4T_VERSION_RE.match(upstream) else 'own-version'
    if not DRIVER_VERSION_RE.match(upstream):
        return 'own-version'
    branch = NAME_BRANCH_RE.search(name)
    if branch and branch.group('branch') != upstream.split('.', 1)[0]:
        # nvidia-driver-545 at 550.x: a transitional package pointing at another branch.
        return 'transitional'
    return 'userspace'


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


def stale_locks(entries, installed):
    """Lock entries on packages of ``installed`` ({name: version-release}) at another version than the installed one.

    ``entries`` are :func:`parse_versionlock_list` patterns (``name-[epoch:]version-release.arch``).
    """
    stale = []
    for entry in entries:
        name, version, release = (entry.rsplit('-', 2) + ['', ''])[:3]
        if name not in installed or not release:
            continue
        locked = '%s-%s' % (version.split(':')[-1], re.sub(r'\.[^.]+$', '', release))
        if locked != installed[name]:
            stale.append(entry)
    return stale


# ---------------------------------------------------------------------------
# The live package database
# ---------------------------------------------------------------------------

def read_package_database(host, package_manager, family):
    """The installed packages as evidence texts: ``{'dpkg': ...}``, ``{'rpm': ...}`` or ``{'pacman': ...}``.

    ``package_manager`` auto picks by distribution ``family`` (debian, redhat or None); pacman is read only when
    neither dpkg nor rpm answered.
    """
    found = {}
    if package_manager == 'apt' or (package_manager == 'auto' and family != 'redhat'):
        tool = host.bin('dpkg-query')
        if tool:
            rc, out, dummy = host.run([tool, '-W', '-f', DPKG_QUERY_FORMAT])
            if rc == 0 and out:
                found['dpkg'] = out
    if not found and (package_manager == 'dnf' or (package_manager == 'auto' and family != 'debian')):
        tool = host.bin('rpm')
        if tool:
            rc, out, dummy = host.run([tool, '-qa', '--qf', RPM_QUERY_FORMAT])
            if rc == 0 and out:
                found['rpm'] = out
    if not found and package_manager == 'auto':
        tool = host.bin('pacman')
        if tool:
            rc, out, dummy = host.run([tool, '-Q'])
            if rc == 0 and out:
                found['pacman'] = out
    return found


def dpkg_versions(host, names):
    """Installed version per package name (dpkg database)."""
    rc, out, dummy = host.run([host.bin('dpkg-query'), '-W', '-f', DPKG_QUERY_FORMAT] + sorted(set(names)))
    return dict((pkg['name'], pkg['version']) for pkg in parse_dpkg(out) if pkg['status'][:2] in INSTALLED_STATUSES)


def rpm_versions(host, names):
    """Installed ``version-release`` per package name (rpm database)."""
    dummy, out, dummy2 = host.run([host.bin('rpm'), '-q', '--qf', RPM_QUERY_FORMAT] + sorted(set(names)))
    return dict((pkg['name'], pkg['version']) for pkg in parse_rpm('\n'.join(line for line in (out or '').splitlines() if '\t' in line)))


def read_versionlocks(host):
    """All ``dnf versionlock list`` entries, ``None`` when dnf or its versionlock plugin is not there."""
    dnf = host.bin('dnf') or host.bin('yum')
    if not dnf:
        return None
    rc, out, dummy = host.run([dnf, '-q', 'versionlock', 'list'])
    return parse_versionlock_list(out) if rc == 0 else None


# The requirements of NVIDIA's packages that are NVIDIA's own (kernel module packages, the kmod common files, libraries).
NVIDIA_RPM_NAME_RE = re.compile(r'^(?:nvidia|kmod-nvidia|dkms-nvidia|libnvidia|cuda-drivers)')


def rpm_requires_closure(host, roots, follow=NVIDIA_RPM_NAME_RE):
    """Installed packages reached from ``roots`` through ``rpm -q --requires``/``--whatprovides``, following only
    names ``follow`` matches: ``{name: version-release}`` (roots included when installed).

    One level of the walk is one ``rpm`` call per step (installed names, their requirements, the providers).
    """
    rpm = host.bin('rpm')
    if not rpm or not roots:
        return {}
    seen, todo = {}, sorted(set(roots))
    while todo:
        dummy, out, dummy2 = host.run([rpm, '-q', '--qf', '%{NAME}\\t%{VERSION}-%{RELEASE}\\n'] + todo)
        level = dict(line.split('\t', 1) for line in (out or '').splitlines() if line.count('\t') == 1)
        level = dict((name, version) for name, version in level.items() if name not in seen)
        if not level:
            break
        seen.update(level)
        dummy, out, dummy2 = host.run([rpm, '-q', '--requires'] + sorted(level))
        capabilities = sorted(set(line.split(' ', 1)[0] for line in (out or '').splitlines() if follow.match(line.strip())))
        if not capabilities:
            break
        dummy, out, dummy2 = host.run([rpm, '-q', '--whatprovides', '--qf', '%{NAME}\\n'] + capabilities)
        todo = sorted(set(line.strip() for line in (out or '').splitlines() if follow.match(line.strip()) and ' ' not in line.strip()) - set(seen))
    return seen
