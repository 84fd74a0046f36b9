# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The nvidia_driver_info module in-process over the recorded NVIDIA corpus (tests/fixtures/nvidia).

The host's files and commands (``EvidenceReader.gather``) are the corpus case's recorded evidence; the
commands the module runs itself (lspci, rpm, dnf versionlock) answer from a table of real output formats
(tests/fixtures/nvidia_live, lspci lines with real device IDs).
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _evidence as ev
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _host as hc
from ansible_collections.llmops.sglang.plugins.modules import nvidia_driver_info

# the options HostCommands gives dnf in check mode (asserted where they matter, left out of the scripted answers' keys)
DRY_RUN_OPTIONS = ('--setopt=cachedir=', '--setopt=system_cachedir=', '--setopt=logdir=', '--disableplugin=generate_')

HERE = os.path.dirname(__file__)
LIVE = os.path.join(HERE, '..', '..', '..', 'fixtures', 'nvidia_live')


def _corpus():
    """The corpus loader of the verdict tests (one mapping from corpus file names to evidence keys)."""
    path = os.path.join(HERE, '..', 'module_utils', 'test_nvidia_driver.py')
    spec = importlib.util.spec_from_file_location('nvidia_verdict_tests', path)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


CORPUS = _corpus()
# lspci -n -d 10de: of an RTX 4090 (2684) and an RTX 5090 Laptop GPU (2c18), with their HDMI audio functions (class 0403).
LSPCI = ('01:00.0 0300: 10de:2684 (rev a1)\n01:00.1 0403: 10de:22ba (rev a1)\n'
         '02:00.0 0300: 10de:2c18 (rev a1)\n02:00.1 0403: 10de:22e9 (rev a1)\n')


class Host:
    """Scripted host: one evidence mapping, outputs per command prefix."""

    def __init__(self, evidence, commands=None):
        self.evidence = evidence
        self.commands = commands or {}
        self.ran = []

    def run_command(self, argv, **kwargs):
        self.ran.append(list(argv))
        # check mode's scratch options for dnf (HostCommands) are asserted on self.ran, not part of the scripted answers
        argv = [part for part in argv if not part.startswith(DRY_RUN_OPTIONS)]
        key = ' '.join([os.path.basename(argv[0])] + list(argv[1:]))
        for prefix, answer in self.commands.items():
            if key.startswith(prefix):
                return answer(argv) if callable(answer) else answer
        return 127, '', '%s: not on this host' % argv[0]


@pytest.fixture
def run_info(monkeypatch, capsys):
    def runner(args, host, check_mode=True):
        monkeypatch.setattr(ev.EvidenceReader, 'gather', lambda self, pm='auto', smi_table=False: dict(host.evidence))
        monkeypatch.setattr(ev, 'read_sysfs_gpus', lambda: [])
        monkeypatch.setattr(hc.HostCommands, 'bin', lambda self, name, path_first=False: '/usr/bin/' + name)
        monkeypatch.setattr('ansible.module_utils.basic.AnsibleModule.run_command', lambda module, argv, **kw: host.run_command(argv, **kw))
        with patch_module_args(dict(args, _ansible_check_mode=check_mode)):
            with pytest.raises(SystemExit):
                nvidia_driver_info.main()
        return json.loads(capsys.readouterr().out)
    return runner


@pytest.mark.parametrize('name', CORPUS.CASES)
def test_corpus_facts(run_info, name):
    """The facts of every recorded case: the verdict's module, flavor, user space and match, never a change or a failure."""
    evidence, expected = CORPUS.load_case(name)
    result = run_info({}, Host(dict(evidence, module_loaded=bool(evidence.get('proc_version')))))
    assert not result.get('failed')
    assert result['changed'] is False
    assert result['kernel_module']['version'] == expected['kernel_module_version']
    assert result['kernel_module']['flavor'] == expected['kernel_module_flavor']
    assert result['userspace']['versions'] == expected['userspace_versions']
    assert result['match'] == expected['match']
    assert result['distro_family'] in (None, expected['distro_family'])
    # Every user-space version comes from a named source.
    assert set(expected['userspace_versions']) <= set(part['version'] for part in result['userspace']['sources'])
    assert all(part['component'] for part in result['userspace']['sources'])
    # No lspci on this host: sysfs (here without NVIDIA devices) is read instead.
    assert (result['gpus'], result['gpu_source']) == ([], '/sys/bus/pci/devices')


def test_cuda_driver_version_and_userspace_from_the_smi_table(run_info):
    evidence, dummy = CORPUS.load_case('ubuntu2404-role-560-match-new-header')
    result = run_info({}, Host(evidence))
    assert result['driver_versions'] == {'kernel_module': None, 'kernel_module_source': None, 'userspace': '560.35.03',
                                         'userspace_source': 'nvidia-smi', 'cuda_driver': '12.6', 'notes': []}


def test_loaded_module_and_flavor_from_proc(run_info):
    evidence, dummy = CORPUS.load_case('ubuntu2404-open-565-proc-only')
    result = run_info({}, Host(dict(evidence, module_loaded=True)))
    assert result['kernel_module']['version'] == '565.57.01'
    assert result['kernel_module']['loaded'] is True
    assert result['kernel_module']['flavor'] == 'open'
    assert result['kernel_module']['flavor_source'] == '/proc/driver/nvidia/version'
    assert result['driver_versions']['kernel_module'] == '565.57.01'
    assert result['driver_versions']['kernel_module_source'] == '/proc/driver/nvidia/version'


