# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The plan of the nvidia_driver role: ``plan(inputs, host, info) -> NvidiaPlan``, a pure function on the controller.

From the role's inputs, the host's platform facts and what llmops.sglang.nvidia_driver_info read (the loaded kernel
module, the GPUs' architectures), it decides the driver version or branch, the package source, the kernel-module
flavor, the packages, the repository files and the refusals (before anything is installed). ``reboot_of`` decides
whether the kernel side changed after the install. The role's YAML only carries the plan's values to the modules.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import typed_fields

# Architectures (llmops.sglang.nvidia_driver_info names them from the GPUs' PCI device IDs) that decide the flavor.
PRE_TURING = ('kepler', 'maxwell', 'pascal', 'volta')
OPEN_REQUIRED = ('blackwell',)
PREFIX = 'nvidia_driver_'


@dataclass(frozen=True)
class NvidiaInputs:
    """The role's variables without the ``nvidia_driver_`` prefix; defaults are the role's (defaults/main.yml)."""

    manage: bool = True
    version: str = ''
    branch: str = '580'
    source: str = 'auto'
    ubuntu_server: bool = True
    flavor: str = 'auto'
    gpu_arch: str = ''
    userspace_only: bool = False
    kernel_headers: bool = True
    hold: bool = True
    reboot: bool = False
    reboot_timeout: int = 1800
    verify: bool = True
    repo_manage: bool = True
    cuda_repo_url: str = 'https://developer.download.nvidia.com/compute/cuda/repos'
    cuda_keyring_version: str = '1.1-1'
    extra_packages: Tuple[str, ...] = ()
    packages: Tuple[str, ...] = ()
    debian_mirror: str = 'http://deb.debian.org/debian'
    debian_security_mirror: str = 'http://deb.debian.org/debian-security'

    @classmethod
    def names(cls) -> List[str]:
        return [PREFIX + f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_vars(cls, values: Dict[str, Any]) -> 'NvidiaInputs':
        return cls(**typed_fields(cls, cls.names(), values))


@dataclass(frozen=True)
class HostFacts:
    """The platform facts the plan needs (gathered with ansible.builtin.setup's min subset, never set as facts)."""

    os_family: str = ''
    distribution: str = ''
    distribution_version: str = ''
    distribution_major_version: str = ''
    distribution_release: str = ''
    kernel: str = ''
    architecture: str = ''

    @classmethod
    def from_setup(cls, ansible_facts: Dict[str, Any]) -> 'HostFacts':
        return cls(**dict((f.name, str(ansible_facts.get(f.name) or '')) for f in dataclasses.fields(cls)))


@dataclass(frozen=True)
class NvidiaPlan:
    """What the role installs and how (see the module docstring)."""

    version: str
    branch: str
    archs: Tuple[str, ...]
    source: str
    flavor: str
    refusals: Tuple[str, ...]
    package_manager: str
    names: Tuple[str, ...] = ()
    kernel_side: bool = True
    expected_version: str = ''
    # Debian family
    keyring_url: str = ''
    keyring_deb: str = ''
    nonfree_sources: str = ''
    pin: str = ''
    headers: Tuple[str, ...] = ()
    headers_hint: str = ''                 # what a failed headers install means and what to try
    # Red Hat family
    repo_url: str = ''
    repo_dest: str = ''
    streams_wanted: Tuple[str, ...] = ()
    versionlock_package: str = ''
    extra: Dict[str, Any] = field(default_factory=dict)

    @property
    def install(self) -> bool:
        return not self.refusals

    def to_json(self) -> Dict[str, Any]:
        data = dataclasses.asdict(self)
        data['install'] = self.install
        return data


def _source(inputs: NvidiaInputs, host: HostFacts) -> str:
    if inputs.source != 'auto':
        return inputs.source
    if host.os_family == 'RedHat':
        return 'cuda'
    return 'ubuntu' if host.distribution == 'Ubuntu' else 'debian'


def _flavor(inputs: NvidiaInputs, archs: Tuple[str, ...], branch: str) -> str:
    """auto: open for Blackwell (open modules required), proprietary before Turing, else open from R560 on."""
    if inputs.flavor != 'auto':
        return inputs.flavor
    if set(archs) & set(OPEN_REQUIRED):
        return 'open'
    if set(archs) & set(PRE_TURING):
        return 'proprietary'
    return 'open' if branch.isdigit() and int(branch) >= 560 else 'proprietary'


def refusals_of(inputs: NvidiaInputs, host: HostFacts, info: Dict[str, Any], version: str, branch: str,
                archs: Tuple[str, ...], source: str, flavor: str) -> Tuple[str, ...]:
    problems: List[str] = []
    if host.os_family not in ('Debian', 'RedHat'):
        problems.append('llmops.sglang.nvidia_driver supports the Debian family (Debian, Ubuntu) and the Red Hat family (RHEL, '
                        'Rocky, Alma), not %s (%s). Install the driver another way and use llmops.sglang.nvidia_driver_match '
                        'to check it.' % (host.distribution or '?', host.os_family or '?'))
        return tuple(problems)
    loaded = ((info.get('kernel_module') or {}).get('version'))
    if inputs.userspace_only and not loaded:
        problems.append('nvidia_driver_userspace_only is true but no NVIDIA kernel module is visible (/proc/driver/nvidia/version '
                        'and /sys/module/nvidia are absent): the container\'s host must load the module and pass the GPU '
                        'through, or set nvidia_driver_userspace_only to false on a host that owns its kernel.')
        return tuple(problems)
    impossible = ((set(archs) & set(OPEN_REQUIRED) and flavor == 'proprietary')
                  or (set(archs) & set(PRE_TURING) and flavor == 'open')
                  or (host.os_family == 'RedHat' and source != 'cuda')
                  or (source == 'ubuntu' and host.distribution != 'Ubuntu')
                  or not (len(branch) == 3 and branch.isdigit()))
    if impossible:
        problems.append('Cannot install the NVIDIA driver as asked: GPUs %s with flavor %s (Blackwell needs the open kernel '
                        'modules, GPUs before Turing need the proprietary ones), source %s on %s, branch %s. Fix '
                        'nvidia_driver_flavor, nvidia_driver_source or nvidia_driver_version/nvidia_driver_branch.'
                        % (list(archs), flavor, source, host.distribution, branch))
    return tuple(problems)


def debian_names(inputs: NvidiaInputs, host: HostFacts, source: str, flavor: str, branch: str) -> Tuple[str, ...]:
    """The Debian-family packages of a source, branch and flavor (NVIDIA's CUDA repository dropped the branch from
    package names at R590)."""
    b, srv, opn = branch, '-server' if inputs.ubuntu_server else '', '-open' if flavor == 'open' else ''
    nobranch = b.isdigit() and int(b) >= 590
    suffix = '' if nobranch else '-' + b
    full_cuda = [('nvidia-open' if opn else 'cuda-drivers') + suffix]
    lists = {
        'ubuntu': {'full': ['nvidia-headless-%s%s%s' % (b, srv, opn), 'nvidia-utils-%s%s' % (b, srv)],
                   'userspace': ['libnvidia-compute-%s%s' % (b, srv), 'nvidia-utils-%s%s' % (b, srv)]},
        'cuda_ubuntu': {'full': full_cuda, 'userspace': ['libnvidia-compute' + suffix, 'nvidia-utils' + suffix]},
        'cuda_debian': {'full': full_cuda, 'userspace': ['libcuda1', 'libnvidia-ml1', 'nvidia-smi']},
        'debian': {'full': ['nvidia-open-kernel-dkms' if opn else 'nvidia-kernel-dkms', 'libcuda1', 'libnvidia-ml1', 'nvidia-smi'],
                   'userspace': ['libcuda1', 'libnvidia-ml1', 'nvidia-smi']},
    }
    key = source if source != 'cuda' else ('cuda_ubuntu' if host.distribution == 'Ubuntu' else 'cuda_debian')
    names = list(inputs.packages) or lists[key]['userspace' if inputs.userspace_only else 'full']
    return tuple(names) + tuple(inputs.extra_packages)


def redhat_names(inputs: NvidiaInputs, flavor: str, branch: str) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """The Red Hat-family packages, and the nvidia-driver module streams that carry the branch (NVIDIA's repository for
    RHEL 8 and 9 below R590; user space only: its packages are in both the -dkms and the -open stream)."""
    b = int(branch) if branch.isdigit() else 0
    stream = '%s-%s' % (branch, 'open' if flavor == 'open' else 'dkms')
    full = ['@nvidia-driver:' + stream] if b < 590 else ['nvidia-open' if flavor == 'open' else 'cuda-drivers']
    # NVML: nvidia-driver-NVML up to R555, libnvidia-ml from R560 on (NVIDIA/yum-packaging-nvidia-driver)
    userspace = ['nvidia-driver-cuda', 'nvidia-driver-cuda-libs', 'nvidia-driver-libs', 'nvidia-driver-NVML' if b < 560 else 'libnvidia-ml']
    names = list(inputs.packages) or (userspace if inputs.userspace_only else full)
    streams: List[str] = [] if b >= 590 else [stream] + (['%s-dkms' % branch, '%s-open' % branch] if inputs.userspace_only else [])
    return tuple(names) + tuple(inputs.extra_packages), tuple(dict.fromkeys(streams))


def _debian_files(inputs: NvidiaInputs, host: HostFacts, version: str, source: str) -> Dict[str, Any]:
    distro = host.distribution.lower() + (host.distribution_version.replace('.', '') if host.distribution == 'Ubuntu'
                                          else host.distribution_major_version)
    arch = 'sbsa' if host.architecture == 'aarch64' else 'x86_64'
    rel = host.distribution_release
    sources = ('# Managed by llmops.sglang.nvidia_driver\nTypes: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: contrib non-free '
               'non-free-firmware\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: %s\nSuites: '
               '%s-security\nComponents: contrib non-free non-free-firmware\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
               % (inputs.debian_mirror, rel, rel, inputs.debian_security_mirror, rel))
    # Exact versions: the driver's packages depend on each other with "=", so every NVIDIA package must have the pinned
    # version as its candidate; priority 1001 also allows the downgrade to it.
    pin = ('# Managed by llmops.sglang.nvidia_driver\nExplanation: keep the NVIDIA driver at %s\nPackage: /nvidia/ /cuda/ '
           '/nvcuvid/ /nvoptix/ /^libnv/ /^libxnvctrl/\nPin: version %s-*\nPin-Priority: 1001\n' % (version, version)) if version else ''
    keyring = 'cuda-keyring_%s_all.deb' % inputs.cuda_keyring_version
    return {'keyring_url': '%s/%s/%s/%s' % (inputs.cuda_repo_url, distro, arch, keyring) if source == 'cuda' else '',
            'keyring_deb': '/var/cache/' + keyring if source == 'cuda' else '',
            'nonfree_sources': sources if source == 'debian' else '', 'pin': pin}


def plan(inputs: NvidiaInputs, host: HostFacts, info: Dict[str, Any]) -> NvidiaPlan:
    """Version, branch, source, flavor, packages and repository files of this host."""
    loaded = (info.get('kernel_module') or {}).get('version') or ''
    version = (loaded if inputs.userspace_only else inputs.version) or ''
    branch = version.split('.')[0] if version else str(inputs.branch)
    archs = (inputs.gpu_arch.lower(),) if inputs.gpu_arch else tuple(info.get('gpu_architectures') or ())
    source = _source(inputs, host)
    flavor = _flavor(inputs, archs, branch)
    refusals = refusals_of(inputs, host, info, version, branch, archs, source, flavor)
    common = dict(version=version, branch=branch, archs=archs, source=source, flavor=flavor, refusals=refusals,
                  package_manager='apt' if host.os_family == 'Debian' else 'dnf', expected_version=version or branch,
                  # user space only refuses kernel-side packages, except on Ubuntu, whose nvidia-utils-<branch> requires
                  # nvidia-kernel-common-<branch> (udev rules and firmware files, no kernel module)
                  kernel_side=not inputs.userspace_only or source == 'ubuntu')
    if refusals:
        return NvidiaPlan(**common)
    headers_wanted = inputs.kernel_headers and not inputs.userspace_only
    if host.os_family == 'Debian':
        return NvidiaPlan(names=debian_names(inputs, host, source, flavor, branch),
                          headers=('linux-headers-%s' % host.kernel,) if headers_wanted else (),
                          headers_hint=('Cannot install linux-headers-%s, the headers DKMS needs to build the NVIDIA kernel module for '
                                        'the running kernel %s. A kernel without a headers package in the configured '
                                        'repositories (a custom or cloud kernel) cannot get a DKMS build this way: install its '
                                        'headers another way, or use prebuilt module packages, and set nvidia_driver_kernel_headers '
                                        'to false' % (host.kernel, host.kernel)),
                          **dict(common, **_debian_files(inputs, host, version, source)))
    names, streams = redhat_names(inputs, flavor, branch)
    major, arch = host.distribution_major_version, 'sbsa' if host.architecture == 'aarch64' else 'x86_64'
    return NvidiaPlan(names=names, streams_wanted=streams,
                      headers=('kernel-devel-%s' % host.kernel, 'kernel-headers-%s' % host.kernel) if headers_wanted else (),
                      headers_hint=('Cannot install kernel-devel-%s and kernel-headers-%s, which DKMS needs to build the NVIDIA '
                                    'kernel module for the running kernel %s. A kernel whose devel package is not in the configured '
                                    'repositories (a custom kernel, or an older kernel the mirror no longer carries) cannot get a '
                                    'DKMS build this way: install kernel-devel another way, or use prebuilt kmod packages '
                                    '(precompiled streams), and set nvidia_driver_kernel_headers to false'
                                    % (host.kernel, host.kernel, host.kernel)),
                      repo_url='%s/rhel%s/%s/cuda-rhel%s.repo' % (inputs.cuda_repo_url, major, arch, major),
                      repo_dest='/etc/yum.repos.d/cuda-rhel%s.repo' % major,
                      versionlock_package=('python3-dnf-plugin-versionlock' if major.isdigit() and int(major) >= 8
                                           else 'yum-plugin-versionlock') if inputs.hold else '',
                      **common)


def stream_actions(listing: str, wanted: Tuple[str, ...]) -> Tuple[str, bool, bool]:
    """From ``dnf -q module list nvidia-driver`` ("nvidia-driver  535-dkms [d][e]  default [d]  summary", one line per
    stream and repository): the stream to use (the first wanted one the repository has, '' for none), whether another
    enabled stream must be reset first (dnf refuses to switch an enabled stream in place), and whether to enable it."""
    listed = re.findall(r'(?m)^nvidia-driver\s+(\S+)\s?((?:\[[a-z]\])*)', listing or '')
    available = [name for name, _marks in listed]
    enabled = set(name for name, marks in listed if '[e]' in marks)
    want = next((s for s in wanted if s in available), '')
    return want, bool(want) and bool(enabled - {want}), bool(want) and want not in enabled


def no_reboot() -> Dict[str, Any]:
    """The reboot decision before the install step, or when it did not run (an earlier step failed): nothing changed on
    the kernel side, nothing to reboot. The role's reboot task reads it either way."""
    return {'kernel_changed': False, 'reboot': False, 'loaded': '', 'on_disk': '', 'msg': ''}


def reboot_of(inputs: NvidiaInputs, installed: Dict[str, Any], local: bool) -> Dict[str, Any]:
    """After the install: whether the kernel side changed (the module on disk is not the loaded one), whether the role
    reboots (only when nvidia_driver_reboot, never over a local connection), and the line that says a reboot is due."""
    km = installed.get('kernel_module') or {}
    loaded, on_disk = km.get('version') or '', km.get('file_version') or ''
    changed = bool(installed.get('fix_packages')) and not inputs.userspace_only and bool(on_disk) and loaded != on_disk
    reboot = changed and inputs.reboot and not local
    msg = ''
    if changed and not reboot:
        why = 'nvidia_driver_reboot is false' if not inputs.reboot else 'never over a local connection'
        msg = ('A reboot is pending: the NVIDIA kernel module on disk is %s, the loaded module is %s. The role does not reboot '
               '(%s); reboot the host (or set nvidia_driver_reboot to true) before the driver can be verified.'
               % (on_disk, loaded or 'none', why))
    return {'kernel_changed': changed, 'reboot': reboot, 'loaded': loaded, 'on_disk': on_disk, 'msg': msg}


def verify_problem(inputs: NvidiaInputs, verified: Dict[str, Any], pending: Optional[Dict[str, Any]], local: bool) -> str:
    """Why the driver could not be proved to match ('' when it matches)."""
    km = verified.get('kernel_module') or {}
    loaded = km.get('version') is not None
    if verified.get('match') is True and not verified.get('failed') and loaded and not (pending or {}).get('kernel_changed'):
        return ''
    text = 'The NVIDIA driver could not be proved to match: '
    if (pending or {}).get('kernel_changed'):
        why = 'nvidia_driver_reboot is false' if not inputs.reboot else 'the connection is local'
        text += ('a reboot is pending: the kernel module on disk is %s but the loaded module is %s, and the role did not reboot '
                 '(%s). Reboot the host, or set nvidia_driver_reboot to true.' % (pending['on_disk'], pending['loaded'] or 'none', why))
    elif not loaded:
        text += ('no NVIDIA kernel module is loaded (only the module file on disk, version %s, was found); load it (modprobe '
                 'nvidia) or reboot.' % (km.get('file_version') or '?'))
    else:
        text += '%s.' % (verified.get('msg') or verified.get('reason') or 'no result')
    return text + ' Set nvidia_driver_verify to false to install without this check.'
