#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: nvidia_driver_match
short_description: Find, and optionally fix, drift between the loaded NVIDIA kernel module and the user-space driver
version_added: 0.1.0
description:
  - "Compares the version of the B(loaded) NVIDIA kernel module with every user-space part of the driver
    (packages, versioned library files, NVML) and fails with a message that says what differs and what the fix is.
    Drift between the two makes C(nvidia-smi) print C(Failed to initialize NVML: Driver/library version mismatch)
    and can hang NCCL (an SGLang server sitting at C(Init torch distributed begin))."
  - The loaded module is read from C(/proc/driver/nvidia/version) and C(/sys/module/nvidia/version); the module file
    on disk from C(modinfo nvidia); user space from C(dpkg-query) or C(rpm -qa) (C(pacman -Q) on Arch-style hosts, read
    only), the library files the loader cache
    (C(ldconfig -p)) points at (C(libnvidia-ml.so.X), C(libcuda.so.X)), C(nvidia-smi --query-gpu=driver_version)
    (including the C(NVML library version) line of a failed run) and the C(NVRM API mismatch) lines of the kernel log.
  - Versions are compared exactly. The C(NVML library version) line prints only major.minor and is compared as a
    prefix; real two-part driver versions such as C(575.64) never prefix-match.
  - Messages that look like drift but are not (nvidia-smi vs libnvidia-ml, nvidia-modeset.ko vs nvidia.ko, GSP
    firmware version mismatch) are reported in RV(findings) as what they are.
  - With O(fix=true) the module installs user-space packages whose version equals the loaded module's, with exact
    pins in one transaction, and holds them (C(apt-mark hold), C(dnf versionlock add)). It never touches the kernel
    module, DKMS or kmod packages and never removes a package it does not replace. Inside a container (LXC, Docker,
    systemd-nspawn, podman) only user space can be fixed, so that is the fix there. On a bare host the fix installs
    user space only when the module file on disk is the loaded one (user space moved on its own); when the installed
    driver is newer than the loaded module, it says that a reboot or a module reload is the right fix instead and
    changes nothing.
