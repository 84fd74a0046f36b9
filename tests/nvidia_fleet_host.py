# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Test hosts for the NVIDIA driver tests (tests/integration/test_nvidia_fix_{apt,dnf}.py, test_nvidia_role_apt.py;
test_nvidia_driver_match_ns.py uses only the apt download helpers and the paths).

Shared set-up, nothing NVIDIA-specific is faked here except the loaded kernel module:

- :func:`apt_env` / :func:`apt_download`: Debian packages fetched on the controller with a private apt
  configuration (the controller's own apt state is not touched); optionally resolved against the test
  hosts' root file system, so only what the hosts lack is fetched.
- :class:`HubServer`: a directory served over HTTP on the fleet's hub address (the test hosts have no
  route out), on a port the kernel picks, so tests on several pytest-xdist workers never collide.
- :func:`boot`, :func:`ssh`, :func:`down`: systemd-nspawn hosts from tests/infra/fleet.sh.
- :func:`set_module`: the stand-in for the loaded kernel module, /proc/driver/nvidia/version as a tmpfs
  file in the host's mount namespace holding the corpus' proprietary banner with the version under test.
- :func:`nvidia_ko`: the stand-in for a built module file, a real ELF relocatable nvidia.ko whose .modinfo
  section says the version and the flavor's license (what modinfo reads), for the running kernel :data:`KERNEL`.
- :func:`run_playbook`: ansible-playbook over real SSH against one host; :func:`run_match`: the
  nvidia_driver_match module through it (playbook from :func:`match_playbook`), its result (failed or
  not) written out as JSON.
- :func:`run_role_check`: the nvidia_driver role with --check --diff between two snapshots of the host's whole file
  system (tests/infra/fs_snapshot.yml) in one run, and what differs; the apt and the dnf role tests use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FLEET = os.path.join(REPO, 'tests', 'infra', 'fleet.sh')
CORPUS = os.path.join(REPO, 'tests', 'fixtures', 'nvidia')


def collections_root():
    """Where ansible finds this collection: LLMOPS_COLLECTIONS_PATH, else the root of the ansible_collections tree the
    checkout sits in (tests/run-all.sh runs a copy at <root>/ansible_collections/llmops/sglang), else /tmp/coll."""
    if os.environ.get('LLMOPS_COLLECTIONS_PATH'):
        return os.environ['LLMOPS_COLLECTIONS_PATH']
    parts = REPO.split(os.sep)
    if parts[-3:] == ['ansible_collections', 'llmops', 'sglang']:
        return os.sep.join(parts[:-3])
    return '/tmp/coll'


COLLECTIONS = collections_root()
ANSIBLE_PLAYBOOK = os.environ.get('ANSIBLE_PLAYBOOK', os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'))
HUB, HUB_ADDR = 'llmops-hub', '10.213.0.1'
# The kernel the test hosts run (a systemd-nspawn host shares the controller's kernel): module files go under
# /lib/modules/KERNEL, where modinfo and depmod in the host look.
KERNEL = os.uname().release
DEBIAN_SOURCES = '''\
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
'''


def fleet_dir():
    return os.environ.get('LLMOPS_FLEET_DIR', '/var/tmp/llmops-fleet')


def run(argv, **kwargs):
    kwargs.setdefault('timeout', 600)
    return subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)


def apt_env(work, status=None):
    """Environment for apt-get with its own configuration, lists and cache under WORK/apt.

    STATUS: a dpkg status file to resolve against (the test hosts' root file system) instead of the
    controller's.
    """
    apt = os.path.join(str(work), 'apt')
    for sub in ('etc/sources.list.d', 'etc/apt.conf.d', 'etc/preferences.d', 'state/lists/partial', 'cache/archives/partial'):
        os.makedirs(os.path.join(apt, sub), exist_ok=True)
    with open(os.path.join(apt, 'etc', 'sources.list'), 'w', encoding='utf-8') as handle:
        handle.write('')
    with open(os.path.join(apt, 'etc', 'sources.list.d', 'debian.sources'), 'w', encoding='utf-8') as handle:
        handle.write(DEBIAN_SOURCES)
    conf = 'Dir::Etc "%s/etc/";\nDir::State "%s/state/";\nDir::Cache "%s/cache/";\n' % (apt, apt, apt)
    if status:
        conf += 'Dir::State::status "%s";\n' % status
    with open(os.path.join(apt, 'apt.conf'), 'w', encoding='utf-8') as handle:
        handle.write(conf)
    return dict(os.environ, APT_CONFIG=os.path.join(apt, 'apt.conf'), LC_ALL='C')


def apt_update(env):
    """apt-get update with the private configuration; returns an error text or None."""
    update = run(['apt-get', 'update', '-q'], env=env)
    return None if update.returncode == 0 else update.stderr[-500:]


