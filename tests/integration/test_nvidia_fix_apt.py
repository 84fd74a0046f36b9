# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""nvidia_driver_match fix=true with real apt on a real systemd test host.

What is real:

- The test host is a systemd-nspawn container booted by tests/infra/fleet.sh (systemd as PID 1,
  Debian bookworm), reached by ansible-playbook over real SSH.  The module detects it as a
  container (/run/systemd/container = systemd-nspawn), where installing user space is the fix.
- The packages are Debian bookworm's own NVIDIA 535 user space (libcuda1, libnvidia-ml1, nvidia-smi,
  nvidia-alternative, libnvidia-ptxjitcompiler1, libnvidia-pkcs11-openssl3) in both versions Debian
  ships, 535.309.01-0+deb12u1 (bookworm-security) and 535.261.03-1 (bookworm), plus their helper
  dependencies and python3-apt, downloaded on the controller with apt-get download (a private apt
  configuration) and served to the host as a flat apt repository (dpkg-scanpackages) on the fleet's hub
  address, on a port the kernel picks: the test hosts have no route out.  apt, dpkg, apt-mark in the host
  do the work for real.  The set-up helpers are tests/nvidia_fleet_host.py.

What stands in: the loaded kernel module.  /proc/driver/nvidia/version inside the host is a tmpfs
file (mounted in the host's mount namespace with nsenter) holding the corpus' proprietary banner with
the version under test (tests/nvidia_fleet_host.py set_module).

Scenario: the host's user space is 535.309.01 while the "module" is 535.261.03 (a container whose
host driver is older).  Check mode reports the change and the diff; fix installs the 535.261.03-1
pins and holds them; a second run changes nothing; then the module moves to 535.309.01 while one
of the needed .deb files is missing from the repository: apt fails to fetch, and the previous
packages and holds are still in place.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvidia_fleet_host as fh  # noqa: E402  pylint: disable=wrong-import-position

OLD, NEW = '535.261.03-1', '535.309.01-0+deb12u1'
DRIVER = ['libcuda1', 'libnvidia-ml1', 'libnvidia-pkcs11-openssl3', 'libnvidia-ptxjitcompiler1', 'nvidia-alternative', 'nvidia-smi']
HELPERS = ['update-glx', 'glx-alternative-mesa', 'glx-alternative-nvidia', 'glx-diversions', 'nvidia-installer-cleanup',
           'nvidia-legacy-check', 'nvidia-support', 'pci.ids', 'libpci3', 'pciutils']
# ansible.builtin.apt (used by the role) needs python3-apt on the host; the test host cannot reach Debian.
PYTHON_APT = ['python3-apt', 'python-apt-common', 'distro-info-data']

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='systemd-nspawn test hosts need root'),
    pytest.mark.skipif(not shutil.which('systemd-nspawn') or not shutil.which('dpkg-scanpackages'),
                       reason='needs systemd-container and dpkg-dev (run tests/infra/fleet.sh deps; apt-get install dpkg-dev)'),
    pytest.mark.xdist_group('test_nvidia_fix_apt'),  # the file on one worker: its module-scoped set-up runs once (docs/testing.md)
]


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    """Download the real Debian packages and serve them as a flat repository on the hub address."""
    work = tmp_path_factory.mktemp('nvidia-fix')
    served = work / 'repo'
    served.mkdir()
    specs = ['%s=%s' % (name, version) for name in DRIVER for version in (OLD, NEW)] + HELPERS + PYTHON_APT
    env = fh.apt_env(work)
    error = fh.apt_update(env) or fh.apt_download(env, specs, served)
    if error:
        pytest.skip('cannot download Debian packages from deb.debian.org: %s' % error)
    fh.flat_repo(served)
    deps = fh.run([fh.FLEET, 'deps'])
    assert deps.returncode == 0, deps.stderr[-2000:]
    state = {'dir': served, 'work': work, 'server': fh.HubServer(served), 'nodes': []}
    try:
        yield state
    finally:
        state['server'].stop()
        for name in state['nodes']:
            fh.down(name)


def boot(repo, name, preinstall):
    """A test host whose only apt source is the hub repository, with PREINSTALL installed from it."""
    repo['nodes'].append(name)
    node = dict(fh.boot(name, repo['work']), repo=repo)
    # The hub bridge exists once a host is up; start() serves the repository there (once).
    url = repo['server'].start().url
    command = ('rm -f /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; '
               'echo "deb [trusted=yes] %s/ ./" > /etc/apt/sources.list.d/llmops-nvidia-test.list; apt-get update -q' % url)
    if preinstall:
        command += ' && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ' + ' '.join(preinstall)
    prepare = fh.ssh(node, command)
    assert prepare.returncode == 0, prepare.stdout[-3000:] + prepare.stderr[-3000:]
    return node


