# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvidia_driver_match fix=true and the nvidia_driver role's Red Hat path with real dnf and rpm on a real systemd test host.

What is real:

- The test host is a systemd-nspawn container booted by tests/infra/fleet.sh (systemd as PID 1, Debian
  bookworm), reached by ansible-playbook over real SSH; the module detects it as a container.
- dnf 4.14 (with python3-dnf, which ansible.builtin.dnf needs), rpm 4.18 and the versionlock plugin
  (dnf-plugins-core) are Debian's own packages, downloaded on the controller (apt-get download, only
  what the hosts' root file system lacks) and installed into the host from a flat apt repository on the
  fleet's hub address (the test hosts have no route out).  Debian's dnf-plugins-core ships every plugin;
  the "local" plugin (a separate package, not installed by default, on Fedora and RHEL) would add a
  repository of its own, so the host switches it off.
- The rpm repository is built with rpmbuild and createrepo_c on the controller and served on the hub
  address; dnf resolves, downloads, installs, downgrades and version-locks for real, and rpm runs the
  packages' ldconfig scriptlets, so the module's loader-cache view (ldconfig -p) is real.
- The library files in the packages are NVIDIA's real libnvidia-ml.so.<version> and libcuda.so.<version>
  from Debian's libnvidia-ml1 and libcuda1 packages of the same version.

What stands in:

- The RPMs are STAND-INS for NVIDIA's CUDA-repository RPMs, which cannot be fetched here
  (tests/fixtures/nvidia_rpm/nvidia-driver-standin.spec): NVIDIA's package names for the R535 branch
  (nvidia-driver-libs, nvidia-driver-cuda-libs, nvidia-driver-NVML, nvidia-driver-cuda, nvidia-persistenced),
  Epoch 3, release 1.el8 and NVIDIA's "=" requirements between them, taken from
  https://github.com/NVIDIA/yum-packaging-nvidia-driver/blob/535/nvidia-driver.spec; only the two
  library files are real content.  They are unsigned (the repository file says gpgcheck=0).
- The loaded kernel module: /proc/driver/nvidia/version inside the host is a tmpfs file holding the
  corpus' proprietary banner with the version under test (tests/nvidia_fleet_host.py).
- For the role: the distribution identity.  ansible.builtin.setup must say os_family RedHat, so the
  role's host gets Rocky Linux 8.3's /etc/os-release and /etc/redhat-release (real text, from ansible-core's
  fact fixture, tests/fixtures/nvidia_rpm/README.md) and /usr/lib64 in the loader path, as on RHEL.
  dnf and rpm stay real.

Scenarios: user space 535.309.01 while the "module" is 535.261.03 (a container whose host driver is
older): check mode reports the change and the diff; fix installs the 535.261.03 pins with dnf and locks
them; a second run changes nothing; then the module moves to 535.309.01 while one needed rpm is gone
from the repository (its metadata still lists it): dnf fails to download, and the previous packages and
their version locks are still in place.  The role, in user-space-only mode on a "Rocky" host without
NVIDIA packages, installs and locks the loaded module's version, its verify step proves the match, and
a second run changes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TESTS)
import nvidia_fleet_host as fh  # noqa: E402  pylint: disable=wrong-import-position