options:
  fix:
    description:
      - Install user-space packages whose version equals the loaded kernel module's, with exact version pins
        (C(name=version) for apt, C(name-version-release) for dnf), then hold them against upgrades.
      - The pins come from the installed package names and the versions the configured repositories offer
        (C(apt-cache madison), C(dnf list --showduplicates)); the module does not run C(apt-get update).
      - A failed install leaves the previous packages in place (apt and dnf resolve the whole transaction first; when
        dpkg fails half-way, the module reinstalls the versions that were there before and says so).
    type: bool
    default: false
  expected_version:
    description:
      - Fail unless the loaded kernel module has this version, for example V(570.148.08).
      - A bare branch number such as V(570) accepts any version of that branch.
      - Also fails when no NVIDIA kernel module is loaded.
    type: str
  package_manager:
    description:
      - Which package database to read and, with O(fix=true), which tool installs.
      - V(auto) picks C(dpkg)/C(apt-get) on Debian-family hosts and C(rpm)/C(dnf) on Red Hat-family hosts.
    type: str
    choices: [auto, apt, dnf]
    default: auto
  flavor:
    description:
      - Kernel module flavor to assume when the evidence does not show it (an C(nvidia-smi) answer does not).
      - When the loaded module shows another flavor, the module warns; the loaded module always wins.
      - V(auto) reports what the evidence shows, or V(null).
    type: str
    choices: [auto, open, proprietary]
    default: auto
  install_packages:
    description:
      - Install these driver packages (names without versions) at O(install_version) in one transaction, then hold them,
        instead of fixing drift. This is how the C(llmops.sglang.nvidia_driver) role installs; use it for a full install
        (kernel side included, with O(kernel_side=true)) or a user-space install in a container.
      - A name starting with C(@) is a dnf module spec (C(@nvidia-driver:535-dkms)); it is installed as it is (the stream
        pins the branch), and its package (C(nvidia-driver)) is held.
      - Packages already installed at O(install_version) (at any version when it is empty) are left as they are. The dry
        run (C(apt-get -s), C(dnf --assumeno)) decides whether anything changes; a transaction that would remove a package
        it does not install fails and names it, so nothing is removed by surprise.
      - The module does not run C(apt-get update) and does not fail on drift here (a new kernel module is loaded only after
        a reboot); run it again without O(install_packages) to verify. RV(kernel_module) and RV(userspace) describe the
        host after the install.
    type: list
    elements: str
    default: []
    version_added: 0.2.0
  install_version:
    description:
      - With O(install_packages), the exact upstream driver version, for example V(580.95.05). Each package is pinned to
        the version the configured repositories offer with that upstream version (C(apt-cache madison), C(dnf list
        --showduplicates)); a package without one fails, naming what the repositories offer.
      - Empty installs absent packages at the version the package tool picks and leaves installed ones as they are.
    type: str
    default: ''
    version_added: 0.2.0
  kernel_side:
    description:
      - With O(install_packages), allow the transaction to install kernel-side packages (DKMS and kmod packages, the
        module's common files). V(false) refuses such a transaction, as the drift fix always does; use it in containers.
      - With O(kernel_side=true) on the dnf family, the hold covers the installed NVIDIA packages the named ones require
        (C(rpm -q --requires), recursively), so a C(dnf upgrade) cannot move the kernel module away from the held user space.
    type: bool
    default: false
    version_added: 0.2.0
  hold:
    description:
      - Hold what the fix or the install put in place against upgrades (C(apt-mark hold), C(dnf versionlock add) at the
        installed version; locks on these packages at other versions are removed after the new ones are in place).
      - With O(install_packages) the hold covers the named packages and every installed user-space driver package, and is
        put right on every run (a package someone released is held again).
    type: bool
    default: true
    version_added: 0.2.0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
    details: Reports RV(ignore:changed=true) exactly when O(fix=true) or O(install_packages) would install or hold packages;
      runs C(apt-get -s) (C(dnf --assumeno)) to prove it.
  diff_mode:
    support: full
    details: Shows the kernel-module and user-space versions and the driver packages before and after the fix; with
      O(install_packages), the named packages' versions and the holds.
notes:
  - Run it with C(become=true); reading the kernel log and installing packages need root.
  - A container sees the host's module through C(/proc/driver/nvidia/version) and C(/sys/module/nvidia); its user
    space must match the host's module exactly.
  - The fix needs the exact version in a configured repository. Ubuntu's archive and Debian's security archive keep
    only the newest upload of a branch, so the module's version may be gone; the module then says so and fails.
  - C(match) is V(null) when the evidence cannot prove either way (no module loaded, or no user space found).
seealso:
  - name: NVIDIA driver installation guide
    description: Package names and branches of NVIDIA's CUDA repositories.
    link: https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/
  - module: ansible.builtin.apt
  - module: ansible.builtin.dnf
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Fail when the loaded NVIDIA module and user space differ
  llmops.sglang.nvidia_driver_match:
  become: true
  register: nvidia

- name: Show the versions
  ansible.builtin.debug:
    msg: "module {{ nvidia.kernel_module.version }} ({{ nvidia.kernel_module.flavor }}), user space {{ nvidia.userspace.versions }}"

- name: In an LXC container, install user space matching the host's module and hold it
  llmops.sglang.nvidia_driver_match:
    fix: true
  become: true

- name: Require a given driver on the GPU hosts
  llmops.sglang.nvidia_driver_match:
    expected_version: "570.148.08"
  become: true

- name: Install the R580 driver at an exact version (kernel side included) and hold it; the role does this
  llmops.sglang.nvidia_driver_match:
    install_packages: [nvidia-headless-580-server-open, nvidia-utils-580-server]
    install_version: "580.95.05"
    kernel_side: true
  become: true

- name: Report only (never fail), for example on hosts without a GPU
  llmops.sglang.nvidia_driver_match:
  become: true
  register: nvidia_report
  failed_when: false
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
    flavor:
      description: V(open) or V(proprietary), V(null) when the evidence does not show it.
      type: str
      sample: open
    source:
      description: Where the version was read.
      type: str
      sample: /proc/driver/nvidia/version
    file_version:
      description: Version of the module file on disk for the running kernel (C(modinfo nvidia)), not necessarily the loaded one.
      type: str
      sample: "590.48.01"
  sample: {"version": "590.48.01", "flavor": "open", "source": "/proc/driver/nvidia/version", "file_version": "590.48.01"}
userspace:
  description: The user-space parts of the driver that were found.
  returned: always
  type: dict
  contains:
    versions:
      description: Sorted distinct upstream versions (an NVML major.minor appears only when no full version it prefixes was found).
      type: list
      elements: str
      sample: ["565.57.01"]
    nvml_version:
      description: The C(NVML library version) line of a failed C(nvidia-smi), major.minor as printed.
      type: str
      sample: "565.57"
    libraries:
      description: Driver libraries the loader cache points at, by name, with the version in the file name.
      type: dict
      sample: {"libcuda.so": "565.57.01", "libnvidia-ml.so": "565.57.01"}
    packages:
      description: Installed user-space driver packages (kernel-side, transitional and separately versioned packages left out).
      type: list
      elements: dict
      sample: [{"name": "libnvidia-compute-565", "version": "565.57.01-0ubuntu1", "arch": "amd64"}]
match:
  description: V(true) when every user-space version equals the module's, V(false) on any difference, V(null) when unknown.
  returned: always
  type: bool
  sample: false
mismatches:
  description: Each user-space part that differs, with the version the loaded module needs (V(null) when the module is unknown).
  returned: always
  type: list
  elements: dict
  sample: [{"component": "package libnvidia-compute-565", "version": "565.57.01", "expected": "590.48.01"}]
findings:
  description: Messages that look like drift but are something else (nvidia-smi vs NVML binary, nvidia-modeset vs nvidia.ko, GSP firmware).
  returned: always
  type: list
  elements: dict
  sample: [{"kind": "gsp-firmware-mismatch", "message": "GSP firmware 595.71.05 does not match the kernel module 595.58.03: ..."}]
in_container:
  description: Whether the module runs inside a container (LXC, Docker, podman, systemd-nspawn).
  returned: always
  type: bool
  sample: true
container_kind:
  description: The container type that was detected.
  returned: always
  type: str
  sample: lxc
distro_family:
  description: V(debian), V(redhat) or V(null).
  returned: always
  type: str
  sample: debian
fix_packages:
  description:
    - Exact pins the fix installs (C(name=version) for apt, C(name-version-release) for dnf).
    - With O(install_packages), what the install transaction asks for (empty when it would change nothing).
  returned: always
  type: list
  elements: str
  sample: ["libnvidia-compute-565=590.48.01-0ubuntu1"]
fix_skipped:
  description: Drifted packages no exact pin could be found for, and why.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "libnvidia-compute-570", "reason": "no version 570.144 of libnvidia-compute-570 is available from the configured repositories"}]