@pytest.fixture
def host(repo):
    return boot(repo, 'nvfix%d' % (os.getpid() % 100000), ['%s=%s' % (pkg, NEW) for pkg in DRIVER])


@pytest.fixture
def empty_host(repo):
    return boot(repo, 'nvrole%d' % (os.getpid() % 100000), PYTHON_APT)


def installed(node):
    out = fh.ssh(node, "dpkg-query -W -f '${Package} ${Version}\\n' %s; echo HOLDS; apt-mark showhold" % ' '.join(DRIVER)).stdout
    versions, holds = out.split('HOLDS\n')
    return dict(line.split(' ', 1) for line in versions.strip().splitlines()), sorted(holds.split())


def run_fix(node, check_mode=False):
    return fh.run_match(node, {'fix': True}, check_mode=check_mode)


def test_fix_with_real_apt(host):
    version_old = OLD.split('-', maxsplit=1)[0]
    fh.set_module(host, version_old)
    before, holds = installed(host)
    assert set(before.values()) == {NEW} and holds == []

    # Check mode: reports the change and the diff, installs nothing.
    result = run_fix(host, check_mode=True)
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is True
    assert result['in_container'] is True and result['container_kind'] == 'systemd-nspawn'
    assert result['kernel_module']['version'] == version_old
    assert sorted(result['fix_packages']) == sorted('%s=%s' % (pkg, OLD) for pkg in DRIVER)
    assert 'user space: 535.309.01' in result['diff']['before'] and 'user space: %s' % version_old in result['diff']['after']
    assert installed(host)[0] == before

    # Fix: exact pins, held.
    result = run_fix(host)
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is True and result['match'] is True
    versions, holds = installed(host)
    assert set(versions.values()) == {OLD}
    assert holds == sorted(DRIVER)
    assert result['userspace']['libraries']['libnvidia-ml.so'] == version_old

    # Second run: nothing to do.
    result = run_fix(host)
    assert result['changed'] is False and result['match'] is True
    assert 'fix_result' not in result

    # The module moves on, but a .deb of the target version is gone from the repository: apt fails to
    # fetch before dpkg runs, and the previous packages and holds stay.
    fh.set_module(host, NEW.split('-', maxsplit=1)[0])
    assert fh.ssh(host, 'apt-get clean').returncode == 0
    missing = [name for name in os.listdir(host['repo']['dir']) if name.startswith('nvidia-smi_535.309.01')]
    assert len(missing) == 1
    aside = host['repo']['work'] / missing[0]
    os.rename(host['repo']['dir'] / missing[0], aside)
    try:
        result = run_fix(host)
    finally:
        os.rename(aside, host['repo']['dir'] / missing[0])
    assert result['failed'] is True
    assert 'The previous packages are in place' in result['msg']
    assert result['restored']['ok'] is True
    assert result['rc'] != 0
    versions, holds = installed(host)
    assert set(versions.values()) == {OLD}
    assert holds == sorted(DRIVER)


def test_role_userspace_only_installs_the_loaded_modules_version(empty_host):
    """llmops.sglang.nvidia_driver in user-space-only mode, Debian source, on a host without NVIDIA packages."""
    fh.set_module(empty_host, OLD.split('-', maxsplit=1)[0])
    out = empty_host['repo']['work'] / 'role-result.json'
    playbook = empty_host['repo']['work'] / 'role.yml'
    playbook.write_text(textwrap.dedent('''\
        - hosts: all
          gather_facts: true
          roles:
            - role: llmops.sglang.nvidia_driver
              vars:
                nvidia_driver_userspace_only: true
                nvidia_driver_source: debian
                # The test host's apt source is the local repository written by the test.
                nvidia_driver_repo_manage: false
          post_tasks:
            - name: Write the final check
              ansible.builtin.copy:
                content: "{{ nvidia_driver_result | to_json }}"
                dest: %s
                mode: "0600"
              delegate_to: localhost
              # Only the role's tasks count in the recap (the result says changed: true after a run that installed).
              changed_when: false
        ''') % out)
    first = fh.run_playbook(empty_host, playbook)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result['match'] is True
    assert result['kernel_module']['version'] == OLD.split('-', maxsplit=1)[0]
    versions, holds = installed(empty_host)
    # libcuda1, libnvidia-ml1, nvidia-smi were named; their "=" dependencies came at the same version.
    assert set(versions.values()) == {OLD}
    assert {'libcuda1', 'libnvidia-ml1', 'nvidia-smi'} <= set(holds)
    # Idempotent: a second run changes nothing.
    second = fh.run_playbook(empty_host, playbook)
    assert second.returncode == 0, second.stdout[-4000:]
    assert fh.recap_changed(second.stdout, empty_host['name']) == 0, second.stdout[-3000:]
