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
- The rpm database exists from the start (``rpm --initdb`` at boot), as on every Red Hat host; Debian's rpm keeps it in
  ~/.rpmdb and would otherwise create it at the first query (a write that a real host never sees).
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
a second run changes nothing; then the module moves to 535.309.01: the role's own locks at 535.261.03 must not block
the install, and one lock per package is left, at 535.309.01.  The full install below R590 uses the dnf module stream
nvidia-driver:535-dkms from a second repository with the same rpms and module metadata (modules.yaml added with
modifyrepo_c; Debian's libdnf is built with libmodulemd, so stream enabling and profile install are real), plus
stand-ins for the kernel side (nvidia-driver, nvidia-kmod-common, kmod-nvidia-latest-dkms with a real ELF nvidia.ko
whose .modinfo says the version; depmod and modinfo from Debian's kmod): without kernel-devel for the running kernel
the role fails naming it; with nvidia_driver_kernel_headers false the stream is installed, the kernel side is locked
with user space, nothing is loaded, and the role reports the pending reboot and fails verification naming it; a second
run changes nothing.  That repository's default stream is latest-dkms with only 535.309.01 (as NVIDIA's), so dnf filters
out 535.261.03 until nvidia-driver:535-dkms is enabled: the user-space-only role test runs against it first (the role
enables the stream), and against the plain repository (no module) once the module moved to 535.309.01.
"""

from __future__ import annotations

import json
import os
import re
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
# modinfo and depmod (kmod) for the kernel-side stand-ins; installed only on the full-install host.
KMOD = ['kmod']
# The module stream of the full install (nvidia-driver:<branch>-dkms) and the rpms its documents list, per
# NVIDIA's genmodules.py (https://github.com/NVIDIA/yum-packaging-precompiled-kmod/blob/main/genmodules.py):
# the branch's packages and the DKMS kernel module, the main package in the default profile.
STREAM = '535-dkms'
# The default stream of NVIDIA's repository, with the newest driver (here NEW).
LATEST = 'latest-dkms'
STREAM_RPMS = ['nvidia-driver', 'nvidia-driver-libs', 'nvidia-driver-NVML', 'nvidia-driver-cuda', 'nvidia-driver-cuda-libs',
               'nvidia-persistenced', 'nvidia-kmod-common', 'kmod-nvidia-latest-dkms']

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='systemd-nspawn test hosts need root'),
    pytest.mark.skipif(not all(shutil.which(tool) for tool in ('systemd-nspawn', 'dpkg-scanpackages', 'rpmbuild', 'createrepo_c')),
                       reason='needs systemd-container, dpkg-dev, rpm (rpmbuild) and createrepo-c '
                              '(tests/infra/fleet.sh deps; apt-get install dpkg-dev rpm createrepo-c)'),
    pytest.mark.xdist_group('test_nvidia_fix_dnf'),  # the file on one worker: its module-scoped set-up runs once (docs/testing.md)
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
    stack = fh.apt_missing(env, DNF_STACK + KMOD)
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
                        '--define', 'payload %s' % tree, '--define', 'kernel %s' % fh.KERNEL,
                        '--define', 'nvidia_ko %s' % fh.nvidia_ko(work, version, 'proprietary'), SPEC])
        assert built.returncode == 0, built.stderr[-3000:]
    for rpm in (work / 'rpmbuild' / 'RPMS').glob('*/*.rpm'):
        shutil.copy(str(rpm), str(rpms))
    made = fh.run(['createrepo_c', '-q', str(rpms)])
    assert made.returncode == 0, made.stderr
    modular_repo(rpms, served / 'rpm-modular', work)
    server = fh.HubServer(served)
    state = {'work': work, 'served': served, 'server': server, 'nodes': []}
    try:
        yield state
    finally:
        server.stop()
        for name in state['nodes']:
            fh.down(name)


def modular_repo(rpms, modular, work):
    """The same rpms as a repository with module metadata (modules.yaml, modifyrepo_c --mdtype=modules), as the CUDA repository
    has for RHEL 8 and 9: one modulemd v2 document per driver version in stream 535-dkms, stream latest-dkms with the newest
    version (NVIDIA's genmodules.py: "latest" carries the highest branch's version), and the defaults document making
    latest-dkms the default stream, so dnf filters out the packages only 535-dkms lists until that stream is enabled."""
    shutil.copytree(str(rpms), str(modular), ignore=shutil.ignore_patterns('repodata'))
    made = fh.run(['createrepo_c', '-q', str(modular)])
    assert made.returncode == 0, made.stderr
    documents = []
    for number, (stream, version) in enumerate(((STREAM, OLD), (STREAM, NEW), (LATEST, NEW)), start=1):
        documents.append(textwrap.dedent('''\
            document: modulemd
            version: 2
            data:
              name: nvidia-driver
              stream: "{stream}"
              version: {number}
              context: "00000000"
              arch: x86_64
              summary: Nvidia driver for {stream} branch
              description: >-
                Stand-in module metadata for the NVIDIA driver {version} (llmops.sglang tests).
              license:
                module: [MIT]
              profiles:
                default:
                  description: Default installation
                  rpms: [nvidia-driver, nvidia-driver-cuda, kmod-nvidia-latest-dkms]
              artifacts:
                rpms:
            ''').format(stream=stream, number=20240101000000 + number, version=version)
            + ''.join('      - %s-3:%s-%s.x86_64\n' % (name, version, RELEASE) for name in STREAM_RPMS))
    documents.append(textwrap.dedent('''\
        document: modulemd-defaults
        version: 1
        data:
          module: nvidia-driver
          stream: "{latest}"
          profiles:
            "{stream}": [default]
            "{latest}": [default]
        ''').format(stream=STREAM, latest=LATEST))
    modules = work / 'modules.yaml'
    modules.write_text('---\n' + '...\n---\n'.join(documents) + '...\n', encoding='utf-8')
    added = fh.run(['modifyrepo_c', '--mdtype=modules', str(modules), str(modular / 'repodata')])
    assert added.returncode == 0, added.stderr


def boot(repo, name, rocky=False, preinstall=None, rpm_dir='rpm', debs=()):
    """A test host with Debian's dnf, rpm and versionlock plugin and /etc/yum.repos.d pointing at the stand-in repository
    (RPM_DIR on the hub: rpm, or rpm-modular with module metadata); DEBS: more Debian packages from the flat repository."""
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
        rpm --initdb
        mkdir -p /etc/yum.repos.d
        printf '[nvidia-standin]\\nname=Stand-in for the CUDA repository (llmops.sglang tests)\\nbaseurl={url}/{rpm_dir}/\\ngpgcheck=0\\n' \\
            > /etc/yum.repos.d/nvidia-standin.repo
        echo /usr/lib64 > /etc/ld.so.conf.d/lib64.conf
        ''').format(url=url, stack=' '.join(DNF_STACK + list(debs)), rpm_dir=rpm_dir)
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
    """nvidia_driver_match fix=true with dnf against NODE over SSH; returns the module's result (a failure is a result)."""
    return fh.run_match(node, {'fix': True, 'package_manager': 'dnf'}, check_mode=check_mode)


def test_fix_with_real_dnf(repo):
    host = boot(repo, 'nvdnf3f%d' % (os.getpid() % 100000), preinstall=['%s-%s' % (name, NEW) for name in DRIVER])
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


def run_role(host, tag, **role_vars):
    """llmops.sglang.nvidia_driver with ROLE_VARS (repository management off) on HOST; returns (process, final check or None)."""
    out = os.path.join(host['work'], 'role-result-%s.json' % tag)
    playbook = os.path.join(host['work'], 'role-dnf-%s.yml' % tag)
    role_vars = dict({'nvidia_driver_repo_manage': False}, **role_vars)
    with open(playbook, 'w', encoding='utf-8') as handle:
        handle.write(textwrap.dedent('''\
            - hosts: all
              gather_facts: true
              roles:
                - role: llmops.sglang.nvidia_driver
                  vars: %s
              post_tasks:
                - name: Write the final check and the facts the role saw
                  ansible.builtin.copy:
                    content: "{{ nvidia_driver_result | combine({'os_family': ansible_facts.os_family}) | to_json }}"
                    dest: %s
                    mode: "0600"
                  delegate_to: localhost
                  # Only the role's tasks count in the recap.
                  changed_when: false
            ''') % (json.dumps(role_vars), out))
    if os.path.exists(out):
        os.remove(out)
    proc = fh.run_playbook(host, playbook)
    if not os.path.exists(out):
        return proc, None
    with open(out, encoding='utf-8') as handle:
        return proc, json.load(handle)


def test_role_userspace_only_on_red_hat(repo):
    """llmops.sglang.nvidia_driver, user-space-only mode, Red Hat path (tasks/redhat.yml), on a host without NVIDIA packages.

    The repository first is the one with module metadata, whose default stream latest-dkms has only NEW: OLD's packages
    are "filtered out by modular filtering" until the role enables nvidia-driver:535-dkms.  Then the host's module moves on
    (a container whose host driver was upgraded) and the repository is the plain one (no module metadata, "No matching
    Modules"): the role's own locks at the old version must not block the new one, and the locks move to the new version.
    """
    host = boot(repo, 'nvdnf3r%d' % (os.getpid() % 100000), rocky=True, rpm_dir='rpm-modular')
    fh.set_module(host, OLD)
    # --check first, on the fresh host: nothing written anywhere on it (dnf's metadata cache, the module stream's state
    # and the version locks included), and it says what it would install.
    fh.temporary_files_to_run_user(host)
    dry, written = fh.run_role_check(host, {'nvidia_driver_repo_manage': False, 'nvidia_driver_userspace_only': True})
    assert written == [], 'written on the host by --check:\n%s\n%s' % ('\n'.join(written), dry.stdout[-4000:])
    assert dry.returncode == 0, dry.stdout[-5000:] + dry.stderr[-2000:]
    assert fh.ssh(host, "rpm -qa 'nvidia*'").stdout.split() == [], 'installed by --check'
    # the stream is not enabled yet, and dnf filters the branch's versions out until it is: the dry run says so
    assert '--check: would enable the module stream nvidia-driver:%s' % STREAM in dry.stdout, dry.stdout[-4000:]
    assert '--check: would install nvidia-driver-cuda' in dry.stdout, dry.stdout[-4000:]
    assert fh.ssh(host, 'dnf -q module list --enabled nvidia-driver').stdout.strip() == '', 'enabled by --check'
    # The host's dnf repository is the local stand-in written by the test.
    first, result = run_role(host, 'first', nvidia_driver_userspace_only=True)
    assert first.returncode == 0, first.stdout[-5000:] + first.stderr[-2000:]
    assert result['os_family'] == 'RedHat'
    assert result['match'] is True and result['distro_family'] == 'redhat'
    assert result['kernel_module']['version'] == OLD
    versions, locks = installed(host)
    # nvidia-driver-NVML comes only through an unversioned soname requirement: the role must name it, or dnf picks the newest.
    assert versions == dict((name, '%s-%s' % (OLD, RELEASE)) for name in DRIVER + ['nvidia-persistenced'])
    assert locks == locks_for(OLD)
    enabled = fh.ssh(host, 'dnf -q module list --enabled nvidia-driver').stdout
    assert re.search(r'^nvidia-driver\s+%s\s+\[e\]' % re.escape(STREAM), enabled, re.M), enabled
    second, dummy = run_role(host, 'second', nvidia_driver_userspace_only=True)
    assert second.returncode == 0, second.stdout[-5000:]
    assert fh.recap_changed(second.stdout, host['name']) == 0, second.stdout[-3000:]

    # The module moves to NEW, the repository is the plain one: the install runs without the versionlock plugin, the locks
    # move to NEW (none left at OLD).
    fh.set_module(host, NEW)
    moved = fh.ssh(host, "sed -i 's#/rpm-modular/#/rpm/#' /etc/yum.repos.d/nvidia-standin.repo && grep -q '/rpm/$' "
                         "/etc/yum.repos.d/nvidia-standin.repo")
    assert moved.returncode == 0, moved.stderr
    third, result = run_role(host, 'third', nvidia_driver_userspace_only=True)
    assert third.returncode == 0, third.stdout[-5000:] + third.stderr[-2000:]
    assert result['match'] is True and result['kernel_module']['version'] == NEW
    assert result['userspace']['libraries'] == {'libcuda.so': NEW, 'libnvidia-ml.so': NEW}
    versions, locks = installed(host)
    assert versions == dict((name, '%s-%s' % (NEW, RELEASE)) for name in DRIVER + ['nvidia-persistenced'])
    assert locks == locks_for(NEW)
    fourth, dummy = run_role(host, 'fourth', nvidia_driver_userspace_only=True)
    assert fourth.returncode == 0, fourth.stdout[-5000:]
    assert fh.recap_changed(fourth.stdout, host['name']) == 0, fourth.stdout[-3000:]


def test_role_full_install_with_module_stream(repo):
    """Full (kernel-side) install below R590 on the Red Hat family: dnf module stream nvidia-driver:535-dkms from a repository
    with module metadata; the kernel headers switch; no module loaded, so a reboot is pending and verification names it."""
    host = boot(repo, 'nvdnf3m%d' % (os.getpid() % 100000), rocky=True, rpm_dir='rpm-modular', debs=KMOD)
    full = {'nvidia_driver_branch': '535', 'nvidia_driver_flavor': 'proprietary'}
    streams = fh.ssh(host, 'dnf -q module list nvidia-driver')
    assert streams.returncode == 0 and STREAM in streams.stdout, streams.stdout + streams.stderr

    # Default nvidia_driver_kernel_headers: kernel-devel for the running kernel is not in the repository.
    proc, result = run_role(host, 'headers', **full)
    assert proc.returncode != 0 and result is None
    assert 'Cannot install kernel-devel-%s' % fh.KERNEL in proc.stdout, proc.stdout[-4000:]
    assert 'set nvidia_driver_kernel_headers to false' in proc.stdout, proc.stdout[-4000:]

    # Without the headers: the stream is enabled and its default profile installed; the module file on disk is the stream's
    # newest version, nothing is loaded, so the role says a reboot is pending and the verification fails naming it.
    proc, result = run_role(host, 'full', nvidia_driver_kernel_headers=False, **full)
    assert proc.returncode != 0 and result is None, proc.stdout[-4000:]
    assert 'A reboot is pending: the NVIDIA kernel module on disk is %s, the loaded module is none' % NEW in proc.stdout, proc.stdout[-6000:]
    assert 'a reboot is pending: the kernel module on disk is %s' % NEW in proc.stdout, proc.stdout[-6000:]
    state = fh.ssh(host, "dnf -q module list --enabled nvidia-driver; echo RPMS; rpm -q --qf '%{NAME} %{VERSION}\\n' "
                         "nvidia-driver kmod-nvidia-latest-dkms nvidia-kmod-common nvidia-driver-cuda; echo MODINFO; "
                         "modinfo -F version nvidia; test ! -e /sys/module/nvidia && echo NOT-LOADED").stdout
    enabled, rest = state.split('RPMS\n')
    rpms, modinfo = rest.split('MODINFO\n')
    assert re.search(r'^nvidia-driver\s+%s\s+\[e\]' % re.escape(STREAM), enabled, re.M), enabled
    assert rpms.split() == [item for name in ('nvidia-driver', 'kmod-nvidia-latest-dkms', 'nvidia-kmod-common', 'nvidia-driver-cuda')
                            for item in (name, NEW)], rpms
    assert modinfo.split() == [NEW, 'NOT-LOADED'], modinfo
    # The kernel side is locked with user space (a "dnf upgrade" must not move the module away from it), by version.
    kernel_side = ['nvidia-driver', 'nvidia-kmod-common', 'kmod-nvidia-latest-dkms']
    locks = fh.ssh(host, 'dnf -q versionlock list').stdout.split()
    assert sorted(locks) == sorted(locks_for(NEW) + ['%s-3:%s-%s.*' % (name, NEW, RELEASE) for name in kernel_side]), locks

    # Again: the stream is enabled and everything locked already, so nothing changes; still no module loaded, so the
    # verification still fails.
    proc, result = run_role(host, 'again', nvidia_driver_kernel_headers=False, **full)
    assert proc.returncode != 0 and 'no NVIDIA kernel module is loaded' in proc.stdout, proc.stdout[-4000:]
    assert fh.recap_changed(proc.stdout, host['name']) == 0, proc.stdout[-4000:]