SPEC = os.path.join(TESTS, 'fixtures', 'nvidia_rpm', 'nvidia-driver-standin.spec')
ROCKY = os.path.join(TESTS, 'fixtures', 'nvidia_rpm', 'rocky-8.3')
OLD, NEW = '535.261.03', '535.309.01'
DEB_VERSION = {OLD: '535.261.03-1', NEW: '535.309.01-0+deb12u1'}
RELEASE = '1.el8'
DRIVER = ['nvidia-driver-NVML', 'nvidia-driver-cuda', 'nvidia-driver-cuda-libs', 'nvidia-driver-libs']
DNF_STACK = ['dnf', 'dnf-plugins-core', 'rpm']

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='systemd-nspawn test hosts need root'),
    pytest.mark.skipif(not all(shutil.which(tool) for tool in ('systemd-nspawn', 'dpkg-scanpackages', 'rpmbuild', 'createrepo_c')),
                       reason='needs systemd-container, dpkg-dev, rpm (rpmbuild) and createrepo-c '
                              '(tests/infra/fleet.sh deps; apt-get install dpkg-dev rpm createrepo-c)'),
]


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    """Debian's dnf stack as a flat apt repository and the stand-in RPMs as a dnf repository, served on the hub."""
    work = tmp_path_factory.mktemp('nvidia-dnf')
    rootfs = fh.run([fh.FLEET, 'rootfs'])
    assert rootfs.returncode == 0, rootfs.stderr[-2000:]
    status = os.path.join(fh.fleet_dir(), 'rootfs', 'var', 'lib', 'dpkg', 'status')
    env = fh.apt_env(work, status=status)
    error = fh.apt_update(env)
    if error:
        pytest.skip('cannot reach deb.debian.org: %s' % error)
    served = work / 'served'
    debs, rpms, payloads = served / 'deb', served / 'rpm', work / 'payload'
    for directory in (debs, rpms, payloads):
        directory.mkdir(parents=True)
    stack = fh.apt_missing(env, DNF_STACK)
    assert stack, 'apt-get cannot resolve %s against the test-host root file system' % DNF_STACK
    libs = ['%s=%s' % (name, DEB_VERSION[version]) for name in ('libnvidia-ml1', 'libcuda1') for version in (OLD, NEW)]
    error = fh.apt_download(env, stack, debs) or fh.apt_download(env, libs, payloads)
    if error:
        pytest.skip('cannot download Debian packages from deb.debian.org: %s' % error)
    fh.flat_repo(debs)
    for version in (OLD, NEW):
        tree = payloads / version
        for deb in payloads.glob('*_%s_amd64.deb' % DEB_VERSION[version].replace(':', '%3a')):
            unpacked = fh.run(['dpkg-deb', '-x', str(deb), str(tree)])
            assert unpacked.returncode == 0, unpacked.stderr
        built = fh.run(['rpmbuild', '-bb', '--quiet', '--define', '_topdir %s' % (work / 'rpmbuild'), '--define', 'driver_version %s' % version,
                        '--define', 'payload %s' % tree, SPEC])
        assert built.returncode == 0, built.stderr[-3000:]
    for rpm in (work / 'rpmbuild' / 'RPMS').glob('*/*.rpm'):
        shutil.copy(str(rpm), str(rpms))
    made = fh.run(['createrepo_c', '-q', str(rpms)])
    assert made.returncode == 0, made.stderr
    server = fh.HubServer(served)
    state = {'work': work, 'served': served, 'server': server, 'nodes': []}
    try:
        yield state
    finally:
        server.stop()
        for name in state['nodes']:
            fh.down(name)


def boot(repo, name, rocky=False, preinstall=None):
    """A test host with Debian's dnf, rpm and versionlock plugin and /etc/yum.repos.d pointing at the stand-in repository."""
    repo['nodes'].append(name)
    node = fh.boot(name, repo['work'])
    url = repo['server'].start().url
    command = textwrap.dedent('''\
        set -e
        rm -f /etc/apt/sources.list.d/*.sources /etc/apt/sources.list
        echo "deb [trusted=yes] {url}/deb ./" > /etc/apt/sources.list.d/llmops-dnf-test.list
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends {stack} >/dev/null
        sed -i 's/^enabled *=.*/enabled = false/' /etc/dnf/plugins/local.conf
        mkdir -p /etc/yum.repos.d
        printf '[nvidia-standin]\\nname=Stand-in for the CUDA repository (llmops.sglang tests)\\nbaseurl={url}/rpm/\\ngpgcheck=0\\n' \\
            > /etc/yum.repos.d/nvidia-standin.repo
        echo /usr/lib64 > /etc/ld.so.conf.d/lib64.conf
        ''').format(url=url, stack=' '.join(DNF_STACK))
    if preinstall:
        command += 'dnf -q -y install %s\n' % ' '.join(preinstall)
    prepared = fh.ssh(node, command)
    assert prepared.returncode == 0, prepared.stdout[-3000:] + prepared.stderr[-3000:]
    if rocky:
        # Stand-in for the distribution identity only; the overlay root is discarded when the host stops.
        for name in ('os-release', 'redhat-release'):
            with open(os.path.join(ROCKY, name), encoding='utf-8') as handle:
                done = fh.nsenter(node, 'rm -f /etc/%s && cat > /etc/%s' % (name, name), stdin=handle.read())
            assert done.returncode == 0, done.stderr
    return node


