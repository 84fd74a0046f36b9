#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: nvidia_driver_info
short_description: Read the NVIDIA driver facts of a host (loaded module, user space, GPUs, distribution, container)
version_added: 0.2.0
description:
  - Reports, without changing anything, what the NVIDIA driver stack of a host looks like, from the same evidence
    M(llmops.sglang.nvidia_driver_match) reads; it never fails on drift (M(llmops.sglang.nvidia_driver_match)
    fails on drift and fixes it).
  - "The loaded kernel module: its version and flavor (open or proprietary) from C(/proc/driver/nvidia/version),
    C(/sys/module/nvidia/version), the kernel log and C(modinfo nvidia), and the version of the module file on disk."
  - "User space per source: installed driver packages (C(dpkg-query), C(rpm -qa), C(pacman -Q)), the library files the
    loader cache points at, C(nvidia-smi) and NVML (including the CUDA driver version NVML reports)."
  - The NVIDIA GPUs on the PCI bus (C(lspci -n -d 10de:), first on C(PATH), or C(/sys/bus/pci/devices)) and their
    architecture from the PCI device ID.
  - The distribution family and whether the host is a container (LXC, Docker, podman, systemd-nspawn).
  - On Red Hat-family hosts, the dnf version locks and which of them are stale (on a driver package at another
    version than the installed one), and optionally the installed NVIDIA dependencies of given packages.
options:
  package_manager:
    description:
      - Which package database to read. V(auto) picks C(dpkg) on Debian-family hosts and C(rpm) on Red Hat-family
        hosts (C(pacman) when neither answers).
    type: str
    choices: [auto, apt, dnf]
    default: auto
  dependency_roots:
    description:
      - Installed packages whose NVIDIA requirements are followed recursively (C(rpm -q --requires),
        C(rpm -q --whatprovides); only names starting with C(nvidia), C(kmod-nvidia), C(dkms-nvidia), C(libnvidia) or
        C(cuda-drivers) are followed) and reported in RV(dependencies) with the roots themselves.
      - Red Hat-family hosts (rpm) only; ignored elsewhere.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
    details: Read-only; it reads the same in check mode.
  diff_mode:
    support: none
notes:
  - Run it with C(become=true) to read the kernel log.
  - C(lspci) comes from C(pciutils); without it the GPUs are read from sysfs.
seealso:
  - module: llmops.sglang.nvidia_driver_match
  - name: PCI ID repository, NVIDIA devices
    description: The device IDs the architecture table follows.
    link: https://pci-ids.ucw.cz/read/PC/10de
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Read the NVIDIA driver facts
  llmops.sglang.nvidia_driver_info:
  become: true
  register: nvidia

- name: Show the loaded module, user space and GPUs
  ansible.builtin.debug:
    msg: >-
      module {{ nvidia.kernel_module.version }} ({{ nvidia.kernel_module.flavor }}), user space {{ nvidia.userspace.versions }},
      CUDA {{ nvidia.driver_versions.cuda_driver }}, GPUs {{ nvidia.gpu_architectures }}

- name: Red Hat family, the kernel-side packages a lock must cover and the stale locks
  llmops.sglang.nvidia_driver_info:
    dependency_roots: [nvidia-driver]
  become: true
  register: nvidia_rpm
'''

RETURN = r'''
kernel_module:
  description: The loaded NVIDIA kernel module.
  returned: always
  type: dict
  contains:
    version:
      description: Version of the loaded module, V(null) when none is loaded.
      type: str
      sample: "590.48.01"
    loaded:
      description: Whether a module is loaded (C(/proc/driver/nvidia/version) or C(/sys/module/nvidia) exists).
      type: bool
      sample: true
    flavor:
      description: V(open) or V(proprietary), V(null) when the evidence does not show it.
      type: str
      sample: open
    flavor_source:
      description: Where the flavor was read.
      type: str
      sample: /proc/driver/nvidia/version
    source:
      description: Where the version was read.
      type: str
      sample: /proc/driver/nvidia/version
    file_version:
      description: Version of the module file on disk for the running kernel (C(modinfo nvidia)), not necessarily the loaded one.
      type: str
      sample: "590.48.01"
  sample: {"version": "590.48.01", "loaded": true, "flavor": "open", "flavor_source": "/proc/driver/nvidia/version",
           "source": "/proc/driver/nvidia/version", "file_version": "590.48.01"}