recommended_action:
  description: V(none), V(install_userspace) (the fix), V(reboot) (bare host whose installed driver is newer than the loaded module) or V(load_module).
  returned: always
  type: str
  sample: install_userspace
reason:
  description: One sentence on the result, also the failure message.
  returned: always
  type: str
  sample: "NVIDIA driver drift: kernel module 590.48.01 (from /proc/driver/nvidia/version) but user space has library libnvidia-ml.so.565.57.01 565.57.01"
fix_result:
  description:
    - What the fix or the install did (installed pins, held packages).
    - With O(install_packages) also C(hold_added) (holds that were missing) and C(unlocked) (dnf locks at other versions
      that were removed).
  returned: when O(fix=true) or O(install_packages) acted
  type: dict
  sample: {"installed": ["libnvidia-compute-565=590.48.01-0ubuntu1"], "held": ["libnvidia-compute-565"]}
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
fix_error:
  description:
    - Why the fix refused or failed, as data (the message says it in words).
    - C(kind) is V(no_tool) (no apt-get or dnf), V(plan_failed) (the dry run failed), V(would_remove) (the transaction would
      remove packages it does not replace), V(kernel_side) (it would install or upgrade kernel-side packages),
      V(no_versionlock) (the dnf versionlock plugin is missing), V(unlock_failed), V(install_failed) (the previous packages
      were put back, see RV(restored)) or V(hold_failed); C(packages) names the packages concerned.
  returned: when the fix refused or failed
  type: dict
  version_added: 0.2.0
  sample: {"kind": "would_remove", "packages": ["xserver-xorg-video-nouveau"]}