def installed(node):
    out = fh.ssh(node, "rpm -q --qf '%%{NAME} %%{VERSION}-%%{RELEASE}\\n' %s nvidia-persistenced; echo LOCKS; dnf -q versionlock list 2>/dev/null"
                 % ' '.join(DRIVER)).stdout
    versions, locks = out.split('LOCKS\n')
    return dict(line.split(' ', 1) for line in versions.strip().splitlines() if ' ' in line), sorted(locks.split())


def locks_for(version):
    return sorted('%s-3:%s-%s.*' % (name, version, RELEASE) for name in DRIVER)


def run_fix(node, check_mode=False):
    work = node['work']
    out = os.path.join(work, 'result-%s.json' % os.urandom(4).hex())
    playbook = os.path.join(work, 'fix-dnf.yml')
    with open(playbook, 'w', encoding='utf-8') as handle:
        handle.write(textwrap.dedent('''\
            - hosts: all
              gather_facts: false
              tasks:
                - name: Make user space match the loaded module
                  llmops.sglang.nvidia_driver_match:
                    fix: true
                    package_manager: dnf
                  register: nvidia
                  # The failure is the result under test; it is written out and asserted by pytest.
                  ignore_errors: true
                - name: Write the result
                  ansible.builtin.copy:
                    content: "{{ nvidia | to_json }}"
                    dest: %s
                    mode: "0600"
                  delegate_to: localhost
                  check_mode: false
            ''') % out)
    proc = fh.run_playbook(node, playbook, check_mode=check_mode)
    assert proc.returncode == 0 and os.path.exists(out), proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(out, encoding='utf-8') as handle:
        return json.load(handle)