def apt_download(env, specs, dest):
    """apt-get download SPECS into DEST; returns an error text or None."""
    download = run(['apt-get', 'download'] + list(specs), env=env, cwd=str(dest))
    return None if download.returncode == 0 else (download.stderr + download.stdout)[-500:]


def apt_missing(env, names):
    """Names of the packages (NAMES plus dependencies) an install of NAMES would add, per the configured status file."""
    sim = run(['apt-get', 'install', '-s', '--no-install-recommends'] + list(names), env=env)
    if sim.returncode != 0:
        return None
    return [line.split()[1] for line in sim.stdout.splitlines() if line.startswith('Inst ')]


def flat_repo(directory):
    """dpkg-scanpackages DIRECTORY into DIRECTORY/Packages (a flat apt repository, 'deb [trusted=yes] URL ./')."""
    packages = run(['dpkg-scanpackages', '-m', '.', '/dev/null'], cwd=str(directory))
    assert packages.returncode == 0, packages.stderr
    with open(os.path.join(str(directory), 'Packages'), 'w', encoding='utf-8') as handle:
        handle.write(packages.stdout)


class HubServer:
    """python -m http.server for DIRECTORY inside the hub namespace, on a port the kernel picks."""

    def __init__(self, directory):
        self.directory = str(directory)
        self.proc = None
        self.port = None

    def start(self):
        if self.proc is not None:
            return self
        # -u: the "Serving HTTP on ... port N" line must not sit in a pipe buffer.
        self.proc = subprocess.Popen(['ip', 'netns', 'exec', HUB, sys.executable, '-u', '-m', 'http.server', '0', '--bind', HUB_ADDR,
                                      '--directory', self.directory], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline()
        match = re.search(r' port (\d+)', line)
        assert match, 'http.server in %s did not start: %r' % (HUB, line)
        self.port = int(match.group(1))
        return self

    @property
    def url(self):
        return 'http://%s:%d' % (HUB_ADDR, self.port)

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None


def boot(name, work):
    """fleet.sh up NAME; returns {'name', 'inventory', 'leader', 'work'} (leader: the container's PID 1 on the controller)."""
    up = run([FLEET, 'up', name])
    assert up.returncode == 0, up.stderr[-3000:]
    inventory = os.path.join(str(work), 'inventory-%s.ini' % name)
    made = run([FLEET, 'inventory', inventory, name])
    assert made.returncode == 0, made.stderr
    with open(os.path.join(fleet_dir(), 'nodes', name + '.pid'), encoding='utf-8') as handle:
        launcher = handle.read().strip()
    leader = None
    for dummy in range(50):
        children = run(['pgrep', '-P', launcher]).stdout.split()
        if children:
            leader = children[0]
            break
        time.sleep(0.1)
    assert leader, 'no container leader process under nspawn pid %s' % launcher
    return {'name': name, 'inventory': inventory, 'leader': leader, 'work': str(work)}


def down(name):
    """Stop test host NAME at once (SIGKILL, LLMOPS_FLEET_STOP_GRACE=0): it is thrown away, so a clean power-off (up to
    fleet.sh's 15 s grace while its units stop) would only cost time."""
    run([FLEET, 'down', name], env=dict(os.environ, LLMOPS_FLEET_STOP_GRACE='0'))


@contextlib.contextmanager
def sglang_host(name, work, version='0.5.9'):
    """A booted test host NAME for a deploy of the role, with WORK/wheelhouse holding SGLang VERSION's wheel; down afterwards."""
    # tests/ is on sys.path wherever this module is imported
    import sglang_wheels  # pylint: disable=import-outside-toplevel
    # each test its own copy from the wheel cache: never two pip downloads into one directory at once (pytest -n)
    wheelhouse = sglang_wheels.wheelhouse_for_test(work, version)
    node = boot(name, work)
    node['wheelhouse'] = str(wheelhouse)
    try:
        yield node
    finally:
        down(name)


def ssh(node, command, timeout=600):
    return run([FLEET, 'ssh', node['name'], command], timeout=timeout)


def nsenter(node, script, stdin=None):
    """Run SCRIPT with sh in the host's mount namespace (as the controller's root)."""
    return subprocess.run(['nsenter', '-t', node['leader'], '-m', '--', 'sh', '-c', script], input=stdin, text=True,
                          capture_output=True, check=False, timeout=30)


def set_module(node, version):
    """Stand-in for the loaded module: the corpus' proprietary banner with VERSION, inside the host."""
    with open(os.path.join(CORPUS, 'debian-bookworm-smi-525-module-520', 'proc_driver_nvidia_version.txt'), encoding='utf-8') as handle:
        text = handle.read().replace('520.56.06', version)
    done = nsenter(node, 'mountpoint -q /proc/driver || mount -t tmpfs -o mode=0755 tmpfs /proc/driver; mkdir -p /proc/driver/nvidia; '
                         'cat > /proc/driver/nvidia/version', stdin=text)
    assert done.returncode == 0, done.stderr


def nvidia_ko(work, version, flavor):
    """A real ELF relocatable object WORK/nvidia-VERSION-FLAVOR.ko whose .modinfo section says VERSION, FLAVOR's license
    (open: Dual MIT/GPL, proprietary: NVIDIA) and KERNEL's vermagic; built once with as and objcopy, returns its path."""
    path = os.path.join(str(work), 'nvidia-%s-%s.ko' % (version, flavor))
    if os.path.exists(path):
        return path
    license_ = 'Dual MIT/GPL' if flavor == 'open' else 'NVIDIA'
    fields = ['license=%s' % license_, 'version=%s' % version, 'description=NVIDIA kernel module (llmops.sglang test stand-in)',
              'name=nvidia', 'vermagic=%s SMP preempt mod_unload modversions ' % KERNEL]
    info = os.path.join(str(work), 'modinfo-%s-%s.bin' % (version, flavor))
    with open(info, 'wb') as handle:
        handle.write(b''.join(field.encode() + b'\0' for field in fields))
    empty = os.path.join(str(work), 'empty.o')
    if not os.path.exists(empty):
        done = run(['as', '/dev/null', '-o', empty])
        assert done.returncode == 0, done.stderr
    done = run(['objcopy', '--add-section', '.modinfo=%s' % info, '--set-section-flags', '.modinfo=alloc,readonly', empty, path])
    assert done.returncode == 0, done.stderr
    return path


def run_playbook(node, playbook, check_mode=False, extra=(), env_extra=None):
    """ansible-playbook PLAYBOOK against NODE over SSH (ENV_EXTRA: more environment); returns the CompletedProcess."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_NOCOLOR='1', ANSIBLE_HOST_KEY_CHECKING='False',
               **(env_extra or {}))
    argv = [ANSIBLE_PLAYBOOK, '-i', node['inventory'], str(playbook), '-e', 'ansible_python_interpreter=/usr/bin/python3'] + list(extra)
    if check_mode:
        argv += ['--check', '--diff']
    return run(argv, env=env)


def match_playbook(path, args, out, hosts='all', check_mode=None, module='nvidia_driver_match'):
    """Write to PATH a playbook running llmops.sglang.MODULE (nvidia_driver_match) with ARGS on HOSTS; its result goes to OUT on the controller.

    The module's failure is a result too (ignore_errors).  CHECK_MODE True or False sets check mode on the
    module task alone; None leaves it to the command line (--check).
    """
    task_check_mode = '' if check_mode is None else '\n      check_mode: %s' % ('true' if check_mode else 'false')
    with open(str(path), 'w', encoding='utf-8') as handle:
        handle.write(textwrap.dedent('''\
            - hosts: %s
              gather_facts: false
              tasks:
                - name: Run %s
                  llmops.sglang.%s: %s
                  register: nvidia%s
                  # The failure is the result under test; it is written out and asserted by pytest.
                  ignore_errors: true
                - name: Write the result
                  ansible.builtin.copy:
                    content: "{{ nvidia | to_json }}"
                    dest: %s
                    mode: "0600"
                  delegate_to: localhost
                  check_mode: false
            ''') % (hosts, module, module, json.dumps(args), task_check_mode, out))


def run_match(node, args, check_mode=False):
    """nvidia_driver_match with ARGS against NODE over SSH (with --check --diff if CHECK_MODE); returns the module's result."""
    tag = os.urandom(4).hex()
    out = os.path.join(node['work'], 'result-%s.json' % tag)
    playbook = os.path.join(node['work'], 'match-%s.yml' % tag)
    match_playbook(playbook, args, out)
    proc = run_playbook(node, playbook, check_mode=check_mode)
    assert proc.returncode == 0 and os.path.exists(out), proc.stdout[-3000:] + proc.stderr[-3000:]
    with open(out, encoding='utf-8') as handle:
        return json.load(handle)


def recap_changed(stdout, name):
    """The changed= count of NAME's PLAY RECAP line, or None."""
    lines = [line for line in stdout.splitlines() if line.startswith(name) and 'changed=' in line]
    if not lines:
        return None
    return int(re.search(r'changed=(\d+)', lines[-1]).group(1))


# --check writes nothing on the host (breaker report of issue 21, finding 3; issue 21: the suite's one whole-file-system
# snapshot, not a list of its own). tests/infra/fs_snapshot.yml snapshots the host before and after the role, in the same
# ansible-playbook run over the same SSH connection: every path outside /proc, /sys, /dev and /run/user, with its type,
# mode, owner, size and modification time. What a new SSH login leaves (logind's session records, pam_motd, the journal)
# is the transport's and fs_snapshot.compare leaves it out; Ansible's own temporary files go to /run/user/0
# (ansible_remote_tmp, and TMPDIR for the modules), as in tests/integration/test_embedding.py.
SNAPSHOT_PLAY = os.path.join(REPO, 'tests', 'infra', 'fs_snapshot.yml')
CHECK_INVENTORY_VARS = 'all:\n  vars:\n    ansible_remote_tmp: /run/user/0/.ansible/tmp\n'
CHECK_PLAYBOOK = '''\
- name: Snapshot the file system before the dry run
  ansible.builtin.import_playbook: %(snapshot)s
  vars:
    fs_snapshot_name: before

- name: The role, dry run
  hosts: all
  gather_facts: false
  tasks:
    - name: Run the role, keep its failure for the end
      block:
        - name: Install the NVIDIA driver
          ansible.builtin.include_role:
            name: llmops.sglang.nvidia_driver
      rescue:
        - name: Keep the failure
          ansible.builtin.set_fact:
            check_role_failure: "{{ ansible_failed_task.name }}: {{ ansible_failed_result.msg | default('failed') }}"

- name: Snapshot the file system after the dry run
  ansible.builtin.import_playbook: %(snapshot)s
  vars:
    fs_snapshot_name: after

- name: The role's failure, if it failed
  hosts: all
  gather_facts: false
  tasks:
    - name: Fail as the role did
      ansible.builtin.fail:
        msg: "{{ check_role_failure }}"
      when: check_role_failure is defined
'''


def check_host_name(number):
    """LLMOPS_TEST_HOST_PREFIX (a session's own host names on a shared machine) and NUMBER, else nvchk, NUMBER, the pid."""
    prefix = os.environ.get('LLMOPS_TEST_HOST_PREFIX')
    return '%s%d' % (prefix, number) if prefix else 'nvchk%d%d' % (number, os.getpid() % 10000)


def temporary_files_to_run_user(node):
    """TMPDIR=/run/user/0 for the SSH sessions that come (pam_env reads /etc/environment): the modules' temporary files
    go to root's per-login runtime directory, which the snapshot leaves out. Written before the run's first snapshot."""
    done = ssh(node, 'echo TMPDIR=/run/user/0 >> /etc/environment')
    assert done.returncode == 0, done.stderr


def run_role_check(node, role_vars):
    """The role with --check --diff between two snapshots of the host's whole file system, in one run; returns the
    CompletedProcess and what differs between the snapshots (fs_snapshot.compare's lines, [] when nothing).

    The role runs in a block: when it fails, its failure is kept, the after-snapshot is taken all the same, and the
    last play fails with the role's message (rc 2, as the role alone would)."""
    work = node['work']
    playbook = os.path.join(work, 'role-check-%s.yml' % node['name'])
    with open(playbook, 'w', encoding='utf-8') as handle:
        handle.write(CHECK_PLAYBOOK % {'snapshot': SNAPSHOT_PLAY})
    vars_file = os.path.join(work, 'vars-check-%s.json' % node['name'])
    with open(vars_file, 'w', encoding='utf-8') as handle:
        json.dump(role_vars, handle)
    inventory = os.path.join(work, 'check-vars-%s.yml' % node['name'])
    with open(inventory, 'w', encoding='utf-8') as handle:
        handle.write(CHECK_INVENTORY_VARS)
    snapshots = [os.path.join(work, '%s-%s.json' % (when, node['name'])) for when in ('before', 'after')]
    for path in snapshots:
        if os.path.exists(path):
            os.unlink(path)
    # modules log their invocation to the host's journal otherwise: Ansible's own logging, not a write of the role's
    proc = run_playbook(node, playbook, check_mode=True, env_extra={'ANSIBLE_NO_TARGET_SYSLOG': 'true'},
                        extra=['-i', inventory, '-e', '@' + vars_file, '-e', 'fs_snapshot_dir=%s' % work])
    assert all(os.path.exists(path) for path in snapshots), proc.stdout[-5000:] + proc.stderr[-3000:]
    loaded = []
    for path in snapshots:
        with open(path, encoding='utf-8') as handle:
            loaded.append(json.load(handle))
    assert len(loaded[0]) > 10000, 'the snapshot lists only %d paths' % len(loaded[0])
    return proc, _fs_snapshot().compare(*loaded)


def _fs_snapshot():
    """tests/infra/fs_snapshot.py (the compare half runs on the controller)."""
    sys.path.insert(0, os.path.join(REPO, 'tests', 'infra'))
    import fs_snapshot  # pylint: disable=import-outside-toplevel
    return fs_snapshot