userspace:
  description: The user-space parts of the driver that were found.
  returned: always
  type: dict
  contains:
    versions:
      description: Sorted distinct upstream versions.
      type: list
      elements: str
      sample: ["590.48.01"]
    sources:
      description: Every user-space part with its version (C(nvml) is true for the major.minor C(NVML library version) line).
      type: list
      elements: dict
      sample: [{"component": "package libnvidia-compute-590", "version": "590.48.01", "nvml": false}]
    nvml_version:
      description: The C(NVML library version) line of a failed C(nvidia-smi), major.minor as printed.
      type: str
      sample: "590.48"
    libraries:
      description: Driver libraries the loader cache points at, by name, with the version in the file name.
      type: dict
      sample: {"libcuda.so": "590.48.01", "libnvidia-ml.so": "590.48.01"}
    packages:
      description: Installed user-space driver packages (kernel-side, transitional and separately versioned packages left out).
      type: list
      elements: dict
      sample: [{"name": "libnvidia-compute-590", "version": "590.48.01-0ubuntu1", "arch": "amd64"}]
    excluded_packages:
      description: Installed NVIDIA packages that are not user space of the driver, and why (C(kernel-side), C(own-version), ...).
      type: list
      elements: dict
      sample: [{"name": "nvidia-dkms-590-open", "version": "590.48.01-0ubuntu1", "reason": "kernel-side"}]
driver_versions:
  description: The three versions a pre-flight check compares.
  returned: always
  type: dict
  contains:
    kernel_module:
      description: The loaded module's version (C(/proc) or C(/sys)), V(null) when none is loaded.
      type: str
      sample: "590.48.01"
    kernel_module_source:
      description: Where it was read.
      type: str
      sample: /proc/driver/nvidia/version
    userspace:
      description: The user-space driver version as C(nvidia-smi)/NVML answers, else the NVML line, else C(libnvidia-ml.so)'s file name.
      type: str
      sample: "590.48.01"
    userspace_source:
      description: Where it was read.
      type: str
      sample: nvidia-smi
    cuda_driver:
      description: The CUDA driver API version NVML reports (the C(CUDA Version) of C(nvidia-smi)), V(null) without an answer.
      type: str
      sample: "13.1"
    notes:
      description: Observations (several NVML library versions).
      type: list
      elements: str
      sample: []
match:
  description: V(true) when every user-space version equals the loaded module's, V(false) on any difference, V(null) when unknown.
  returned: always
  type: bool
  sample: true
findings:
  description: Messages that look like drift but are something else (see M(llmops.sglang.nvidia_driver_match)).
  returned: always
  type: list
  elements: dict
  sample: []
gpus:
  description: NVIDIA display controllers on the PCI bus (class 03xx; a GPU's audio function is left out), in bus order.
  returned: always
  type: list
  elements: dict
  contains:
    slot:
      description: PCI address.
      type: str
      sample: "0000:01:00.0"
    pci_id:
      description: Vendor and device ID.
      type: str
      sample: "10de:2bb1"
    architecture:
      description: V(blackwell), V(ada), V(hopper), V(ampere), V(turing), V(volta), V(pascal) or V(unknown).
      type: str
      sample: blackwell
  sample: [{"slot": "01:00.0", "pci_id": "10de:2bb1", "architecture": "blackwell"}]
gpu_architectures:
  description: The distinct architectures of RV(gpus), in bus order.
  returned: always
  type: list
  elements: str
  sample: [blackwell]
gpu_source:
  description: Where the GPUs were read (V(lspci) or V(/sys/bus/pci/devices)).
  returned: always
  type: str
  sample: lspci
distro_family:
  description: V(debian), V(redhat) or V(null).
  returned: always
  type: str
  sample: debian
in_container:
  description: Whether the module runs inside a container (LXC, Docker, podman, systemd-nspawn).
  returned: always
  type: bool
  sample: false
container_kind:
  description: The container type that was detected.
  returned: always
  type: str
  sample: lxc
package_manager:
  description: The package database that listed the driver packages (V(apt), V(dnf)), V(null) when none did.
  returned: always
  type: str
  sample: apt
dependencies:
  description: The installed packages reached from O(dependency_roots), with C(version-release).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "kmod-nvidia-latest-dkms", "version": "535.261.03-1.el9"}]