def test_fix_with_real_dnf(repo):
    host = boot(repo, 'nvdnf%d' % (os.getpid() % 100000), preinstall=['%s-%s' % (name, NEW) for name in DRIVER])
    fh.set_module(host, OLD)
    before, locks = installed(host)
    assert before == dict((name, '%s-%s' % (NEW, RELEASE)) for name in DRIVER + ['nvidia-persistenced']) and locks == []
    pins = sorted('%s-%s-%s' % (name, OLD, RELEASE) for name in DRIVER)

    # Check mode: dnf resolves the transaction (--assumeno), the module reports the change and the diff, nothing changes.
    result = run_fix(host, check_mode=True)
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is True
    assert result['in_container'] is True and result['container_kind'] == 'systemd-nspawn'
    assert result['kernel_module']['version'] == OLD
    assert sorted(result['fix_packages']) == pins
    assert result['userspace']['libraries'] == {'libcuda.so': NEW, 'libnvidia-ml.so': NEW}
    assert 'user space: %s' % NEW in result['diff']['before'] and 'user space: %s' % OLD in result['diff']['after']
    assert 'package nvidia-driver-NVML %s-%s' % (OLD, RELEASE) in result['diff']['after']
    assert any('--assumeno' in command['argv'] for command in result['commands'])
    assert installed(host) == (before, [])

    # Fix: exact pins in one dnf transaction, locked; nvidia-persistenced ("=" requirement of nvidia-driver-cuda) follows.
    result = run_fix(host)
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is True and result['match'] is True
    versions, locks = installed(host)
    assert versions == dict((name, '%s-%s' % (OLD, RELEASE)) for name in DRIVER + ['nvidia-persistenced'])
    assert locks == locks_for(OLD)
    assert result['userspace']['libraries'] == {'libcuda.so': OLD, 'libnvidia-ml.so': OLD}

    # Second run: nothing to do.
    result = run_fix(host)
    assert result['changed'] is False and result['match'] is True
    assert 'fix_result' not in result

    # The module moves on, but an rpm of the target version is gone from the repository while the metadata still
    # lists it: dnf fails to download before rpm runs; the previous packages and the lifted locks are back.
    fh.set_module(host, NEW)
    missing = repo['served'] / 'rpm' / ('nvidia-driver-NVML-%s-%s.x86_64.rpm' % (NEW, RELEASE))
    aside = repo['work'] / missing.name
    os.rename(str(missing), str(aside))
    try:
        checked = run_fix(host, check_mode=True)
        result = run_fix(host)
    finally:
        os.rename(str(aside), str(missing))
    assert checked['changed'] is True and sorted(checked['fix_packages']) == sorted('%s-%s-%s' % (name, NEW, RELEASE) for name in DRIVER)
    assert result['failed'] is True
    assert 'The previous packages and version locks are in place' in result['msg'], result['msg']
    assert result['restored']['ok'] is True and sorted(result['restored']['locks']) == locks_for(OLD)
    assert result['rc'] != 0
    versions, locks = installed(host)
    assert versions == dict((name, '%s-%s' % (OLD, RELEASE)) for name in DRIVER + ['nvidia-persistenced'])
    assert locks == locks_for(OLD)


def test_role_userspace_only_on_red_hat(repo):
    """llmops.sglang.nvidia_driver, user-space-only mode, Red Hat path (tasks/redhat.yml), on a host without NVIDIA packages."""
    host = boot(repo, 'nvdnfr%d' % (os.getpid() % 100000), rocky=True)
    fh.set_module(host, OLD)
    out = os.path.join(host['work'], 'role-result.json')
    playbook = os.path.join(host['work'], 'role-dnf.yml')
    with open(playbook, 'w', encoding='utf-8') as handle:
        handle.write(textwrap.dedent('''\
            - hosts: all
              gather_facts: true
              roles:
                - role: llmops.sglang.nvidia_driver
                  vars:
                    nvidia_driver_userspace_only: true
                    # The host's dnf repository is the local stand-in written by the test.
                    nvidia_driver_repo_manage: false
              post_tasks:
                - name: Write the final check and the facts the role saw
                  ansible.builtin.copy:
                    content: "{{ nvidia_driver_match_result | combine({'os_family': ansible_facts.os_family}) | to_json }}"
                    dest: %s
                    mode: "0600"
                  delegate_to: localhost
            ''') % out)
    first = fh.run_playbook(host, playbook)
    assert first.returncode == 0, first.stdout[-5000:] + first.stderr[-2000:]
    with open(out, encoding='utf-8') as handle:
        result = json.load(handle)
    assert result['os_family'] == 'RedHat'
    assert result['match'] is True and result['distro_family'] == 'redhat'
    assert result['kernel_module']['version'] == OLD
    versions, locks = installed(host)
    # nvidia-driver-NVML comes only through an unversioned soname requirement: the role must name it, or dnf picks the newest.
    assert versions == dict((name, '%s-%s' % (OLD, RELEASE)) for name in DRIVER + ['nvidia-persistenced'])
    assert locks == locks_for(OLD)
    second = fh.run_playbook(host, playbook)
    assert second.returncode == 0, second.stdout[-5000:]
    assert fh.recap_changed(second.stdout, host['name']) == 0, second.stdout[-3000:]
