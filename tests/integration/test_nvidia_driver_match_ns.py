# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The real llmops.sglang.nvidia_driver_match module, run by ansible-playbook, reading the real paths.

What is real:

- ansible-playbook (connection local) runs the collection's module unchanged; the module reads
  /proc/driver/nvidia/version, /sys/module/nvidia/version, runs the real dpkg-query, ldconfig -p,
  nvidia-smi, modinfo and dmesg of this machine.
- The user-space driver: Debian bookworm non-free's own packages libnvidia-ml1, libcuda1 and nvidia-smi
  535.261.03-1, downloaded with apt-get download from deb.debian.org.  Their library files (real ELF
  objects) are unpacked and put into a loader cache built by the real ldconfig; their control fields
  (dpkg-deb -f) become "install ok installed" entries of a copy of this machine's dpkg status file.
  The nvidia-smi binary is NVIDIA's, run for real; without /dev/nvidiactl it answers with its real
  "couldn't communicate with the NVIDIA driver" message.

What stands in (a CPU machine has no NVIDIA kernel module):

- /proc/driver/nvidia/version is a tmpfs file holding a recorded corpus file (tests/fixtures/nvidia),
  or, for the match case, the corpus' proprietary banner with the version of the downloaded packages.
- /sys/module is a bind mount of a prepared directory with nvidia/version.
- /var/lib/dpkg/status and /etc/ld.so.cache are bind mounts of the files described above.

All of it happens in a private mount namespace (unshare -m --propagation private), so the
machine's own /proc, /sys, dpkg database and loader cache are never changed.  The machine is a
Docker container, so the module sees in_container=true (from /.dockerenv) in every case.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvidia_fleet_host as fh  # noqa: E402  pylint: disable=wrong-import-position

CORPUS, COLLECTIONS, ANSIBLE_PLAYBOOK = fh.CORPUS, fh.COLLECTIONS, fh.ANSIBLE_PLAYBOOK
TARGET_PYTHON = os.environ.get('LLMOPS_TARGET_PYTHON', '/usr/bin/python3')
VERSION = '535.261.03'
REVISION = '1'
PACKAGES = ['libnvidia-ml1', 'libcuda1', 'nvidia-smi']

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='mount namespaces need root'),
    pytest.mark.skipif(not shutil.which('unshare'), reason='unshare (util-linux) is not installed'),
    pytest.mark.skipif(not os.path.exists(os.path.join(COLLECTIONS, 'ansible_collections', 'llmops', 'sglang')),
                       reason='collection not found under %s (set LLMOPS_COLLECTIONS_PATH)' % COLLECTIONS),
    pytest.mark.xdist_group('test_nvidia_driver_match_ns'),  # the file on one worker: its module-scoped set-up runs once (docs/testing.md)
]


@pytest.fixture(scope='module')
def stage(tmp_path_factory):
    """Download the real Debian packages and build the loader cache and dpkg status copy."""
    work = tmp_path_factory.mktemp('nvidia-ns')
    debs = work / 'debs'
    debs.mkdir()
    env = fh.apt_env(work)
    error = fh.apt_update(env) or fh.apt_download(env, ['%s=%s-%s' % (name, VERSION, REVISION) for name in PACKAGES], debs)
    if error:
        pytest.skip('cannot download Debian non-free packages from deb.debian.org: %s' % error)

    root = work / 'root'
    status = open('/var/lib/dpkg/status', encoding='utf-8').read().rstrip('\n') + '\n\n'
    for deb in sorted(debs.iterdir()):
        assert fh.run(['dpkg-deb', '-x', str(deb), str(root)]).returncode == 0
        control = fh.run(['dpkg-deb', '-f', str(deb)]).stdout
        lines = control.rstrip('\n').splitlines()
        lines.insert(1, 'Status: install ok installed')
        status += '\n'.join(lines) + '\n\n'
    (work / 'status').write_text(status)

    libdir = root / 'usr' / 'lib' / 'x86_64-linux-gnu' / 'nvidia' / 'current'
    assert (libdir / ('libnvidia-ml.so.%s' % VERSION)).exists()
    conf = work / 'ld.so.conf'
    dirs = []
    for name in sorted(os.listdir('/etc/ld.so.conf.d')) if os.path.isdir('/etc/ld.so.conf.d') else []:
        with open(os.path.join('/etc/ld.so.conf.d', name), encoding='utf-8') as handle:
            dirs += [line.strip() for line in handle if line.strip() and not line.startswith('#')]
    conf.write_text('\n'.join(dirs + [str(libdir)]) + '\n')
    built = fh.run(['ldconfig', '-X', '-C', str(work / 'ld.so.cache'), '-f', str(conf)])
    assert built.returncode == 0, built.stderr

    bindir = work / 'bin'
    bindir.mkdir()
    os.symlink(str(root / 'usr' / 'lib' / 'nvidia' / 'current' / 'nvidia-smi'), str(bindir / 'nvidia-smi'))
    return work


