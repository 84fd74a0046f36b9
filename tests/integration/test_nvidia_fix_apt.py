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
  dependencies, downloaded on the controller with apt-get download and served to the host as a flat
  apt repository (dpkg-scanpackages) on the fleet's hub address: the test hosts have no route out.
  apt, dpkg, apt-mark in the host do the work for real.

What stands in: the loaded kernel module.  /proc/driver/nvidia/version inside the host is a tmpfs
file (mounted in the host's mount namespace with nsenter) holding the corpus' proprietary banner with
the version under test.

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
import subprocess
import sys
import textwrap
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
FLEET = os.path.join(REPO, 'tests', 'infra', 'fleet.sh')
CORPUS = os.path.join(REPO, 'tests', 'fixtures', 'nvidia')
COLLECTIONS = os.environ.get('LLMOPS_COLLECTIONS_PATH', '/tmp/coll')
ANSIBLE_PLAYBOOK = os.environ.get('ANSIBLE_PLAYBOOK', os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'))
FLEET_DIR = os.environ.get('LLMOPS_FLEET_DIR', '/var/tmp/llmops-fleet')
HUB, HUB_ADDR, PORT = 'llmops-hub', '10.213.0.1', int(os.environ.get('LLMOPS_NVIDIA_REPO_PORT', '18535'))
OLD, NEW = '535.261.03-1', '535.309.01-0+deb12u1'
DRIVER = ['libcuda1', 'libnvidia-ml1', 'libnvidia-pkcs11-openssl3', 'libnvidia-ptxjitcompiler1', 'nvidia-alternative', 'nvidia-smi']
HELPERS = ['update-glx', 'glx-alternative-mesa', 'glx-alternative-nvidia', 'glx-diversions', 'nvidia-installer-cleanup',
           'nvidia-legacy-check', 'nvidia-support', 'pci.ids', 'libpci3', 'pciutils']
# ansible.builtin.apt (used by the role) needs python3-apt on the host; the test host cannot reach Debian.
PYTHON_APT = ['python3-apt', 'python-apt-common', 'distro-info-data']
SOURCES = textwrap.dedent('''\
    Types: deb
    URIs: http://deb.debian.org/debian
    Suites: bookworm
    Components: main contrib non-free
    Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

    Types: deb
    URIs: http://deb.debian.org/debian-security
    Suites: bookworm-security
    Components: main contrib non-free
    Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
    ''')

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='systemd-nspawn test hosts need root'),
    pytest.mark.skipif(not shutil.which('systemd-nspawn') or not shutil.which('dpkg-scanpackages'),
                       reason='needs systemd-container and dpkg-dev (run tests/infra/fleet.sh deps; apt-get install dpkg-dev)'),
]


def _run(argv, **kwargs):
    kwargs.setdefault('timeout', 600)
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    """Download the real Debian packages and serve them as a flat repository on the hub address."""
    work = tmp_path_factory.mktemp('nvidia-fix')
    apt = work / 'apt'
    for sub in ('etc/sources.list.d', 'etc/apt.conf.d', 'etc/preferences.d', 'state/lists/partial', 'cache/archives/partial'):
        (apt / sub).mkdir(parents=True)
    (apt / 'etc' / 'sources.list').write_text('')
    (apt / 'etc' / 'sources.list.d' / 'debian.sources').write_text(SOURCES)
    (apt / 'apt.conf').write_text('Dir::Etc "%s/etc/";\nDir::State "%s/state/";\nDir::Cache "%s/cache/";\n' % (apt, apt, apt))
    env = dict(os.environ, APT_CONFIG=str(apt / 'apt.conf'), LC_ALL='C')
    served = work / 'repo'
    served.mkdir()
    specs = ['%s=%s' % (name, version) for name in DRIVER for version in (OLD, NEW)] + HELPERS + PYTHON_APT
    update = _run(['apt-get', 'update', '-q'], env=env)
    download = _run(['apt-get', 'download'] + specs, env=env, cwd=str(served))
    if update.returncode != 0 or download.returncode != 0:
        pytest.skip('cannot download Debian packages from deb.debian.org: %s' % (update.stderr + download.stderr)[-500:])
    packages = _run(['dpkg-scanpackages', '-m', '.', '/dev/null'], cwd=str(served))
    assert packages.returncode == 0, packages.stderr
    (served / 'Packages').write_text(packages.stdout)
    up = _run(['tests/infra/fleet.sh', 'deps'], cwd=REPO)
    assert up.returncode == 0, up.stderr[-2000:]
    yield {'dir': served, 'work': work}


