# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The SSH link of a systemd-nspawn test host goes down, or the host reboots, in the middle of llmops.sglang.wait_for_sglang (real
ansible-playbook, real SSH, the host's network namespace loses eth0 with ``ip -n <netns> link set eth0 down``):

- a short gap is ridden out with backoff and one line per retry, and the same wait ends ready (no restart);
- a gap past ``unreachable_timeout`` fails naming the host as unreachable, the server is left running untouched, and a
  rerun once the link is back waits for the same start (same InvocationID).

The server is the SGLang stand-in in a transient systemd unit, replaying a recorded ready start over 60 s.
Run: PYTHONPATH=<dir above ansible_collections> LLMOPS_FLEET_DIR=... python -m pytest tests/integration/test_faults_link.py
(LLMOPS_FAULTS_LINK_HOST names the file's one test host; default link<pid>).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvidia_fleet_host as fh  # noqa: E402  pylint: disable=wrong-import-position
import ansible_collections.llmops.sglang as collection  # noqa: E402  pylint: disable=wrong-import-position

COLLECTIONS_PATH = os.path.dirname(os.path.dirname(os.path.dirname(list(collection.__path__)[0])))
UNIT = 'sglang-link.service'
LOG = '/var/log/sglang-link.log'
RECORDING = '/opt/llmops-standin/recordings/rocm-tp2-multimodal-ready-no-cuda-graph'

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='systemd-nspawn test hosts need root'),
    pytest.mark.skipif(not shutil.which('systemd-nspawn'), reason='needs systemd-container (tests/infra/fleet.sh deps)'),
    pytest.mark.xdist_group('test_faults_link'),  # the file on one worker: its module-scoped set-up runs once (docs/testing.md)
]

PLAY = '''\
- name: Wait for SGLang over a flaky link
  hosts: all
  gather_facts: false
  tasks:
    - name: Wait and keep the result
      block:
        - name: Wait until SGLang is ready
          llmops.sglang.wait_for_sglang:
            unit: {unit}
            log_path: {log}
            log_offset: 0
            url: http://127.0.0.1:30000
            timeout: 300
            unreachable_timeout: {bound}
          register: wait
      always:
        - name: Write the result for the test
          ansible.builtin.copy:
            content: "{{{{ wait | to_json }}}}"
            dest: {out}
            mode: "0600"
          delegate_to: localhost
'''


def netns(name):
    """The host's network namespace, as tests/infra/fleet.sh names it."""
    real = os.path.realpath(fh.fleet_dir())
    if real == '/var/tmp/llmops-fleet':
        return 'llmops-n-' + name
    return 'llmops-x%s-%s' % (hashlib.sha256((real + '\n').encode()).hexdigest()[:6], name)


def link(node, state):
    done = subprocess.run(['ip', '-n', netns(node['name']), 'link', 'set', 'eth0', state], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope='module')
def node(tmp_path_factory):
    """One host for the file, booted to survive its reboots (fleet.sh up --persist): the link tests run their server as
    a transient unit, the reboot test (last) as an enabled one."""
    work = tmp_path_factory.mktemp('faults-link')
    name = os.environ.get('LLMOPS_FAULTS_LINK_HOST') or 'link%d' % (os.getpid() % 100000)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv('LLMOPS_FLEET_PERSIST', '1')
            host = fh.boot(name, str(work))
        yield host
    finally:
        subprocess.run(['ip', '-n', netns(name), 'link', 'set', 'eth0', 'up'], capture_output=True, check=False)
        fh.down(name)


def start_server(node, seconds=60):
    fh.ssh(node, 'systemctl stop %s; systemctl reset-failed %s; rm -f %s' % (UNIT, UNIT, LOG))
    done = fh.ssh(node, 'systemd-run --unit %s -p StandardOutput=append:%s -p StandardError=append:%s '
                        '/usr/bin/python3 /opt/llmops-standin/sglang_standin.py --max-seconds %d --recording %s'
                  % (UNIT, LOG, LOG, seconds, RECORDING))
    assert done.returncode == 0, done.stderr
    return invocation(node)


def invocation(node):
    return fh.ssh(node, 'systemctl show -p InvocationID --value %s' % UNIT).stdout.strip()


def start_wait(node, tag, bound):
    out = os.path.join(node['work'], '%s.json' % tag)
    path = os.path.join(node['work'], '%s.yml' % tag)
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(PLAY.format(unit=UNIT, log=LOG, bound=bound, out=out))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_PATH, ANSIBLE_NOCOLOR='1', ANSIBLE_HOST_KEY_CHECKING='False')
    argv = [fh.ANSIBLE_PLAYBOOK, '-i', node['inventory'], path, '-e', 'ansible_python_interpreter=/usr/bin/python3']
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    return proc, out