def run_module(stage, name, proc_text=None, sys_version=None, args=None, check_mode=False, packages=True, module='nvidia_driver_match'):
    """Run the module through ansible-playbook inside a private mount namespace; return its result."""
    case = stage / name
    case.mkdir()
    result_file = case / 'result.json'
    playbook = case / 'play.yml'
    fh.match_playbook(playbook, args or {}, result_file, hosts='localhost', check_mode=check_mode, module=module)
    script = ['set -e']
    if proc_text is not None:
        (case / 'version').write_text(proc_text)
        script += ['mount -t tmpfs -o mode=0755 tmpfs /proc/driver', 'mkdir /proc/driver/nvidia',
                   'cp %s /proc/driver/nvidia/version' % (case / 'version')]
    if sys_version is not None:
        (case / 'sys' / 'nvidia').mkdir(parents=True)
        (case / 'sys' / 'nvidia' / 'version').write_text(sys_version + '\n')
        script.append('mount --bind %s /sys/module' % (case / 'sys'))
    if packages:
        script += ['mount --bind %s /var/lib/dpkg/status' % (stage / 'status'), 'mount --bind %s /etc/ld.so.cache' % (stage / 'ld.so.cache')]
    script.append('exec "$@"')
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0',
               PATH='%s:%s' % (stage / 'bin', os.environ.get('PATH', '/usr/bin:/bin')))
    argv = ['unshare', '-m', '--propagation', 'private', 'bash', '-c', '\n'.join(script), 'ns',
            ANSIBLE_PLAYBOOK, '-c', 'local', '-i', 'localhost,', '-e', 'ansible_python_interpreter=%s' % TARGET_PYTHON, str(playbook)]
    proc = fh.run(argv, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(result_file.read_text())


def corpus(case, filename='proc_driver_nvidia_version.txt'):
    with open(os.path.join(CORPUS, case, filename), encoding='utf-8') as handle:
        return handle.read()


def test_host_view_is_untouched_outside_the_namespace(stage):
    run_module(stage, 'untouched', proc_text=corpus('truenas-module-580-173-nvml-580-178'), sys_version='580.173.02')
    assert not os.path.exists('/proc/driver/nvidia/version')
    assert not os.path.exists('/sys/module/nvidia')
    assert 'libnvidia-ml1' not in fh.run(['dpkg-query', '-W', 'libnvidia-ml1']).stdout


def test_match(stage):
    # The corpus' proprietary banner, with the version of the downloaded packages.
    proc = corpus('debian-bookworm-smi-525-module-520').replace('520.56.06', VERSION)
    result = run_module(stage, 'match', proc_text=proc, sys_version=VERSION)
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is False
    assert result['match'] is True
    assert result['kernel_module']['version'] == VERSION
    assert result['kernel_module']['source'] == '/proc/driver/nvidia/version'
    assert result['kernel_module']['flavor'] == 'proprietary'
    assert result['userspace']['versions'] == [VERSION]
    # Found through the loader cache (ldconfig -p) and the symlinks it points at.
    assert result['userspace']['libraries'] == {'libcuda.so': VERSION, 'libnvidia-ml.so': VERSION}
    names = sorted(pkg['name'] for pkg in result['userspace']['packages'])
    assert names == ['libcuda1:amd64', 'libnvidia-ml1:amd64', 'nvidia-smi']
    assert result['distro_family'] == 'debian'
    # NVIDIA's real nvidia-smi ran and could not reach a driver: reported as what it is.
    assert [finding['kind'] for finding in result['findings']] == ['no-driver']
    assert result['fix_packages'] == []


def test_info_reads_the_same_host_in_check_mode(stage):
    """nvidia_driver_info over the same real packages, loader cache and nvidia-smi: facts, never a change or a failure."""
    proc = corpus('debian-bookworm-smi-525-module-520').replace('520.56.06', VERSION)
    result = run_module(stage, 'info', proc_text=proc, sys_version=VERSION, check_mode=True, module='nvidia_driver_info')
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is False
    assert result['kernel_module'] == {'version': VERSION, 'loaded': True, 'flavor': 'proprietary', 'flavor_source': '/proc/driver/nvidia/version',
                                       'source': '/proc/driver/nvidia/version', 'file_version': None}
    assert result['match'] is True
    assert result['userspace']['libraries'] == {'libcuda.so': VERSION, 'libnvidia-ml.so': VERSION}
    assert sorted(part['component'] for part in result['userspace']['sources']) == [
        'library libcuda.so', 'library libnvidia-ml.so', 'package libcuda1', 'package libnvidia-ml1', 'package nvidia-smi']
    # NVIDIA's real nvidia-smi cannot reach a driver here: user space comes from libnvidia-ml's file name, NVML reports no CUDA version.
    assert result['driver_versions'] == {'kernel_module': VERSION, 'kernel_module_source': '/proc/driver/nvidia/version', 'userspace': VERSION,
                                         'userspace_source': 'library libnvidia-ml.so', 'cuda_driver': None, 'notes': []}
    assert [finding['kind'] for finding in result['findings']] == ['no-driver']
    assert (result['distro_family'], result['package_manager']) == ('debian', 'apt')
    assert result['versionlocks'] == {'available': None, 'entries': [], 'stale': []}
    assert result['gpu_source'] in ('lspci', '/sys/bus/pci/devices')
    assert [gpu['pci_id'][:5] for gpu in result['gpus']] == ['10de:'] * len(result['gpus'])


def test_mismatch_against_installed_packages(stage):
    result = run_module(stage, 'mismatch', proc_text=corpus('debian-bookworm-smi-525-module-520'), sys_version='520.56.06')
    assert result['failed'] is True
    assert result['match'] is False
    assert result['kernel_module']['version'] == '520.56.06'
    assert result['userspace']['versions'] == [VERSION]
    assert '520.56.06' in result['msg'] and VERSION in result['msg']
    assert {'component': 'package nvidia-smi', 'version': VERSION, 'expected': '520.56.06'} in result['mismatches']
    assert result['in_container'] is True and result['recommended_action'] == 'install_userspace'
    assert sorted(result['fix_packages']) == ['libcuda1=520.56.06-1', 'libnvidia-ml1=520.56.06-1', 'nvidia-smi=520.56.06-1']


def test_fix_check_mode_fails_clearly_when_the_version_is_not_in_the_repositories(stage):
    result = run_module(stage, 'fix-check', proc_text=corpus('debian-bookworm-smi-525-module-520'), sys_version='520.56.06',
                        args={'fix': True}, check_mode=True)
    assert result['failed'] is True
    # The real apt-get -s of this machine (no non-free source) cannot find 520.56.06-1.
    assert 'apt-get could not plan the install' in result['msg']
    assert result['rc'] == 100
    assert 'libnvidia-ml1=520.56.06-1' in ' '.join(result['argv'])
    assert result['changed'] is False


def test_open_module_only_proc(stage):
    result = run_module(stage, 'open', proc_text=corpus('ubuntu2404-open-565-proc-only'), packages=False)
    assert result['kernel_module']['version'] == '565.57.01'
    assert result['kernel_module']['flavor'] == 'open'
    assert result['match'] is None
    assert not result.get('failed')


def test_sysfs_only(stage):
    result = run_module(stage, 'sysfs', sys_version=VERSION)
    assert result['kernel_module']['source'] == '/sys/module/nvidia/version'
    assert result['match'] is True


def test_no_module_loaded(stage):
    result = run_module(stage, 'none', packages=False)
    assert not result.get('failed')
    assert result['match'] is None
    assert result['kernel_module']['version'] is None
    assert 'no NVIDIA kernel module is loaded' in result['reason']


def test_no_module_with_expected_version_fails(stage):
    result = run_module(stage, 'none-expected', packages=False, args={'expected_version': VERSION})
    assert result['failed'] is True
    assert VERSION in result['msg']


def test_expected_version_differs(stage):
    result = run_module(stage, 'expected', proc_text=corpus('truenas-module-580-173-nvml-580-178'), packages=False,
                        args={'expected_version': '580.178.04'})
    assert result['failed'] is True
    assert 'the loaded NVIDIA kernel module is 580.173.02, expected 580.178.04' in result['msg']