restored:
  description: After a failed install, what was put back (C(ok), C(restored) pins, and on dnf C(locks)).
  returned: when an install failed
  type: dict
  sample: {"ok": true, "restored": ["nvidia-smi=535.309.01-0+deb12u1"]}
argv:
  description: The failed command.
  returned: when a fix command failed
  type: list
  elements: str
  sample: ["/usr/bin/apt-get", "install", "-y", "nvidia-smi=535.261.03-1"]
rc:
  description: Return code of the failed command.
  returned: when a fix command failed
  type: int
  sample: 100
stdout:
  description: Output of the failed command.
  returned: when a fix command failed
  type: str
  sample: ""
stderr:
  description: Error output of the failed command.
  returned: when a fix command failed
  type: str
  sample: "E: Version '590.48.01-0ubuntu1' for 'libnvidia-compute-565' was not found"
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._backends import backend_for
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._evidence import EvidenceReader
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._fix import FixError, plan_fix
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._host import HostCommands
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._install import hold_names, plan_install, render_install, spec_root
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia._verdict import describe, evaluate, recommend, render_state


def _expected_ok(expected, version):
    if not version:
        return False
    if expected.isdigit():
        return version.split('.', 1)[0] == expected
    return version == expected


def _observe(reader, params):
    """Evidence and verdict (observe -> decide)."""
    evidence = reader.gather(params['package_manager'])
    evidence['flavor_hint'] = params['flavor'] if params['flavor'] != 'auto' else None
    return evidence, evaluate(evidence)


def _plan(verdict, action, backend):
    """Exact pins: from the versions the repositories offer when the fix is the action, else from the pure rules."""
    if action == 'install_userspace' and verdict.package_records and backend:
        available = backend.available_versions([pkg['name'] for pkg in verdict.package_records])
        if available is not None:
            return plan_fix(verdict, available)
    return plan_fix(verdict)


def _userspace(verdict):
    return dict(versions=verdict.userspace_versions, nvml_version=verdict.nvml_version, libraries=verdict.libraries, packages=verdict.packages)


def _kernel_module(verdict):
    return dict(version=verdict.kernel_module_version, flavor=verdict.kernel_module_flavor,
                source=verdict.kernel_module_source, file_version=verdict.module_file_version)


def _result(verdict, plan, action, host):
    return dict(
        changed=False,
        kernel_module=_kernel_module(verdict),
        userspace=_userspace(verdict),
        match=verdict.match,
        mismatches=verdict.mismatches,
        findings=verdict.findings,
        in_container=bool(verdict.in_container),
        container_kind=verdict.container_kind,
        distro_family=verdict.distro_family,
        fix_packages=plan.pins,
        fix_skipped=plan.skipped,
        recommended_action=action,
        reason=describe(verdict, action, plan.pins, plan.skipped),
        notes=verdict.notes,
        commands=host.commands,
    )