def until_progress(proc, host):
    """Read the playbook's output until its first progress line for `host` (the wait is under way)."""
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith('%s: ' % host):
            return seen
    raise AssertionError('the wait never printed progress:\n' + ''.join(seen)[-3000:])


def finish(proc, out, seen):
    log = ''.join(seen) + proc.communicate(timeout=600)[0]
    with open(out, encoding='utf-8') as handle:
        return proc.returncode, log, json.load(handle)


def test_a_short_link_gap_is_ridden_out_and_the_same_wait_ends_ready(node):
    first = start_server(node)
    proc, out = start_wait(node, 'short-gap', bound=120)
    seen = until_progress(proc, node['name'])
    link(node, 'down')
    time.sleep(30)
    link(node, 'up')
    rc, log, wait = finish(proc, out, seen)
    assert rc == 0, log[-4000:]
    # one gap, measured from the first failed round (ssh notices a dead link only after its ServerAlive probes)
    assert wait['status'] == 'ready' and len(wait['connection_lost']) == 1 and wait['connection_lost'][0] > 0, log
    retries = [line for line in log.splitlines() if line.startswith('%s: connection lost (' % node['name'])]
    assert retries and all(', retrying in ' in line and 's of 120s' in line for line in retries)
    assert invocation(node) == first                             # the same start: nothing restarted it


def test_past_the_bound_the_host_is_unreachable_and_a_rerun_waits_for_the_same_start(node):
    first = start_server(node, seconds=90)
    proc, out = start_wait(node, 'long-gap', bound=15)
    seen = until_progress(proc, node['name'])
    link(node, 'down')
    try:
        rc, log, wait = finish(proc, out, seen)
    finally:
        link(node, 'up')
    assert rc == 2, log[-4000:]
    assert (wait['status'], wait['ready']) == ('unreachable', False)
    assert wait['msg'].startswith('SGLang on %s: the host is unreachable: no connection for 15s' % node['name'])
    assert invocation(node) == first                             # the server was left running, untouched
    proc, out = start_wait(node, 'rerun', bound=120)
    rc, log, wait = finish(proc, out, [])
    assert rc == 0 and wait['status'] == 'ready', log[-4000:]
    assert invocation(node) == first


UNIT_FILE = '''[Unit]
Description=SGLang stand-in for the reboot test
[Service]
ExecStart=/usr/bin/python3 /opt/llmops-standin/sglang_standin.py --max-seconds 60 --recording %s
StandardOutput=append:%s
StandardError=append:%s
[Install]
WantedBy=multi-user.target
''' % (RECORDING, LOG, LOG)


@pytest.fixture
def persistent_node(node):
    """The file's host with the stand-in as an enabled unit (started again at boot) instead of a transient one."""
    done = fh.ssh(node, "systemctl stop %s; systemctl reset-failed %s; rm -f %s; cat > /etc/systemd/system/%s <<'EOF'\n%sEOF\n"
                        "systemctl daemon-reload && systemctl enable --now %s" % (UNIT, UNIT, LOG, UNIT, UNIT_FILE, UNIT))
    assert done.returncode == 0, done.stderr
    yield node
    fh.ssh(node, 'systemctl disable --now %s; rm -f /etc/systemd/system/%s; systemctl daemon-reload' % (UNIT, UNIT))


def test_a_reboot_mid_wait_is_reported_as_a_reboot_and_a_rerun_waits_for_the_start_at_boot(persistent_node):
    node = persistent_node
    boot_before = fh.ssh(node, 'cat /proc/sys/kernel/random/boot_id').stdout.strip()
    proc, out = start_wait(node, 'reboot', bound=120)
    seen = until_progress(proc, node['name'])
    fh.ssh(node, 'systemctl reboot')
    rc, log, wait = finish(proc, out, seen)
    assert rc == 2, log[-4000:]
    boot_after = fh.ssh(node, 'cat /proc/sys/kernel/random/boot_id').stdout.strip()
    assert boot_after != boot_before
    assert (wait['status'], wait['signature'], wait['boot_id']) == ('rebooted', None, boot_before)
    assert wait['msg'].startswith('SGLang on %s: the host rebooted during the wait (boot id %s -> %s)'
                                  % (node['name'], boot_before, boot_after))
    at_boot = invocation(node)
    proc, out = start_wait(node, 'after-reboot', bound=120)
    rc, log, wait = finish(proc, out, [])
    assert rc == 0 and wait['status'] == 'ready', log[-4000:]
    assert invocation(node) == at_boot                           # the start the unit made at boot, not a restart
