# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan of the nvidia_driver role (plugins/plugin_utils/_nvidia_plan.py), a pure function: version and branch,
source, flavor from the GPUs' architectures, packages per source and family, repository files, refusals, the module
streams, and the reboot and verification verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.plugin_utils._nvidia_plan import (
    HostFacts, NvidiaInputs, plan, reboot_of, stream_actions, verify_problem)

ROLE = Path(__file__).resolve().parents[4] / 'roles' / 'nvidia_driver'
DEBIAN = HostFacts(os_family='Debian', distribution='Debian', distribution_version='12.8', distribution_major_version='12',
                   distribution_release='bookworm', kernel='6.1.0-28-amd64', architecture='x86_64')
UBUNTU = HostFacts(os_family='Debian', distribution='Ubuntu', distribution_version='24.04', distribution_major_version='24',
                   distribution_release='noble', kernel='6.8.0-51-generic', architecture='x86_64')
ROCKY = HostFacts(os_family='RedHat', distribution='Rocky', distribution_version='9.4', distribution_major_version='9',
                  distribution_release='Blue Onyx', kernel='5.14.0-427.13.1.el9_4.x86_64', architecture='x86_64')
NO_GPU = {'kernel_module': {'version': None}, 'gpu_architectures': []}


def inputs(**values):
    return NvidiaInputs.from_vars(dict(('nvidia_driver_' + k, v) for k, v in values.items()))


@pytest.mark.parametrize('values, flavor', [
    (dict(gpu_arch='blackwell', branch='550'), 'open'),        # Blackwell requires open
    (dict(gpu_arch='pascal', branch='580'), 'proprietary'),    # no open module for Pascal
    (dict(gpu_arch='ampere', branch='550'), 'proprietary'),    # before R560
    (dict(gpu_arch='hopper', branch='570'), 'open'),           # R560 and later
    (dict(gpu_arch='ampere', version='535.261.03'), 'proprietary'),
    (dict(gpu_arch='ada', flavor='proprietary', branch='580'), 'proprietary'),
])
def test_flavor_from_the_architecture_and_the_branch(values, flavor):
    p = plan(inputs(**values), DEBIAN, NO_GPU)
    assert (p.flavor, p.source, p.archs, p.refusals) == (flavor, 'debian', (values['gpu_arch'],), ())
    if 'version' in values:
        assert (p.branch, p.version, p.expected_version) == ('535', '535.261.03', '535.261.03')


def test_inputs_in_their_types():
    """A branch given as a YAML number, a bool as a string: the plan reads them as the role's argument spec does."""
    given = NvidiaInputs.from_vars({'nvidia_driver_branch': 550, 'nvidia_driver_reboot': 'yes', 'nvidia_driver_extra_packages': 'x'})
    assert (given.branch, given.reboot, given.extra_packages) == ('550', True, ('x',))
    assert plan(given, DEBIAN, NO_GPU).branch == '550'


def test_architectures_from_the_pci_ids_decide_when_no_variable_says():
    mixed = dict(NO_GPU, gpu_architectures=['ada', 'blackwell'])
    assert (plan(inputs(branch='550'), DEBIAN, mixed).flavor, plan(inputs(branch='550'), DEBIAN, dict(NO_GPU, gpu_architectures=['ada'])).flavor) \
        == ('open', 'proprietary')


@pytest.mark.parametrize('values, host, refused', [
    (dict(gpu_arch='blackwell', flavor='proprietary'), DEBIAN, 'Blackwell needs the open kernel modules'),
    (dict(gpu_arch='hopper', source='ubuntu'), DEBIAN, 'source ubuntu on Debian'),
    (dict(source='debian'), ROCKY, 'source debian on Rocky'),
    (dict(branch='58'), DEBIAN, 'branch 58'),
    (dict(userspace_only=True), DEBIAN, 'nvidia_driver_userspace_only is true but no NVIDIA kernel module is visible'),
    (dict(), HostFacts(os_family='Suse', distribution='SLES'), 'not SLES (Suse)'),
])
def test_refusals_before_anything_is_installed(values, host, refused):
    p = plan(inputs(**values), host, NO_GPU)
    assert not p.install and refused in p.refusals[0] and p.names == ()