def test_gpus_and_architectures_from_lspci(run_info):
    result = run_info({}, Host({}, {'lspci -n -d 10de:': (0, LSPCI, '')}))
    assert result['gpu_source'] == 'lspci'
    assert result['gpus'] == [{'slot': '01:00.0', 'pci_id': '10de:2684', 'architecture': 'ada'},
                              {'slot': '02:00.0', 'pci_id': '10de:2c18', 'architecture': 'blackwell'}]
    assert result['gpu_architectures'] == ['ada', 'blackwell']


def test_container_and_distro_family(run_info):
    evidence, dummy = CORPUS.load_case('proxmox-lxc-vgpu-guest-userspace-newer')
    evidence = dict(evidence, container_files={'/run/systemd/container': 'lxc\n'}, os_release='ID=ubuntu\nID_LIKE=debian\n')
    result = run_info({}, Host(evidence))
    assert (result['in_container'], result['container_kind'], result['distro_family']) == (True, 'lxc', 'debian')


def _rpm(installed, requires, provides):
    """A scripted rpm: installed {name: version-release}, requires {name: [capability]}, provides {capability: name}."""
    def answer(argv):
        args = argv[1:]
        if args[:2] == ['-q', '--requires']:
            return 0, ''.join('%s >= 1\n' % cap for name in args[2:] for cap in requires.get(name, [])), ''
        if args[:2] == ['-q', '--whatprovides']:
            return 0, ''.join('%s\n' % provides.get(cap, 'no package provides %s' % cap) for cap in args[4:]), ''
        return 0, ''.join('%s\t%s\n' % (name, installed[name]) if name in installed else 'package %s is not installed\n' % name
                          for name in args[3:]), ''
    return answer


def test_rpm_dependencies_and_stale_locks(run_info):
    """The kernel-side closure of the role's root package and the locks at another version (the recorded versionlock list is at
    535.261.03; the host now has 535.309.01 of the user-space packages)."""
    evidence, dummy = CORPUS.load_case('rhel7-cuda-repo-465-mismatch')
    with open(os.path.join(LIVE, 'dnf-versionlock-list.txt'), encoding='utf-8') as handle:
        locks = handle.read()
    rpm = 'nvidia-driver-cuda\t3\t535.309.01\t1.el9\tx86_64\tCUDA integration\nnvidia-driver-NVML\t3\t535.261.03\t1.el9\tx86_64\tNVML\n'
    installed = {'nvidia-driver': '535.309.01-1.el9', 'kmod-nvidia-latest-dkms': '535.309.01-1.el9', 'nvidia-kmod-common': '535.309.01-1.el9'}
    requires = {'nvidia-driver': ['nvidia-kmod-common', 'libc.so.6()(64bit)'], 'nvidia-kmod-common': ['nvidia-kmod']}
    provides = {'nvidia-kmod-common': 'nvidia-kmod-common', 'nvidia-kmod': 'kmod-nvidia-latest-dkms'}
    host = Host(dict(evidence, rpm=rpm), {'rpm -q': _rpm(installed, requires, provides), 'dnf -q versionlock list': (0, locks, '')})
    result = run_info({'dependency_roots': ['nvidia-driver', 'nvidia-settings']}, host)
    assert result['package_manager'] == 'dnf'
    assert result['dependencies'] == [{'name': name, 'version': '535.309.01-1.el9'}
                                      for name in ('kmod-nvidia-latest-dkms', 'nvidia-driver', 'nvidia-kmod-common')]
    assert result['versionlocks']['available'] is True
    assert len(result['versionlocks']['entries']) == 4
    # in check mode (--check) the versionlock query keeps dnf's cache and logs in the module's temporary directory
    dnf_runs = [argv for argv in host.ran if os.path.basename(argv[0]) == 'dnf']
    assert dnf_runs and all(argv[1].startswith('--setopt=cachedir=') and argv[3].startswith('--setopt=logdir=') for argv in dnf_runs)
    # nvidia-driver-cuda moved to 535.309.01: its lock is stale; NVML is still at the locked version; the others are not installed.
    assert result['versionlocks']['stale'] == ['nvidia-driver-cuda-3:535.261.03-1.el9.*']


def test_no_versionlock_plugin(run_info):
    evidence, dummy = CORPUS.load_case('rhel7-cuda-repo-465-mismatch')
    host = Host(evidence, {'rpm -q': (0, '', ''), 'dnf -q versionlock list': (1, '', 'No such command: versionlock.')})
    result = run_info({}, host)
    assert result['versionlocks'] == {'available': False, 'entries': [], 'stale': []}
    assert result['dependencies'] == []


def test_debian_host_reads_no_rpm_facts(run_info):
    evidence, dummy = CORPUS.load_case('debian12-native-525-147-05-dpkg')
    host = Host(evidence)
    result = run_info({'dependency_roots': ['nvidia-driver']}, host)
    assert result['package_manager'] == 'apt'
    assert result['versionlocks'] == {'available': None, 'entries': [], 'stale': []}
    assert not [argv for argv in host.ran if os.path.basename(argv[0]) in ('rpm', 'dnf')]