def boot(repo, name, preinstall):
    up = _run([FLEET, 'up', name])
    assert up.returncode == 0, up.stderr[-3000:]
    if repo.get('server') is None:
        # The hub bridge exists once a node is up; serve the repository there.
        repo['server'] = subprocess.Popen(['ip', 'netns', 'exec', HUB, sys.executable, '-m', 'http.server', str(PORT), '--bind', HUB_ADDR,
                                           '--directory', str(repo['dir'])], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    inventory = repo['work'] / ('inventory-%s.ini' % name)
    made = _run([FLEET, 'inventory', str(inventory), name])
    assert made.returncode == 0, made.stderr
    with open(os.path.join(FLEET_DIR, 'nodes', name + '.pid'), encoding='utf-8') as handle:
        launcher = handle.read().strip()
    leader = None
    for dummy in range(50):
        children = _run(['pgrep', '-P', launcher]).stdout.split()
        if children:
            leader = children[0]
            break
        time.sleep(0.1)
    assert leader, 'no container leader process under nspawn pid %s' % launcher
    node = {'name': name, 'inventory': inventory, 'leader': leader, 'repo': repo}
    command = ('rm -f /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; '
               'echo "deb [trusted=yes] http://%s:%d/ ./" > /etc/apt/sources.list.d/llmops-nvidia-test.list; apt-get update -q' % (HUB_ADDR, PORT))
    if preinstall:
        command += ' && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends ' + ' '.join(preinstall)
    prepare = ssh(node, command)
    assert prepare.returncode == 0, prepare.stdout[-3000:] + prepare.stderr[-3000:]
    return node


@pytest.fixture(scope='module')
def fleet_repo(repo):
    repo = dict(repo, server=None, nodes=[])
    try:
        yield repo
    finally:
        if repo['server'] is not None:
            repo['server'].terminate()
            repo['server'].wait(timeout=10)
        for name in repo['nodes']:
            _run([FLEET, 'down', name])


@pytest.fixture
def host(fleet_repo):
    name = 'nvfix%d' % (os.getpid() % 100000)
    fleet_repo['nodes'].append(name)
    return boot(fleet_repo, name, ['%s=%s' % (pkg, NEW) for pkg in DRIVER])


@pytest.fixture
def empty_host(fleet_repo):
    name = 'nvrole%d' % (os.getpid() % 100000)
    fleet_repo['nodes'].append(name)
    return boot(fleet_repo, name, PYTHON_APT)


def ssh(node, command):
    return _run([FLEET, 'ssh', node['name'], command])


def set_module(node, version):
    """Stand-in for the loaded module: the corpus' proprietary banner with VERSION, inside the host."""
    with open(os.path.join(CORPUS, 'debian-bookworm-smi-525-module-520', 'proc_driver_nvidia_version.txt'), encoding='utf-8') as handle:
        text = handle.read().replace('520.56.06', version)
    script = ('mountpoint -q /proc/driver || mount -t tmpfs -o mode=0755 tmpfs /proc/driver; mkdir -p /proc/driver/nvidia; '
              'cat > /proc/driver/nvidia/version')
    done = subprocess.run(['nsenter', '-t', node['leader'], '-m', '--', 'sh', '-c', script], input=text, text=True,
                          capture_output=True, check=False, timeout=30)
    assert done.returncode == 0, done.stderr


def installed(node):
    out = ssh(node, "dpkg-query -W -f '${Package} ${Version}\\n' %s; echo HOLDS; apt-mark showhold" % ' '.join(DRIVER)).stdout
    versions, holds = out.split('HOLDS\n')
    return dict(line.split(' ', 1) for line in versions.strip().splitlines()), sorted(holds.split())


def run_fix(node, check_mode=False):
    out = node['repo']['work'] / ('result-%d.json' % time.monotonic_ns())
    playbook = node['repo']['work'] / 'fix.yml'
    playbook.write_text(textwrap.dedent('''\
        - hosts: all
          gather_facts: false
          tasks:
            - name: Make user space match the loaded module
              llmops.sglang.nvidia_driver_match:
                fix: true
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
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR='1', ANSIBLE_HOST_KEY_CHECKING='False')
    argv = [ANSIBLE_PLAYBOOK, '-i', str(node['inventory']), str(playbook), '-e', 'ansible_python_interpreter=/usr/bin/python3']
    if check_mode:
        argv += ['--check', '--diff']
    proc = _run(argv, env=env)
    assert proc.returncode == 0 and out.exists(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_fix_with_real_apt(host):
    version_old = OLD.split('-', maxsplit=1)[0]
    set_module(host, version_old)
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
    set_module(host, NEW.split('-', maxsplit=1)[0])
    assert ssh(host, 'apt-get clean').returncode == 0
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
    set_module(empty_host, OLD.split('-', maxsplit=1)[0])
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
                content: "{{ nvidia_driver_match_result | to_json }}"
                dest: %s
                mode: "0600"
              delegate_to: localhost
        ''') % out)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR='1', ANSIBLE_HOST_KEY_CHECKING='False')
    argv = [ANSIBLE_PLAYBOOK, '-i', str(empty_host['inventory']), str(playbook), '-e', 'ansible_python_interpreter=/usr/bin/python3']
    first = _run(argv, env=env)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result['match'] is True
    assert result['kernel_module']['version'] == OLD.split('-', maxsplit=1)[0]
    versions, holds = installed(empty_host)
    # libcuda1, libnvidia-ml1, nvidia-smi were named; their "=" dependencies came at the same version.
    assert set(versions.values()) == {OLD}
    assert {'libcuda1', 'libnvidia-ml1', 'nvidia-smi'} <= set(holds)
    # Idempotent: a second run changes nothing.
    second = _run(argv, env=env)
    assert second.returncode == 0, second.stdout[-4000:]
    recap = [line for line in second.stdout.splitlines() if empty_host['name'] in line and 'changed=' in line]
    assert recap and 'changed=0' in recap[-1], second.stdout[-3000:]
