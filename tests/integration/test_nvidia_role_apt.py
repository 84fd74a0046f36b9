# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""llmops.sglang.nvidia_driver's full install paths on the Debian family, with real apt on systemd test hosts.

Every test runs the role with ansible-playbook over real SSH against a systemd-nspawn test host booted by
tests/infra/fleet.sh (systemd as PID 1, Debian bookworm). apt, dpkg, apt-mark, ldconfig, depmod and modinfo in the
host do the work for real; the host reaches nothing but a flat apt repository (dpkg-scanpackages) that the test serves
on the fleet's hub address, as an air-gapped cluster's mirror would.

REAL in that repository (downloaded from deb.debian.org on the controller with apt-get download):
Debian bookworm's NVIDIA 535.261.03-1 user space (libcuda1, libnvidia-ml1, nvidia-smi, nvidia-alternative,
libnvidia-ptxjitcompiler1, libnvidia-pkcs11-openssl3 and their helper dependencies), kmod/libkmod2, python3-apt.

STAND-INS (built here with dpkg-deb; this machine cannot reach the Ubuntu archive or NVIDIA's CUDA repository, and
cannot build a kernel module: no headers for its kernel), carrying the real names, versions and dependency shape:

- Ubuntu archive, noble-updates, nvidia-graphics-drivers-535-server 535.309.01-0ubuntu0.24.04.2
  (https://packages.ubuntu.com/source/noble-updates/libs/nvidia-graphics-drivers-535-server):
  nvidia-headless-535-server[-open] -> nvidia-headless-no-dkms-535-server[-open] (=) + nvidia-dkms-535-server[-open] (=);
  nvidia-headless-no-dkms-* -> libnvidia-compute-535-server (=), nvidia-kernel-common-535-server (=);
  nvidia-utils-535-server -> libnvidia-compute-535-server (>=), nvidia-kernel-common-535-server-535.309.01 (a virtual
  package nvidia-kernel-common provides); nvidia-dkms-* -> nvidia-kernel-common (>=) (shape from
  https://packages.ubuntu.com/resolute/nvidia-utils-580, https://packages.ubuntu.com/tenacious/nvidia-dkms-580-open,
  https://packages.ubuntu.com/noble-updates/nvidia-headless-no-dkms-535-open;
  installed set as listed in https://github.com/NVIDIA/gpu-driver-container/pull/186). Descriptions are the non-transitional
  ones of that listing. libnvidia-compute-535-server carries the REAL library files of Debian's 535.309.01-0+deb12u1
  libcuda1 / libnvidia-ml1 / libnvidia-ptxjitcompiler1 (same upstream version), placed in /usr/lib/x86_64-linux-gnu as
  Ubuntu does, so ldconfig and the module's loader-cache view are real; nvidia-utils-535-server carries Debian's real
  nvidia-smi binary of that version.
- NVIDIA CUDA repository, Debian 12 flavour: cuda-drivers-535 / nvidia-open-535 (before R590) and cuda-drivers /
  nvidia-open (R590 on, branch dropped from the names: "Ubuntu 590 and later packages" in the "Recent Updates" of NVIDIA's
  Driver Installation Guide, https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/), each -> nvidia-driver-cuda (=)
  + nvidia-kernel-dkms / nvidia-kernel-open-dkms (=) (the CUDA repository's names, see
  https://github.com/GoogleCloudDataproc/initialization-actions/pull/1400); revision -1 as the CUDA repository's packages
  have. At 535.261.03-1 nvidia-driver-cuda depends on Debian's REAL libcuda1 / libnvidia-ml1 / nvidia-smi 535.261.03-1;
  at 590.48.01-1 (a released R590 version, quoted in tests/unit/plugins/module_utils/test_nvidia_driver.py) those three
  are empty stand-ins too (Debian bookworm has no 590).
- Debian non-free: nvidia-kernel-dkms / nvidia-open-kernel-dkms 535.261.03-1 (Debian's names) as stand-ins.
- Every kernel-side stand-in (nvidia-dkms-*, nvidia-kernel-dkms, nvidia-kernel-open-dkms, nvidia-open-kernel-dkms)
  installs a real ELF relocatable nvidia.ko whose .modinfo section carries version= and license= (NVIDIA or
  Dual MIT/GPL) under /lib/modules/$(uname -r)/updates/dkms/, where DKMS puts it, and runs depmod in its postinst, so
  modinfo nvidia reads a real module file. Depends on kmod (real) instead of dkms.
- The host's distribution identity for source=ubuntu: /etc/os-release replaced by the text of a real Ubuntu 24.04.1
  host, https://github.com/ssst0n3/docker_archive/blob/241df8a4d5b7a1d79e8c0ab5e1e955c9e45bb7df/kubernetes/v1.32.3/README.md
  (apt and dpkg stay Debian's).
- The LOADED kernel module: /proc/driver/nvidia/version is a tmpfs file in the host's mount namespace with a recorded
  banner (set_module below, written from the controller with nsenter).
- The kernel loading the module at boot (the reboot test): a oneshot unit in the host,
  llmops-standin-nvidia-module.service (ordered like systemd-modules-load.service: before sysinit.target, so before
  sshd), reads the module file that is installed, for real (modinfo -F version / -F license nvidia), and publishes the
  recorded banner of that flavor with that version at /proc/driver/nvidia/version (a tmpfs the unit mounts over
  /proc/driver inside the container). No module file: nothing is published, as no module would be loaded.

Reboots are real: the reboot test's host is booted with `fleet.sh up --persist` (an overlay upper directory on disk
instead of --volatile=overlay's tmpfs, and a launcher that boots systemd-nspawn again when it exits with 133, the
reboot status, as systemd-nspawn@.service's RestartForceExitStatus=133 does). ansible.builtin.reboot reboots
systemd in the host ("Rebooting." on its console), nspawn exits with 133, the host boots again with a new boot_id and
everything apt installed, the stand-in unit above "loads" the new module, sshd comes back on the same address, and
the role goes on to its verification.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys
import textwrap

import pytest

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, TESTS)
import nvidia_fleet_host as th  # noqa: E402  pylint: disable=wrong-import-position

KERNEL = th.KERNEL

DEB_V = '535.261.03'
DEB_R = DEB_V + '-1'
UBU_V = '535.309.01'
UBU_R = UBU_V + '-0ubuntu0.24.04.2'
DEB_SECURITY_R = UBU_V + '-0+deb12u1'
CUDA_NEW_V = '590.48.01'
CUDA_NEW_R = CUDA_NEW_V + '-1'

DRIVER = ['libcuda1', 'libnvidia-ml1', 'libnvidia-pkcs11-openssl3', 'libnvidia-ptxjitcompiler1', 'nvidia-alternative', 'nvidia-smi']
HELPERS = ['update-glx', 'glx-alternative-mesa', 'glx-alternative-nvidia', 'glx-diversions', 'nvidia-installer-cleanup',
           'nvidia-legacy-check', 'nvidia-support', 'pci.ids', 'libpci3', 'pciutils', 'kmod', 'libkmod2']
PYTHON_APT = ['python3-apt', 'python-apt-common', 'distro-info-data']
# Only their files are used (inside the Ubuntu stand-ins); they are not served.
EXTRACT = ['libcuda1', 'libnvidia-ml1', 'libnvidia-ptxjitcompiler1', 'nvidia-smi']

UBUNTU_OS_RELEASE = textwrap.dedent('''\
    PRETTY_NAME="Ubuntu 24.04.1 LTS"
    NAME="Ubuntu"
    VERSION_ID="24.04"
    VERSION="24.04.1 LTS (Noble Numbat)"
    VERSION_CODENAME=noble
    ID=ubuntu
    ID_LIKE=debian
    HOME_URL="https://www.ubuntu.com/"
    SUPPORT_URL="https://help.ubuntu.com/"
    BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
    PRIVACY_POLICY_URL="https://www.ubuntu.com/legal/terms-and-policies/privacy-policy"
    UBUNTU_CODENAME=noble
    LOGO=ubuntu-logo
    ''')

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='systemd-nspawn test hosts need root'),
    pytest.mark.skipif(not all(shutil.which(tool) for tool in ('systemd-nspawn', 'dpkg-scanpackages', 'dpkg-deb', 'as', 'objcopy')),
                       reason='needs systemd-container, dpkg-dev and binutils (tests/infra/fleet.sh deps; apt-get install dpkg-dev binutils)'),
    pytest.mark.xdist_group('test_nvidia_role_apt'),  # the file on one worker: its module-scoped set-up runs once (docs/testing.md)
]


# ---------------------------------------------------------------------------------------------------------------
# Stand-in packages
# ---------------------------------------------------------------------------------------------------------------

def build_deb(out, name, version, depends=(), provides=(), description='', files=None, links=None, postinst=None):
    """A binary package NAME_VERSION_amd64.deb in OUT with FILES ({path in package: source path}) and LINKS."""
    root = os.path.join(str(out), '.build', '%s_%s' % (name, version))
    os.makedirs(os.path.join(root, 'DEBIAN'))
    for dest, source in (files or {}).items():
        target = os.path.join(root, dest.lstrip('/'))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(source, target)
    for dest, target in (links or {}).items():
        path = os.path.join(root, dest.lstrip('/'))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.symlink(target, path)
    doc = os.path.join(root, 'usr', 'share', 'doc', name)
    os.makedirs(doc)
    with open(os.path.join(doc, 'README.llmops-standin'), 'w', encoding='utf-8') as handle:
        handle.write('Stand-in built by tests/integration/test_nvidia_role_apt.py: real package name, version and dependency shape.\n')
    control = ['Package: %s' % name, 'Version: %s' % version, 'Architecture: amd64', 'Maintainer: llmops.sglang tests <tests@invalid>',
               'Section: restricted/libs', 'Priority: optional']
    if depends:
        control.append('Depends: %s' % ', '.join(depends))
    if provides:
        control.append('Provides: %s' % ', '.join(provides))
    control.append('Description: %s' % (description or name))
    control.append(' Stand-in for tests of llmops.sglang (not the real package).')
    with open(os.path.join(root, 'DEBIAN', 'control'), 'w', encoding='utf-8') as handle:
        handle.write('\n'.join(control) + '\n')
    if postinst:
        path = os.path.join(root, 'DEBIAN', 'postinst')
        with open(path, 'w', encoding='utf-8') as handle:
            handle.write('#!/bin/sh\nset -e\n%s\n' % postinst)
        os.chmod(path, 0o755)
    built = th.run(['dpkg-deb', '--root-owner-group', '-Zgzip', '-z1', '--build', root,
                    os.path.join(str(out), '%s_%s_amd64.deb' % (name, version))])
    assert built.returncode == 0, built.stderr
    shutil.rmtree(root)


def kernel_package(out, work, name, version, flavor, depends=()):
    upstream = version.split('-', 1)[0]
    build_deb(out, name, version, depends=['kmod'] + list(depends),
              description='NVIDIA kernel module (%s, DKMS-built module file)' % flavor,
              files={'/lib/modules/%s/updates/dkms/nvidia.ko' % KERNEL: th.nvidia_ko(work, upstream, flavor)},
              postinst='if [ "$1" = configure ]; then depmod -a %s; fi' % KERNEL)


def ubuntu_standins(out, work, extracted):
    """The Ubuntu archive's 535-server packages (see the module docstring)."""
    libdir = '/usr/lib/x86_64-linux-gnu'
    libs, links = {}, {}
    for path in sorted(glob.glob(os.path.join(extracted, 'usr', 'lib', 'x86_64-linux-gnu', 'nvidia', 'current', 'lib*.so.%s' % UBU_V))):
        base = os.path.basename(path)
        libs['%s/%s' % (libdir, base)] = path
        links['%s/%s' % (libdir, base.replace('.so.%s' % UBU_V, '.so.1'))] = base
    assert len(libs) == 3, libs
    build_deb(out, 'libnvidia-compute-535-server', UBU_R, depends=['libc6'], description='NVIDIA libcompute package',
              files=libs, links=links, postinst='if [ "$1" = configure ]; then ldconfig; fi')
    build_deb(out, 'nvidia-kernel-common-535-server', UBU_R, provides=['nvidia-kernel-common-535-server-%s' % UBU_V],
              description='Shared files used with the kernel module')
    build_deb(out, 'nvidia-utils-535-server', UBU_R,
              depends=['libnvidia-compute-535-server (>= %s)' % UBU_V, 'nvidia-kernel-common-535-server-%s' % UBU_V],
              description='NVIDIA Server Driver support binaries',
              files={'/usr/bin/nvidia-smi': os.path.join(extracted, 'usr', 'lib', 'nvidia', 'current', 'nvidia-smi')})
    for suffix, flavor in (('', 'proprietary'), ('-open', 'open')):
        kernel_package(out, work, 'nvidia-dkms-535-server' + suffix, UBU_R, flavor,
                       depends=['nvidia-kernel-common-535-server (>= %s)' % UBU_V])
        build_deb(out, 'nvidia-headless-no-dkms-535-server' + suffix, UBU_R,
                  depends=['libnvidia-compute-535-server (= %s)' % UBU_R, 'nvidia-kernel-common-535-server (= %s)' % UBU_R],
                  description='NVIDIA headless metapackage - no DKMS')
        build_deb(out, 'nvidia-headless-535-server' + suffix, UBU_R,
                  depends=['nvidia-headless-no-dkms-535-server%s (= %s)' % (suffix, UBU_R), 'nvidia-dkms-535-server%s (= %s)' % (suffix, UBU_R)],
                  description='NVIDIA headless metapackage')


def cuda_and_debian_standins(out, work):
    """NVIDIA's CUDA repository (Debian 12) names before and from R590, and Debian's own kernel-side names."""
    kernel_package(out, work, 'nvidia-kernel-dkms', DEB_R, 'proprietary')
    kernel_package(out, work, 'nvidia-kernel-open-dkms', DEB_R, 'open')    # CUDA repository's name
    kernel_package(out, work, 'nvidia-open-kernel-dkms', DEB_R, 'open')    # Debian's name
    for release in (DEB_R, CUDA_NEW_R):
        if release == CUDA_NEW_R:
            kernel_package(out, work, 'nvidia-kernel-dkms', release, 'proprietary')
            kernel_package(out, work, 'nvidia-kernel-open-dkms', release, 'open')
            for name in ('libcuda1', 'libnvidia-ml1', 'nvidia-smi'):
                build_deb(out, name, release, description='NVIDIA %s (empty stand-in: no real %s files here)' % (name, CUDA_NEW_V))
        build_deb(out, 'nvidia-driver-cuda', release, depends=['%s (= %s)' % (name, release) for name in ('libcuda1', 'libnvidia-ml1', 'nvidia-smi')],
                  description='NVIDIA driver CUDA integration components')
        suffix = '-535' if release == DEB_R else ''
        build_deb(out, 'cuda-drivers' + suffix, release, depends=['nvidia-driver-cuda (= %s)' % release, 'nvidia-kernel-dkms (= %s)' % release],
                  description='CUDA Driver meta-package, branch-specific')
        build_deb(out, 'nvidia-open' + suffix, release, depends=['nvidia-driver-cuda (= %s)' % release, 'nvidia-kernel-open-dkms (= %s)' % release],
                  description='NVIDIA open kernel module driver meta-package')


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    work = tmp_path_factory.mktemp('nvidia-role-apt')
    served = work / 'repo'
    served.mkdir()
    extract_dir = work / 'extract-debs'
    extract_dir.mkdir()
    specs = ['%s=%s' % (name, DEB_R) for name in DRIVER] + HELPERS + PYTHON_APT
    env = th.apt_env(work)
    error = (th.apt_update(env) or th.apt_download(env, specs, served)
             or th.apt_download(env, ['%s=%s' % (name, DEB_SECURITY_R) for name in EXTRACT], extract_dir))
    if error:
        pytest.skip('cannot download Debian packages from deb.debian.org: %s' % error)
    extracted = str(work / 'extracted')
    for deb in glob.glob(str(extract_dir / '*.deb')):
        done = th.run(['dpkg-deb', '-x', deb, extracted])
        assert done.returncode == 0, done.stderr
    ubuntu_standins(served, work, extracted)
    cuda_and_debian_standins(served, work)
    shutil.rmtree(served / '.build', ignore_errors=True)
    th.flat_repo(served)
    deps = th.run([th.FLEET, 'deps'])
    assert deps.returncode == 0, deps.stderr[-2000:]
    state = {'dir': served, 'work': work, 'server': th.HubServer(served), 'nodes': []}
    try:
        yield state
    finally:
        state['server'].stop()
        for name in state['nodes']:
            th.down(name)


def host(repo, letter, ubuntu=False, persist=False, name=None):
    """A fresh test host using only the hub repository; python3-apt (the apt module's need) installed from it.

    PERSIST: `fleet.sh up --persist` (LLMOPS_FLEET_PERSIST=1): the host keeps its files across reboots and comes back.
    NAME: the host's name (default: LLMOPS_TEST_HOST_PREFIX and LETTER, a session's own names on a shared machine,
    else from LETTER and the test's process id).
    """
    prefix = os.environ.get('LLMOPS_TEST_HOST_PREFIX')
    name = name or (prefix + letter if prefix else '%s%s%d' % ('nvrb' if persist else 'nvapt', letter, os.getpid() % 10000))
    repo['nodes'].append(name)
    with pytest.MonkeyPatch.context() as patch:
        if persist:
            patch.setenv('LLMOPS_FLEET_PERSIST', '1')
        node = th.boot(name, repo['work'])
    # The hub bridge exists once a host is up; start() serves the repository there (once).
    server = repo['server'].start()
    command = ('rm -f /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; '
               'echo "deb [trusted=yes] %s/ ./" > /etc/apt/sources.list.d/llmops-nvidia-test.list; apt-get update -q '
               '&& DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends %s' % (server.url, ' '.join(PYTHON_APT)))
    if ubuntu:
        command += ' && rm -f /etc/os-release && cat > /etc/os-release <<"EOF"\n%sEOF' % UBUNTU_OS_RELEASE
    prepared = th.ssh(node, command)
    assert prepared.returncode == 0, prepared.stdout[-3000:] + prepared.stderr[-3000:]
    return node


def run_role(node, role_vars, tag):
    """The role in a block; the result (or the failed task and its result) is written to a JSON file on the controller."""
    out = os.path.join(node['work'], 'result-%s-%s.json' % (node['name'], tag))
    playbook = os.path.join(node['work'], 'role-%s.yml' % node['name'])
    with open(playbook, 'w', encoding='utf-8') as handle:
        handle.write(textwrap.dedent('''\
            - hosts: all
              gather_facts: true
              tasks:
                - name: Run the role and record what happened
                  block:
                    - name: Install the NVIDIA driver
                      ansible.builtin.include_role:
                        name: llmops.sglang.nvidia_driver
                    - name: Write the result
                      ansible.builtin.copy:
                        content: "{{ {'failed': false, 'match': nvidia_driver_result, 'facts': ansible_facts.distribution} | to_json }}"
                        dest: "{{ result_file }}"
                        mode: "0600"
                      delegate_to: localhost
                      # Test bookkeeping, not a change on the host: the recap counts only the role.
                      changed_when: false
                  rescue:
                    - name: Write the failure
                      ansible.builtin.copy:
                        content: "{{ {'failed': true, 'task': ansible_failed_task.name, 'result': ansible_failed_result} | to_json }}"
                        dest: "{{ result_file }}"
                        mode: "0600"
                      delegate_to: localhost
            '''))
    vars_file = os.path.join(node['work'], 'vars-%s-%s.json' % (node['name'], tag))
    with open(vars_file, 'w', encoding='utf-8') as handle:
        json.dump(dict(role_vars, result_file=out, nvidia_driver_repo_manage=False), handle)
    if os.path.exists(out):
        os.unlink(out)
    proc = th.run_playbook(node, playbook, extra=['-e', '@' + vars_file])
    recap = ([line for line in proc.stdout.splitlines() if re.match(r'^%s\s+:\s+ok=' % re.escape(node['name']), line)] or [''])[-1]
    assert proc.returncode == 0 and os.path.exists(out), proc.stdout[-5000:] + proc.stderr[-3000:]
    with open(out, encoding='utf-8') as handle:
        result = json.load(handle)
    result['stdout'] = proc.stdout
    result['recap'] = recap
    # The role must run clean on ansible-core 2.21 (no deprecated behaviour that 2.23 removes).
    assert '[DEPRECATION WARNING]' not in proc.stdout + proc.stderr, (proc.stdout + proc.stderr)[-3000:]
    return result


def packages(node, names):
    out = th.ssh(node, "dpkg-query -W -f '${Package} ${Version} ${db:Status-Abbrev}\\n' %s 2>/dev/null; echo HOLDS; apt-mark showhold"
                 % ' '.join(names)).stdout
    listing, holds = out.split('HOLDS\n')
    versions = {}
    for line in listing.strip().splitlines():
        name, version, status = line.split(' ', 2)
        if status[1:2] == 'i':  # ii, or hi when held
            versions[name] = version
    return versions, set(holds.split())


def host_text(node, command):
    done = th.ssh(node, command)
    return done.stdout.strip()


def pin_file(node):
    return host_text(node, 'cat /etc/apt/preferences.d/llmops-nvidia-driver 2>/dev/null || echo ABSENT')


# Recorded /proc/driver/nvidia/version banners (tests/fixtures/nvidia, sources in its README) and the version in them.
BANNERS = {
    'proprietary': ('debian-bookworm-smi-525-module-520', '520.56.06'),
    'open': ('ubuntu2404-open-565-proc-only', '565.57.01'),
}


def banner(version, flavor):
    """A recorded /proc/driver/nvidia/version banner of FLAVOR with VERSION in it."""
    case, recorded = BANNERS[flavor]
    with open(os.path.join(th.CORPUS, case, 'proc_driver_nvidia_version.txt'), encoding='utf-8') as handle:
        return handle.read().replace(recorded, version)


def set_module(node, version, flavor):
    """Stand-in for the loaded module: a recorded banner of FLAVOR carrying VERSION at /proc/driver/nvidia/version in the host."""
    text = banner(version, flavor)
    done = th.nsenter(node, 'mountpoint -q /proc/driver || mount -t tmpfs -o mode=0755 tmpfs /proc/driver; mkdir -p /proc/driver/nvidia; '
                            'cat > /proc/driver/nvidia/version', stdin=text)
    assert done.returncode == 0, done.stderr


MODULE_UNIT = 'llmops-standin-nvidia-module.service'
MODULE_LOADER = textwrap.dedent('''\
    #!/bin/sh
    # llmops.sglang test stand-in for "the kernel loads the NVIDIA module at boot" (a container cannot load a module):
    # publishes the recorded /proc/driver/nvidia/version banner for the module file that is installed.
    set -eu
    version=$(modinfo -F version nvidia 2>/dev/null) || version=
    if [ -z "$version" ]; then
        echo "no NVIDIA module file (modinfo nvidia): nothing loaded"
        exit 0
    fi
    case $(modinfo -F license nvidia) in
        "Dual MIT/GPL") flavor=open ;;
        *) flavor=proprietary ;;
    esac
    mountpoint -q /proc/driver || mount -t tmpfs -o mode=0755 tmpfs /proc/driver
    mkdir -p /proc/driver/nvidia
    sed "s/@VERSION@/$version/g" "/usr/local/share/llmops-standin/nvidia-version-$flavor.txt" > /proc/driver/nvidia/version
    echo "loaded NVIDIA kernel module $version ($flavor) from $(modinfo -F filename nvidia)"
    ''')
MODULE_UNIT_TEXT = textwrap.dedent('''\
    [Unit]
    Description=llmops.sglang test stand-in: the kernel loads the installed NVIDIA module
    # Where a real module load happens at boot (systemd-modules-load.service): before sysinit.target, so before sshd.
    DefaultDependencies=no
    After=local-fs.target
    Before=sysinit.target shutdown.target
    Conflicts=shutdown.target

    [Service]
    Type=oneshot
    RemainAfterExit=yes
    ExecStart=/usr/local/sbin/llmops-standin-nvidia-module

    [Install]
    WantedBy=sysinit.target
    ''')


def install_module_loader(node):
    """The boot-time stand-in for the kernel's module load (module docstring): enabled for the next boot, run now."""
    templates = ''.join('cat > /usr/local/share/llmops-standin/nvidia-version-%s.txt <<"EOF"\n%sEOF\n' % (flavor, banner('@VERSION@', flavor))
                        for flavor in BANNERS)
    done = th.ssh(node, 'set -e; mkdir -p /usr/local/share/llmops-standin /usr/local/sbin\n%s'
                        'cat > /usr/local/sbin/llmops-standin-nvidia-module <<"EOF"\n%sEOF\n'
                        'chmod 0755 /usr/local/sbin/llmops-standin-nvidia-module\n'
                        'cat > /etc/systemd/system/%s <<"EOF"\n%sEOF\n'
                        'systemctl daemon-reload; systemctl enable --now %s' % (templates, MODULE_LOADER, MODULE_UNIT, MODULE_UNIT_TEXT, MODULE_UNIT))
    assert done.returncode == 0, done.stdout + done.stderr


def nspawn_running(node):
    """Whether the host's systemd-nspawn process (PID recorded by fleet.sh) is still there."""
    try:
        with open(os.path.join(th.fleet_dir(), 'nodes', node['name'] + '.pid'), encoding='utf-8') as handle:
            pid = handle.read().strip()
        with open('/proc/%s/comm' % pid, encoding='utf-8') as handle:
            return handle.read().strip() == 'systemd-nspawn'
    except OSError:
        return False


def console_log(node):
    """The host's console (what systemd in the container printed), kept by fleet.sh."""
    with open(os.path.join(th.fleet_dir(), 'nodes', node['name'] + '.log'), encoding='utf-8', errors='replace') as handle:
        return handle.read()


BASE = {'nvidia_driver_kernel_headers': False, 'nvidia_driver_reboot': False}


# ---------------------------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------------------------

def test_ubuntu_archive_open_server_exact_pin(repo):
    """source auto on Ubuntu -> Ubuntu archive, -server, -open; exact pin, holds, loaded module already that version."""
    node = host(repo, 'u', ubuntu=True)
    set_module(node, UBU_V, 'open')
    boot_id = host_text(node, 'cat /proc/sys/kernel/random/boot_id')
    role_vars = dict(BASE, nvidia_driver_version=UBU_V, nvidia_driver_flavor='open', nvidia_driver_gpu_arch='hopper',
                     nvidia_driver_reboot=True)
    result = run_role(node, role_vars, 'first')
    assert result['failed'] is False, json.dumps(result.get('result'))[-3000:] + result['stdout'][-3000:]
    assert result['facts'] == 'Ubuntu'
    assert 'from ubuntu' in result['stdout'] and 'open kernel modules' in result['stdout']
    match = result['match']
    assert match['match'] is True and match['kernel_module']['version'] == UBU_V and match['kernel_module']['flavor'] == 'open'
    assert match['userspace']['libraries'] == {'libcuda.so': UBU_V, 'libnvidia-ml.so': UBU_V, 'libnvidia-ptxjitcompiler.so': UBU_V}
    versions, holds = packages(node, ['nvidia-headless-535-server-open', 'nvidia-headless-no-dkms-535-server-open', 'nvidia-dkms-535-server-open',
                                      'nvidia-utils-535-server', 'libnvidia-compute-535-server', 'nvidia-kernel-common-535-server',
                                      'nvidia-headless-535-server', 'nvidia-dkms-535-server'])
    assert versions == {name: UBU_R for name in ('nvidia-headless-535-server-open', 'nvidia-headless-no-dkms-535-server-open',
                                                 'nvidia-dkms-535-server-open', 'nvidia-utils-535-server', 'libnvidia-compute-535-server',
                                                 'nvidia-kernel-common-535-server')}
    # The named packages and every user-space package the module counts are held; kernel-side ones are not its business.
    assert {'nvidia-headless-535-server-open', 'nvidia-utils-535-server', 'libnvidia-compute-535-server',
            'nvidia-headless-no-dkms-535-server-open'} <= holds
    assert 'Pin: version %s-*' % UBU_V in pin_file(node) and 'Pin-Priority: 1001' in pin_file(node)
    assert host_text(node, 'modinfo -F version nvidia; modinfo -F license nvidia').splitlines() == [UBU_V, 'Dual MIT/GPL']
    # The module on disk is the loaded one: no reboot although nvidia_driver_reboot is true.
    assert 'A reboot is pending' not in result['stdout']
    assert nspawn_running(node) and host_text(node, 'cat /proc/sys/kernel/random/boot_id') == boot_id

    second = run_role(node, role_vars, 'second')
    assert second['failed'] is False and 'changed=0' in second['recap'], second['recap'] + second['stdout'][-3000:]


def test_cuda_repo_branch_names_no_module_loaded_reboot_pending(repo):
    """source cuda, R535 (branch in the names), proprietary by the branch rule; no module loaded -> reboot pending."""
    node = host(repo, 'c', name=th.check_host_name(1))
    role_vars = dict(BASE, nvidia_driver_source='cuda', nvidia_driver_version=DEB_V, nvidia_driver_gpu_arch='hopper')
    result = run_role(node, role_vars, 'first')
    # Installed, then refused: the module file on disk is not loaded, and the role may not reboot.
    assert result['failed'] is True and result['task'] == 'Stop when the driver cannot be installed as asked or proved to match', result
    assert 'a reboot is pending' in result['result']['msg'] and 'nvidia_driver_reboot is false' in result['result']['msg']
    assert 'loaded module is none' in result['result']['msg'], result['result']['msg']
    assert 'A reboot is pending: the NVIDIA kernel module on disk is %s, the loaded module is none' % DEB_V in result['stdout']
    versions, holds = packages(node, ['cuda-drivers-535', 'nvidia-driver-cuda', 'nvidia-kernel-dkms', 'libcuda1', 'libnvidia-ml1', 'nvidia-smi',
                                      'nvidia-open-535', 'cuda-drivers'])
    assert versions == {name: DEB_R for name in ('cuda-drivers-535', 'nvidia-driver-cuda', 'nvidia-kernel-dkms', 'libcuda1', 'libnvidia-ml1',
                                                 'nvidia-smi')}
    assert {'cuda-drivers-535', 'nvidia-driver-cuda', 'libcuda1', 'libnvidia-ml1', 'nvidia-smi'} <= holds
    assert 'nvidia-kernel-dkms' not in holds
    assert 'Pin: version %s-*' % DEB_V in pin_file(node)
    assert host_text(node, 'modinfo -F license nvidia') == 'NVIDIA'

    # After the reboot the new module is loaded: nothing to install, and the verification passes.
    set_module(node, DEB_V, 'proprietary')
    second = run_role(node, role_vars, 'after-reboot')
    assert second['failed'] is False, second.get('result')
    assert 'changed=0' in second['recap'], second['recap'] + second['stdout'][-3000:]
    assert second['match']['match'] is True and second['match']['kernel_module']['source'] == '/proc/driver/nvidia/version'


def test_cuda_repo_from_r590_blackwell_open_reboots(repo):
    """source cuda, branch 590 (no branch in the names), Blackwell forces open; nvidia_driver_reboot=true reboots the host
    for real, the new module is loaded at boot, and the role goes on to verify; a second run changes and reboots nothing."""
    node = host(repo, 'r', persist=True)
    install_module_loader(node)
    # No module file yet, so no module loaded: the install is a first one.
    assert host_text(node, 'cat /proc/driver/nvidia/version 2>/dev/null || echo NONE') == 'NONE'
    boot_id = host_text(node, 'cat /proc/sys/kernel/random/boot_id')
    role_vars = dict(BASE, nvidia_driver_source='cuda', nvidia_driver_branch='590', nvidia_driver_gpu_arch='blackwell',
                     nvidia_driver_reboot=True, nvidia_driver_reboot_timeout=180)
    result = run_role(node, role_vars, 'first')
    assert result['failed'] is False, json.dumps(result.get('result'))[-3000:] + result['stdout'][-3000:]
    assert 'open kernel modules' in result['stdout'] and 'branch 590' in result['stdout']
    # The role rebooted (the kernel side changed: module file 590.48.01 on disk, none loaded), and did not merely say so.
    assert re.search(r'TASK \[[^]]*Reboot into the new kernel module\] \**\nchanged: \[%s\]' % node['name'], result['stdout']), result['stdout'][-3000:]
    assert 'A reboot is pending' not in result['stdout']
    log = console_log(node)
    assert log.count('Rebooting.') == 1 and log.count('rebooted (systemd-nspawn exit status 133): booting it again') == 1, log[-2000:]
    after = host_text(node, 'cat /proc/sys/kernel/random/boot_id')
    assert after and after != boot_id
    assert nspawn_running(node)
    # At boot the stand-in "kernel" loaded the module file apt installed; verify saw it and the user space match.
    assert 'NVIDIA kernel module %s and user space match' % CUDA_NEW_V in result['stdout']
    match = result['match']
    assert match['match'] is True, match
    assert match['kernel_module']['version'] == CUDA_NEW_V and match['kernel_module']['flavor'] == 'open'
    assert match['kernel_module']['source'] == '/proc/driver/nvidia/version'
    assert 'loaded NVIDIA kernel module %s (open)' % CUDA_NEW_V in host_text(node, 'journalctl -b -o cat -u %s' % MODULE_UNIT)
    # What apt installed and held survived the reboot.
    versions, holds = packages(node, ['nvidia-open', 'nvidia-driver-cuda', 'nvidia-kernel-open-dkms', 'libcuda1', 'nvidia-open-535', 'cuda-drivers'])
    assert versions == {name: CUDA_NEW_R for name in ('nvidia-open', 'nvidia-driver-cuda', 'nvidia-kernel-open-dkms', 'libcuda1')}
    assert {'nvidia-open', 'nvidia-driver-cuda', 'libcuda1'} <= holds
    assert host_text(node, 'modinfo -F version nvidia') == CUDA_NEW_V

    second = run_role(node, role_vars, 'second')
    assert second['failed'] is False, json.dumps(second.get('result'))[-3000:]
    assert 'changed=0' in second['recap'], second['recap'] + second['stdout'][-3000:]
    assert re.search(r'TASK \[[^]]*Reboot into the new kernel module\] \**\nskipping: \[%s\]' % node['name'], second['stdout']), second['stdout'][-3000:]
    assert second['match']['match'] is True
    assert host_text(node, 'cat /proc/sys/kernel/random/boot_id') == after
    assert console_log(node).count('Rebooting.') == 1


def test_cuda_repo_from_r590_packages_and_no_pin(repo):
    """The R590 names (nvidia-open, no branch) at the newest version, no exact pin file, holds; module loaded: no reboot."""
    node = host(repo, 'n')
    set_module(node, CUDA_NEW_V, 'open')
    role_vars = dict(BASE, nvidia_driver_source='cuda', nvidia_driver_branch='590', nvidia_driver_gpu_arch='blackwell')
    result = run_role(node, role_vars, 'first')
    assert result['failed'] is False, json.dumps(result.get('result'))[-3000:]
    versions, holds = packages(node, ['nvidia-open', 'nvidia-driver-cuda', 'nvidia-kernel-open-dkms', 'libcuda1', 'nvidia-open-535', 'cuda-drivers'])
    assert versions == {name: CUDA_NEW_R for name in ('nvidia-open', 'nvidia-driver-cuda', 'nvidia-kernel-open-dkms', 'libcuda1')}
    assert {'nvidia-open', 'nvidia-driver-cuda', 'libcuda1'} <= holds
    assert pin_file(node) == 'ABSENT'
    assert host_text(node, 'modinfo -F version nvidia') == CUDA_NEW_V


def test_debian_nonfree_open_headers_then_reboot_pending(repo):
    """source debian, open -> nvidia-open-kernel-dkms + libcuda1 libnvidia-ml1 nvidia-smi (real Debian user space)."""
    node = host(repo, 'd')
    set_module(node, '535.216.01', 'open')
    role_vars = dict(BASE, nvidia_driver_source='debian', nvidia_driver_version=DEB_V, nvidia_driver_flavor='open')

    # Default nvidia_driver_kernel_headers: this kernel has no headers package; the role says so and installs nothing.
    headers = run_role(node, dict(role_vars, nvidia_driver_kernel_headers=True), 'headers')
    assert headers['failed'] is True and headers['task'] == 'Explain the missing kernel headers', headers
    assert 'linux-headers-%s' % KERNEL in headers['result']['msg'] and 'nvidia_driver_kernel_headers to false' in headers['result']['msg']
    assert packages(node, ['libcuda1'])[0] == {}

    result = run_role(node, role_vars, 'first')
    assert result['failed'] is True and result['task'] == 'Stop when the driver cannot be installed as asked or proved to match', result
    msg = result['result']['msg']
    assert 'a reboot is pending' in msg and 'on disk is %s' % DEB_V in msg and 'loaded module is 535.216.01' in msg, msg
    versions, holds = packages(node, ['nvidia-open-kernel-dkms', 'libcuda1', 'libnvidia-ml1', 'nvidia-smi', 'nvidia-kernel-dkms'])
    assert versions == {name: DEB_R for name in ('nvidia-open-kernel-dkms', 'libcuda1', 'libnvidia-ml1', 'nvidia-smi')}
    assert {'libcuda1', 'libnvidia-ml1', 'nvidia-smi'} <= holds
    assert host_text(node, 'modinfo -F license nvidia') == 'Dual MIT/GPL'


def headers_repository(repo, node):
    """A second flat repository with a stand-in linux-headers-KERNEL, for this host only (the shared one lacks it: the
    missing-headers test needs that), so --check reaches the headers install's dry run."""
    served = repo['dir'] / 'headers-check'
    if not served.exists():
        served.mkdir()
        build_deb(served, 'linux-headers-%s' % KERNEL, '1', description='Header files for the running kernel (stand-in)')
        th.flat_repo(served)
    done = th.ssh(node, 'echo "deb [trusted=yes] %s/headers-check/ ./" > /etc/apt/sources.list.d/llmops-headers.list && apt-get update -q'
                  % repo['server'].url)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_check_mode_writes_nothing_and_says_what_the_apt_files_would_be(repo):
    """--check of source debian with its repository file and pin on a host with python3-apt and a kernel headers package
    to install: both files reported as created (with their diff), the headers as they would be installed, and nothing
    written anywhere on the host (no ~/.ansible/tmp from ansible.builtin.copy, no apt planner log from a dry run)."""
    node = host(repo, 'c', name=th.check_host_name(1))
    headers_repository(repo, node)
    th.temporary_files_to_run_user(node)
    role_vars = dict(BASE, nvidia_driver_source='debian', nvidia_driver_version=DEB_V, nvidia_driver_flavor='open',
                     nvidia_driver_repo_manage=True, nvidia_driver_kernel_headers=True)
    proc, written = th.run_role_check(node, role_vars)
    out = proc.stdout + proc.stderr
    assert written == [], 'written on the host by --check:\n%s\n%s' % ('\n'.join(written), out[-4000:])
    # both files reported as they would be written, in check mode
    for task, dest in (("Enable Debian's contrib, non-free and non-free-firmware components", 'llmops-nvidia-nonfree.sources'),
                       ('Pin every NVIDIA driver package to the version', 'llmops-nvidia-driver')):
        section = out.split('TASK [llmops.sglang.nvidia_driver : %s]' % task)[1].split('TASK [')[0]
        assert 'changed: [%s]' % node['name'] in section and dest in section, section
    assert 'Pin: version %s' % DEB_V in out, out[-4000:]
    # the headers install's dry run, in the plan step (ansible.builtin.apt's --simulate wrote /var/log/apt/eipp.log.xz)
    assert 'Kernel headers for the DKMS build: would install linux-headers-%s' % KERNEL in out, out[-4000:]
    assert host_text(node, 'ls -a /root; ls /etc/apt/preferences.d /etc/apt/sources.list.d').split().count('.ansible') == 0


def test_check_mode_without_python3_apt_says_so_first_and_writes_nothing(repo):
    """A fresh host without python3-apt: --check stops at the plan, before any apt task, naming python3-apt."""
    name = th.check_host_name(2)
    repo['nodes'].append(name)
    node = th.boot(name, repo['work'])
    assert th.ssh(node, 'dpkg-query -W python3-apt').returncode != 0
    th.temporary_files_to_run_user(node)
    proc, written = th.run_role_check(node, dict(BASE, nvidia_driver_source='debian', nvidia_driver_version=DEB_V, nvidia_driver_flavor='open',
                                                 nvidia_driver_repo_manage=True))
    out = proc.stdout + proc.stderr
    assert written == [], 'written on the host by --check:\n%s\n%s' % ('\n'.join(written), out[-4000:])
    assert proc.returncode == 2, out[-4000:]
    assert 'needs python3-apt, which is not installed' in out and 'Nothing was changed' in out, out[-4000:]
    assert 'ansible.builtin.apt' in out and "Enable Debian's contrib" not in out, out[-4000:]
    assert 'python3-apt must be installed to use check mode' not in out, out[-4000:]