versionlocks:
  description: dnf version locks (Red Hat family).
  returned: always
  type: dict
  contains:
    available:
      description: Whether C(dnf versionlock list) answered (V(null) on hosts without dnf).
      type: bool
      sample: true
    entries:
      description: Every lock entry (C(name-[epoch:]version-release.arch)).
      type: list
      elements: str
      sample: ["nvidia-driver-cuda-3:535.261.03-1.el9.*"]
    stale:
      description: Entries on a user-space package or a package of RV(dependencies) at another version than the installed one.
      type: list
      elements: str
      sample: []
notes:
  description: Other observations (sources disagreeing, ignored stale log lines).
  returned: always
  type: list
  elements: str
  sample: []
commands:
  description: The commands the module ran, with their return codes.
  returned: always
  type: list
  elements: dict
  sample: [{"argv": ["/usr/bin/dpkg-query", "-W", "-f", "..."], "rc": 0}]
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._evidence import EvidenceReader, driver_versions
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._host import HostCommands
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._packages import read_versionlocks, rpm_requires_closure, stale_locks
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._verdict import evaluate


def _rpm_facts(host, verdict, roots):
    """Dependencies of ``roots`` and the version locks (rpm hosts only)."""
    if verdict.package_manager != 'dnf' and verdict.distro_family != 'redhat':
        return [], {'available': None, 'entries': [], 'stale': []}
    closure = rpm_requires_closure(host, roots)
    dependencies = [{'name': name, 'version': version} for name, version in sorted(closure.items())]
    entries = read_versionlocks(host)
    installed = dict((pkg['name'], pkg['version']) for pkg in verdict.package_records)
    installed.update(closure)
    return dependencies, {'available': entries is not None, 'entries': entries or [], 'stale': stale_locks(entries or [], installed)}


def facts(host, package_manager='auto', dependency_roots=()):
    """Every fact this module returns (without ``changed``)."""
    reader = EvidenceReader(host)
    evidence = reader.gather(package_manager, smi_table=True)
    gpus, gpu_source = reader.gpus()
    verdict = evaluate(evidence)
    dependencies, versionlocks = _rpm_facts(host, verdict, list(dependency_roots))
    architectures = []
    for gpu in gpus:
        if gpu['architecture'] not in architectures:
            architectures.append(gpu['architecture'])
    return dict(
        kernel_module=dict(version=verdict.kernel_module_version, loaded=bool(evidence.get('module_loaded')), flavor=verdict.kernel_module_flavor,
                           flavor_source=verdict.kernel_module_flavor_source, source=verdict.kernel_module_source,
                           file_version=verdict.module_file_version),
        userspace=dict(versions=verdict.userspace_versions, sources=verdict.userspace_parts, nvml_version=verdict.nvml_version,
                       libraries=verdict.libraries, packages=verdict.packages, excluded_packages=verdict.excluded_packages),
        driver_versions=driver_versions(evidence).to_json(),
        match=verdict.match,
        findings=verdict.findings,
        gpus=gpus,
        gpu_architectures=architectures,
        gpu_source=gpu_source,
        distro_family=verdict.distro_family,
        in_container=bool(verdict.in_container),
        container_kind=verdict.container_kind,
        package_manager=verdict.package_manager,
        dependencies=dependencies,
        versionlocks=versionlocks,
        notes=verdict.notes,
        commands=host.commands,
    )


def main():
    module = AnsibleModule(
        argument_spec=dict(
            package_manager=dict(type='str', default='auto', choices=['auto', 'apt', 'dnf']),
            dependency_roots=dict(type='list', elements='str', default=[]),
        ),
        supports_check_mode=True,
    )
    module.exit_json(changed=False, **facts(HostCommands(module), module.params['package_manager'], module.params['dependency_roots']))


if __name__ == '__main__':
    main()