def _diff(verdict, backend, pins):
    pinned = dict((backend.pin_name(pin), backend.pin_version(pin)) for pin in pins)
    after = [dict(pkg, version=pinned.get(pkg['name'].split(':', 1)[0]) or pkg['version']) for pkg in verdict.packages]
    return dict(before_header='NVIDIA driver (before)', after_header='NVIDIA driver (after)',
                before=render_state(verdict.kernel_module_version, verdict.userspace_versions, verdict.packages),
                after=render_state(verdict.kernel_module_version, [verdict.kernel_module_version], after))


def _fix(module, reader, backend, verdict, plan, result):
    """Dry run, then (unless check mode) install and hold, then gather again and prove the match (act -> verify)."""
    replaced = set(pkg['name'] for pkg in verdict.package_records)
    previous = dict((pkg['name'], pkg['version']) for pkg in verdict.package_records)
    try:
        backend.simulate(plan.pins, replaced)
        result['changed'] = True
        if module._diff:
            result['diff'] = _diff(verdict, backend, plan.pins)
        if module.check_mode:
            module.exit_json(**result)
        result['fix_result'] = backend.apply(plan.pins, previous, hold=module.params['hold'])
    except FixError as exc:
        result.update(exc.context, fix_error=exc.to_json())
        module.fail_json(msg='%s. %s' % (result['reason'], exc), **result)
    evidence, after = _observe(reader, module.params)
    result.update(userspace=_userspace(after), match=after.match, mismatches=after.mismatches,
                  recommended_action=recommend(after, evidence['module_loaded']))
    result['reason'] = describe(after, result['recommended_action'])
    if after.match is False:
        module.fail_json(msg='installed %s but the driver still differs: %s' % (' '.join(plan.pins), result['reason']), **result)
    module.exit_json(**result)


def _hold_set(backend, params, names, verdict):
    """What the install holds, read now: the named packages, user space, and (kernel side) what they require."""
    if not params['hold']:
        return []
    closure = backend.hold_closure([spec_root(name) for name in names]) if params['kernel_side'] else {}
    return hold_names(names, [pkg['name'] for pkg in verdict.package_records], closure)


def _install(module, reader, backend, verdict, result):
    """install_packages: plan the pins, dry-run, install (restore on failure), then hold what is there (act -> verify)."""
    params = module.params
    names = params['install_packages']
    plain = [spec_root(name) for name in names]
    installed = backend.installed_versions(plain)
    available = backend.available_versions(plain) if params['install_version'] else {}
    plan = plan_install(backend, names, params['install_version'], installed, available)
    if plan.unavailable:
        raise FixError('cannot install %s: %s; check that the repository with this version is configured and its lists are current '
                       '(apt-get update)' % (' '.join(names), '; '.join(item['reason'] for item in plan.unavailable)),
                       'plan_failed', [item['name'] for item in plan.unavailable], fix_skipped=plan.unavailable)
    if plan.pins:
        simulated = backend.simulate(plan.pins, set(plain) | set(installed), kernel_side=params['kernel_side'])
        if not simulated['install'] and not simulated['remove']:
            plan.pins = []  # a module spec already in place
    held = _hold_set(backend, params, names, verdict)
    result['fix_packages'] = plan.pins
    if module.check_mode:
        needed = backend.hold_needed(held) if held else {'add': [], 'stale': []}
        result['changed'] = bool(plan.pins or needed['add'] or needed['stale'])
    else:
        fix_result = {'installed': [], 'held': held}
        if plan.pins:
            previous = dict((pkg['name'], pkg['version']) for pkg in verdict.package_records)
            previous.update(installed)
            fix_result.update(backend.apply(plan.pins, previous, wanted=plan.wanted, lift=held, hold=False))
            evidence, verdict = _observe(reader, params)
            held = _hold_set(backend, params, names, verdict)
        fix_result.update(backend.apply_hold(backend.hold_needed(held)) if held else {'hold_added': [], 'unlocked': []}, held=held)
        result.update(fix_result=fix_result, changed=bool(plan.pins or fix_result['hold_added'] or fix_result['unlocked']),
                      kernel_module=_kernel_module(verdict), userspace=_userspace(verdict), match=verdict.match, mismatches=verdict.mismatches)
    if module._diff and result['changed']:
        after = dict(installed, **dict((spec_root(name), version or 'the newest') for name, version in plan.wanted.items()))
        result['diff'] = dict(before_header='NVIDIA driver packages (before)', after_header='NVIDIA driver packages (after)',
                              before=render_install(names, installed, []), after=render_install(names, after, held))
    module.exit_json(**result)