def test_debian_family_packages_and_files():
    deb = plan(inputs(version='550.163.01', flavor='open'), DEBIAN, NO_GPU)
    assert deb.names == ('nvidia-open-kernel-dkms', 'libcuda1', 'libnvidia-ml1', 'nvidia-smi')
    assert 'Pin: version 550.163.01-*' in deb.pin and 'Suites: bookworm bookworm-updates' in deb.nonfree_sources
    assert deb.headers == ('linux-headers-6.1.0-28-amd64',) and deb.keyring_url == ''
    ubuntu = plan(inputs(branch='535', flavor='open'), UBUNTU, NO_GPU)
    assert ubuntu.names == ('nvidia-headless-535-server-open', 'nvidia-utils-535-server') and ubuntu.pin == ''
    cuda = plan(inputs(source='cuda', branch='590', gpu_arch='blackwell'), UBUNTU, NO_GPU)
    assert cuda.names == ('nvidia-open',)  # no branch in the names from R590
    assert cuda.keyring_url == 'https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/cuda-keyring_1.1-1_all.deb'
    userspace = plan(inputs(userspace_only=True, source='ubuntu'), UBUNTU, dict(NO_GPU, kernel_module={'version': '535.216.01'}))
    assert (userspace.version, userspace.names, userspace.kernel_side, userspace.headers) == (
        '535.216.01', ('libnvidia-compute-535-server', 'nvidia-utils-535-server'), True, ())
    own = plan(inputs(packages=['my-driver'], extra_packages=['nvidia-fabricmanager-580']), DEBIAN, NO_GPU)
    assert own.names == ('my-driver', 'nvidia-fabricmanager-580')


def test_red_hat_family_packages_streams_and_repository():
    old = plan(inputs(branch='550', gpu_arch='ampere'), ROCKY, NO_GPU)
    assert (old.source, old.names, old.streams_wanted) == ('cuda', ('@nvidia-driver:550-dkms',), ('550-dkms',))
    assert old.repo_url == 'https://developer.download.nvidia.com/compute/cuda/repos/rhel9/x86_64/cuda-rhel9.repo'
    assert old.versionlock_package == 'python3-dnf-plugin-versionlock'
    new = plan(inputs(branch='590', gpu_arch='blackwell'), ROCKY, NO_GPU)
    assert (new.names, new.streams_wanted) == (('nvidia-open',), ())
    userspace = plan(inputs(userspace_only=True), ROCKY, dict(NO_GPU, kernel_module={'version': '550.163.01'}))
    assert userspace.names[-1] == 'nvidia-driver-NVML' and userspace.streams_wanted == ('550-dkms', '550-open')
    assert userspace.kernel_side is False


LISTING = '''nvidia-driver  latest-dkms [d][e]  default [d]  summary
nvidia-driver  550-dkms              default [d]  summary
nvidia-driver  550-open              default [d]  summary
'''


def test_module_stream_actions():
    assert stream_actions(LISTING, ('550-dkms',)) == ('550-dkms', True, True)
    assert stream_actions(LISTING, ('latest-dkms',)) == ('latest-dkms', False, False)
    assert stream_actions('No matching Modules to list', ('550-dkms',)) == ('', False, False)


def test_reboot_and_verification():
    installed = {'fix_packages': ['nvidia-open'], 'kernel_module': {'version': '535.216.01', 'file_version': '550.163.01'}}
    pending = reboot_of(inputs(), installed, local=False)
    assert (pending['kernel_changed'], pending['reboot']) == (True, False)
    assert pending['msg'].startswith('A reboot is pending: the NVIDIA kernel module on disk is 550.163.01, the loaded module is 535.216.01')
    assert reboot_of(inputs(reboot=True), installed, local=False)['reboot'] is True
    assert reboot_of(inputs(reboot=True), installed, local=True)['reboot'] is False  # never over a local connection
    assert reboot_of(inputs(userspace_only=True), installed, local=False)['kernel_changed'] is False
    ok = {'match': True, 'kernel_module': {'version': '550.163.01'}}
    assert verify_problem(inputs(), ok, None, False) == ''
    assert 'a reboot is pending' in verify_problem(inputs(), ok, pending, False)
    assert 'no NVIDIA kernel module is loaded' in verify_problem(inputs(), {'match': None, 'kernel_module': {'version': None}}, None, False)


def test_the_inputs_are_the_documented_variables():
    spec = yaml.safe_load((ROLE / 'meta' / 'argument_specs.yml').read_text())['argument_specs']['main']['options']
    assert sorted(NvidiaInputs.names()) == sorted(spec)
    defaults = yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text())
    assert NvidiaInputs.from_vars(defaults) == NvidiaInputs()