def _report(module, verdict, plan, action, result):
    """Fail on an unexpected module version or on drift, with the reason; exit otherwise."""
    params = module.params
    expected = params['expected_version']
    if expected and not verdict.kernel_module_version:
        module.fail_json(msg='expected NVIDIA kernel module %s, but %s; load the driver (modprobe nvidia) or install it with the '
                         'llmops.sglang.nvidia_driver role' % (expected, result['reason']), **result)
    if expected and not _expected_ok(expected, verdict.kernel_module_version):
        module.fail_json(msg='the loaded NVIDIA kernel module is %s, expected %s (read from %s); install the expected driver and reboot, '
                         'or change expected_version' % (verdict.kernel_module_version, expected, verdict.kernel_module_source), **result)
    if verdict.match is False:
        if params['fix'] and action == 'install_userspace' and not plan.pins:
            module.fail_json(msg='%s; no exact package pin is available, so fix=true cannot act' % result['reason'], **result)
        module.fail_json(msg=result['reason'], **result)
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            fix=dict(type='bool', default=False),
            expected_version=dict(type='str'),
            package_manager=dict(type='str', default='auto', choices=['auto', 'apt', 'dnf']),
            flavor=dict(type='str', default='auto', choices=['auto', 'open', 'proprietary']),
            install_packages=dict(type='list', elements='str', default=[]),
            install_version=dict(type='str', default=''),
            kernel_side=dict(type='bool', default=False),
            hold=dict(type='bool', default=True),
        ),
        mutually_exclusive=[('fix', 'install_packages')],
        supports_check_mode=True,
    )
    host = HostCommands(module)
    reader = EvidenceReader(host)
    evidence, verdict = _observe(reader, module.params)
    # asked for, else the tool of the packages found, else the distribution's (a host without driver packages yet)
    manager = module.params['package_manager']
    if manager == 'auto':
        manager = verdict.package_manager or {'debian': 'apt', 'redhat': 'dnf'}.get(verdict.distro_family)
    backend = backend_for(manager, host)
    action = recommend(verdict, evidence['module_loaded'])
    plan = _plan(verdict, action, backend)
    result = _result(verdict, plan, action, host)
    for note in verdict.notes:
        if note.startswith('the flavor option'):
            module.warn(note)
    if module.params['install_packages']:
        if not backend:
            module.fail_json(msg='install_packages needs apt (Debian family) or dnf (Red Hat family); this host has %s. Set '
                             'package_manager, or install the driver another way' % (manager or 'no known package manager'),
                             fix_error={'kind': 'no_tool', 'packages': module.params['install_packages']}, **result)
        try:
            _install(module, reader, backend, verdict, result)
        except FixError as exc:
            result.update(exc.context, fix_error=exc.to_json())
            module.fail_json(msg=str(exc), **result)
    if module.params['fix'] and action == 'install_userspace' and plan.pins and verdict.match is False and backend:
        _fix(module, reader, backend, verdict, plan, result)
    _report(module, verdict, plan, action, result)


if __name__ == '__main__':
    main()
