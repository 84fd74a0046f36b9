# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Faults injected for real into deploys of the sglang_service role: real ansible-playbook, real SSH to one
systemd-nspawn host (tests/infra/fleet.sh), real systemd; the server is the SGLang stand-in replaying recorded logs.
One host per module: the first test deploys a ready server, the others start from it (docs/reliability.md).

- a crash right after ready (the recorded scheduler crash 11 s after the ready line) fails the start inside
  ``sglang_service_stable_for``, and the deployment record stays the one of the last proven start;
- two controllers deploying the same host at once: the second waits for the host lock; the restarts never interleave.

Run: PYTHONPATH=<dir above ansible_collections> LLMOPS_FLEET_DIR=... python -m pytest tests/integration/test_faults.py
(LLMOPS_FAULTS_HOST names the test host; default faults<pid>).
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvidia_fleet_host as fh  # noqa: E402  pylint: disable=wrong-import-position
import ansible_collections.llmops.sglang as collection  # noqa: E402  pylint: disable=wrong-import-position
from test_faults_link import link  # noqa: E402  pylint: disable=wrong-import-position,import-error

COLLECTIONS_PATH = os.path.dirname(os.path.dirname(os.path.dirname(list(collection.__path__)[0])))
STAMP = '/var/lib/sglang/sglang.deployed.json'
UNIT = '/etc/systemd/system/sglang.service'
LOCK = '/run/lock/llmops-sglang/sglang.lock'
READY = 'rocm-tp2-multimodal-ready-no-cuda-graph'
POST_READY_CRASH = 'ascend-ready-then-scheduler-crash-11s-later'

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason='systemd-nspawn test hosts need root'),
    pytest.mark.skipif(not shutil.which('systemd-nspawn'), reason='needs systemd-container (tests/infra/fleet.sh deps)'),
    pytest.mark.xdist_group('test_faults'),  # the file on one worker: its module-scoped set-up runs once (docs/testing.md)
]

PLAY = '''\
- name: Deploy SGLang ({tag})
  hosts: all
  become: true
  gather_facts: false           # the role reads no facts
  vars:
    sglang_service_version: "0.5.9"
    # 2 s after ready proves a start of these recordings (they stay up) as the role's 15 s default does; the
    # post-ready crash test asks for 15
    sglang_service_stable_for: "{{{{ stable_for | default(2) }}}}"
    sglang_service_pip_extra_args: [--no-deps, --no-compile]
    sglang_service_wheelhouse: {wheelhouse}
    sglang_service_args: {{model-path: zai-org/GLM-5-FP8, served-model-name: glm-5}}
    sglang_service_wait_timeout: 120
    sglang_service_stall_timeout: 60
    sglang_service_launch_command: [/usr/bin/python3, /opt/llmops-standin/sglang_standin.py, --max-seconds,
                                    "{{{{ max_seconds | default(4) }}}}", --recording,
                                    "/opt/llmops-standin/recordings/{{{{ recording }}}}"]
  tasks:
    - name: Deploy and keep the wait's result
      block:
{deploy}      always:
        - name: Write the wait's result for the test
          ansible.builtin.copy:
            content: "{{{{ sglang_service_result | default({{}}) | to_json }}}}"
            dest: {out}
            mode: "0600"
          delegate_to: localhost
'''
# The role as a play includes it: a single host deploys in its plan task.
DEPLOY = '''\
        - name: Deploy
          ansible.builtin.include_role:
            name: llmops.sglang.sglang_service
'''
# The same steps one task each, as the ranks of a multi-node deployment run them (the role's plan.yml alone only plans,
# then its deploy.yml): a kill at a task header lands between two steps, e.g. every file new and the server not yet
# restarted, which inside a single host's plan task is a moment a test cannot hit on purpose.
DEPLOY_BY_STEP = '''\
        - name: Plan
          ansible.builtin.include_role:
            name: llmops.sglang.sglang_service
            tasks_from: plan
        - name: Deploy one task per step
          ansible.builtin.include_role:
            name: llmops.sglang.sglang_service
            tasks_from: deploy
'''


@pytest.fixture(scope='module')
def node(tmp_path_factory):
    name = os.environ.get('LLMOPS_FAULTS_HOST') or 'faults%d' % (os.getpid() % 100000)
    with fh.sglang_host(name, tmp_path_factory.mktemp('faults')) as host:
        deployed = deploy(host, 'first', recording=READY)
        assert deployed['rc'] == 0, deployed['log'][-4000:]
        yield host


def playbook(node, tag, by_step=False):
    out = os.path.join(node['work'], '%s.json' % tag)
    path = os.path.join(node['work'], '%s.yml' % tag)
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(PLAY.format(tag=tag, wheelhouse=node['wheelhouse'], out=out, deploy=DEPLOY_BY_STEP if by_step else DEPLOY))
    return path, out


def start(node, tag, flags=(), by_step=False, **extra):
    """Start a deploy of the role (BY_STEP: one task per step, see DEPLOY_BY_STEP) with EXTRA as -e variables."""
    path, out = playbook(node, tag, by_step)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_PATH, ANSIBLE_NOCOLOR='1', ANSIBLE_HOST_KEY_CHECKING='False')
    argv = [fh.ANSIBLE_PLAYBOOK, '-i', node['inventory'], path, '-e', 'ansible_python_interpreter=/usr/bin/python3'] + list(flags)
    if extra:
        argv += ['-e', json.dumps(extra)]     # JSON: lists and dicts (environments) pass as they are
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    return proc, out


def finish(proc, out, timeout=600):
    log = proc.communicate(timeout=timeout)[0]
    try:
        with open(out, encoding='utf-8') as handle:
            text = handle.read()
        result = json.loads(text)
    except (OSError, ValueError):
        text, result = '', None
    wait = (result.get('wait') or {}) if isinstance(result, dict) else None
    return {'rc': proc.returncode, 'log': log, 'wait': wait, 'result': result, 'result_text': text}


def deploy(node, tag, flags=(), **extra):
    return finish(*start(node, tag, flags, **extra))


def remote(node, command):
    done = fh.ssh(node, command)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def exists_on_host(node, path):
    """Whether PATH exists on the host, read in its mount namespace through its container leader (no SSH login per
    look: the lock test looks every 0.2 s)."""
    return subprocess.run(['nsenter', '-t', node['leader'], '-m', 'test', '-e', path], check=False).returncode == 0


def test_crash_right_after_ready_fails_the_start_and_writes_no_record(node):
    before = remote(node, 'sha256sum %s' % STAMP)
    # 20 s for the whole replay: the recorded 11 s between the ready line and the scheduler crash become ~2 s
    run = deploy(node, 'post-ready-crash', recording=POST_READY_CRASH, max_seconds=20, stable_for=15)
    assert run['rc'] == 2, run['log'][-4000:]
    wait = run['wait']
    assert (wait['status'], wait['stage'], wait['signature']) == ('crashed', 'ready', 'post_ready_crash')
    assert 0 < wait['elapsed'] - wait['ready_elapsed'] < 15
    assert 'Scheduler hit an exception' in wait['error_line']
    assert ' after ready (within stable_for=15s) at stage ready: post_ready_crash' in wait['msg']
    assert remote(node, 'sha256sum %s' % STAMP) == before          # the last proven start's record, untouched


def test_two_controllers_never_interleave_their_restarts(node):
    first, first_out = start(node, 'lock-a', recording=READY, max_seconds=6)
    deadline = time.monotonic() + 300
    while not exists_on_host(node, LOCK):
        assert time.monotonic() < deadline and first.poll() is None, 'the first deploy never took the lock'
        time.sleep(0.2)
    second, second_out = start(node, 'lock-b', recording=READY, max_seconds=5)
    a, b = finish(first, first_out), finish(second, second_out)
    assert a['rc'] == 0, a['log'][-4000:]
    assert b['rc'] == 0, b['log'][-4000:]
    waited = [line for line in b['log'].splitlines() if 'waiting for the SGLang lock' in line]
    assert len(waited) == 1 and "play 'Deploy SGLang (lock-a)'" in waited[0]
    # a's wait watched its unit through the stability window and would have ended crashed had b restarted it meanwhile
    # (a new InvocationID); b's restart came after a's proven start
    assert (a['wait']['status'], b['wait']['status']) == ('ready', 'ready')
    assert a['wait']['unit']['InvocationID'] != b['wait']['unit']['InvocationID']
    # a's table said ready for a configuration b then replaced: b says so, naming a's run (issue 25, finding 4)
    over = [line for line in b['log'].splitlines() if 'deployed over a configuration from ' in line]
    assert len(over) == 1 and re.search(r"deployed over a configuration from \S+@\S+ \(Deploy SGLang \(lock-a\)\) \d+ s earlier$",
                                        over[0]), over or b['log'][-3000:]
    assert not [line for line in a['log'].splitlines() if 'deployed over a configuration' in line]


def test_a_host_lost_during_the_restart_still_has_its_row_in_the_table(node, tmp_path):
    """Issue 25, finding 4: the link of the only host goes down at the restart step of llmops.sglang.deploy; the run
    still ends with its table (ansible-playbook ends a play that lost its last host before its report task), the row
    says unreachable and where, and a rerun once the link is back converges."""
    rows = tmp_path / 'rows.json'
    extra = {'sglang_deploy_hosts': 'all', 'nvidia_driver_enabled': False, 'sglang_report_path': str(rows),
             'sglang_service_version': '0.5.9', 'sglang_service_pip_extra_args': ['--no-deps', '--no-compile'],
             'sglang_service_wheelhouse': node['wheelhouse'], 'sglang_service_wait_timeout': 120, 'sglang_service_stable_for': 2,
             'sglang_service_args': {'model-path': 'zai-org/GLM-5-FP8', 'served-model-name': 'glm-5'},
             'sglang_service_environment': {'LLMOPS_LINK_TEST': 'lost'},
             'sglang_service_launch_command': ['/usr/bin/python3', '/opt/llmops-standin/sglang_standin.py', '--max-seconds', '4',
                                               '--recording', '/opt/llmops-standin/recordings/' + READY]}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS_PATH, ANSIBLE_NOCOLOR='1', ANSIBLE_HOST_KEY_CHECKING='False',
               ANSIBLE_TIMEOUT='5')
    proc = subprocess.Popen([fh.ANSIBLE_PLAYBOOK, '-i', node['inventory'], 'llmops.sglang.deploy', '-e',
                             'ansible_python_interpreter=/usr/bin/python3', '-e', json.dumps(extra)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            # a single host's restart step (in its plan task) says why before it builds the restart module's payload
            if ': restarting sglang.service: ' in line:
                link(node, 'down')
        proc.wait(timeout=300)
    finally:
        link(node, 'up')
    log = ''.join(seen)
    assert proc.returncode == 2, log[-4000:]
    row = json.loads(rows.read_text())[0]
    assert (row['host'], row['status'], row['stage']) == (node['name'], 'unreachable', 'unknown'), row
    assert row['reason'].startswith('the host became unreachable during step restart'), row
    rerun = deploy(node, 'after-link-loss', recording=READY)
    assert rerun['rc'] == 0 and rerun['wait']['status'] == 'ready', rerun['log'][-4000:]


def kill_controller(proc):
    """SIGKILL the whole controller: ansible-playbook's process group and its task workers, which ansible-core moves
    into sessions of their own (WorkerProcess calls setsid), so a kill of the group alone left a worker that was inside
    a task running on (CI 2026-12-03: two ansible-playbook workers of a kill inside a single host's plan task outlived
    the run)."""
    workers = children(proc.pid)
    os.killpg(proc.pid, 9)
    for pid in workers + children(proc.pid):
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def children(pid):
    """The pids whose parent is PID (from /proc)."""
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry, encoding='utf-8', errors='replace') as handle:
                fields = handle.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def show(node, *props):
    text = remote(node, 'systemctl show sglang.service -p %s' % ' -p '.join(props))
    return dict(line.split('=', 1) for line in text.splitlines() if '=' in line)


def modules_in_flight(node):
    """Pids of the module processes ansible-playbook runs on the host (pipelining: '/bin/sh -c /usr/bin/python3' under
    sshd), read in the host's PID namespace: a killed controller's last module, already sent, still runs there."""
    done = subprocess.run(['nsenter', '-t', node['leader'], '-p', '-m', 'pgrep', '-x', '-f', '/bin/sh -c /usr/bin/python3'],
                          capture_output=True, text=True, check=False)
    return done.stdout.split()


def settled(node, timeout=120):
    """Wait until no module runs on the host (the restart a killed controller had already sent ends first), then until
    sglang.service is neither starting nor stopping; returns its ActiveState. Reading the unit alone was not enough:
    while the sent restart module had not reached systemd yet, the old start still read 'active' (CI run ci-c)."""
    deadline = time.monotonic() + timeout
    while modules_in_flight(node) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not modules_in_flight(node), 'a module still runs on the host %d s after the kill' % timeout
    state = show(node, 'ActiveState')['ActiveState']
    while state in ('activating', 'deactivating', 'reloading') and time.monotonic() < deadline:
        time.sleep(1)
        state = show(node, 'ActiveState')['ActiveState']
    return state


# Every file new and the server not yet restarted: the controller is killed as soon as the new unit file (the last
# file a changing deploy writes, before its restart step) replaces the old one on the host, in a deploy run one task per
# step (between the configure step's last module and the restart's dispatch: the module's exit, its result's way back,
# the restart task's start and its worker's fork). Killed at the restart step's header instead, the kill came after the
# restart module's dispatch in every CI run at load 10 (runs ci-base and ci-v1, 2026-12-04: test_faults_kill's two
# cases skipped): the worker needs only milliseconds from that header to the dispatch. test_faults_kill uses it too.
WATCH_REPLACED = r"""
import os, sys, time
path = sys.argv[1]
first = os.stat(path).st_ino
print("watching", flush=True)
while True:
    try:
        if os.stat(path).st_ino != first:
            break
    except FileNotFoundError:
        pass
    time.sleep(0.005)
print("replaced", flush=True)
"""


def kill_when_replaced(node, tag, config, path):
    """Start a deploy of CONFIG, one task per step, and SIGKILL its controller as soon as PATH on the host is replaced (a
    new inode: the role writes its files by rename), seen from the host's mount namespace every 5 ms; returns (killed,
    output). A deploy that ends before it is not killed."""
    watcher = subprocess.Popen(['nsenter', '-t', str(node['leader']), '-m', '--', '/usr/bin/python3', '-c', WATCH_REPLACED,
                                path], stdout=subprocess.PIPE, text=True)
    try:
        assert watcher.stdout.readline() == 'watching\n', 'the watcher of %s did not start' % path
        proc, dummy = start(node, tag, ['-v'], True, **config)
        seen = []
        reader = threading.Thread(target=lambda: seen.extend(proc.stdout), daemon=True)
        reader.start()
        lines = queue.Queue()
        threading.Thread(target=lambda: lines.put(watcher.stdout.readline()), daemon=True).start()
        killed = False
        while proc.poll() is None:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                continue
            if line == 'replaced\n':   # else the watcher ended without a replacement: no kill
                kill_controller(proc)
                killed = True
            break
        proc.wait(timeout=120)
        reader.join(timeout=60)
        proc.stdout.close()
        return killed and proc.returncode == -9, ''.join(seen)
    finally:
        watcher.kill()
        watcher.wait()


def kill_before_the_restart(node, attempts=3):
    """Deploy the base configuration, then a change one task per step, SIGKILLed (the controller and its task workers)
    once its new unit file is on the host (kill_when_replaced): files new, server old. A kill that lands after the
    restart module was dispatched anyway leaves the unit restarting; then the unit settles and the round runs again.
    Returns the unit's state before the change and right after the kill."""
    for attempt in range(attempts):
        base = deploy(node, 'kill-base-%d' % attempt, recording=READY)
        assert base['rc'] == 0, base['log'][-4000:]
        before = show(node, 'InvocationID', 'RestartUSec')
        landed, log = kill_when_replaced(node, 'kill-mid-%d' % attempt, dict(recording=READY, sglang_service_restart_sec=11),
                                         UNIT)
        assert landed, log[-4000:]
        # the unit's state once the module the worker may already have sent has ended (in ci-c, read while it ran: the
        # old start active, then restarted by that module, and the rerun found nothing to restart)
        settled(node)
        killed = show(node, 'InvocationID', 'ActiveState')
        if killed == {'InvocationID': before['InvocationID'], 'ActiveState': 'active'}:
            return before, killed
        deadline = time.monotonic() + 120
        while show(node, 'ActiveState')['ActiveState'] != 'active' and time.monotonic() < deadline:
            time.sleep(1)
    pytest.skip('the kill landed after the restart was dispatched in %d rounds: the unit was restarting' % attempts)


def test_controller_killed_after_the_files_before_the_restart(node):
    """SIGKILL of ansible-playbook after a changing deploy wrote the new unit file and before its restart: the old
    process keeps serving (nothing stopped), and the rerun, which finds every file already as wanted, still restarts
    it because the running process started before its unit file changed (sglang_deploy_stamp's process)."""
    before, dummy = kill_before_the_restart(node)
    assert remote(node, 'grep -c "^RestartSec=11$" /etc/systemd/system/sglang.service') == '1'   # files written
    # the old start serves on (kill_before_the_restart returns only then: killed is its InvocationID, active)
    rerun = deploy(node, 'kill-rerun', recording=READY, sglang_service_restart_sec=11)
    assert rerun['rc'] == 0, rerun['log'][-4000:]
    # the process itself says it started before its unit file changed (issue 25: read from /proc, not the record)
    said = [line for line in rerun['log'].splitlines() if 'restarting sglang.service: ' in line]
    assert len(said) == 1 and said[0].endswith('restarting sglang.service: the running server runs an older configuration '
                                               '(changed after its start: /etc/systemd/system/sglang.service)'), said
    after = show(node, 'InvocationID', 'RestartUSec', 'ActiveState')
    assert after['ActiveState'] == 'active' and after['InvocationID'] != before['InvocationID']
    assert after['RestartUSec'] == '11s' and rerun['wait']['status'] == 'ready'


def test_known_secrets_reach_no_output_result_log_journal_process_list_or_readable_file(node):
    """Issue 25, finding 3: a deploy with a known API key and a known secret environment value, at -vvv --diff; neither
    value is in the output, the registered result (its wait's log tail included), the journal, the process list or
    any world-readable file on the host, and the server's log is not world-readable."""
    key, token = 'sk-llmops-Qx7-known-key', 'hf_llmopsKnownToken9Zt'
    run = deploy(node, 'secrets', ['-vvv', '--diff'], recording=READY, sglang_service_api_key=key,
                 sglang_service_secret_environment={'HF_TOKEN': token})
    assert run['rc'] == 0, run['log'][-4000:]
    assert run['result']['status'] == 'ready' and run['result']['wait']['log_tail'], run['result']
    for where, text in (('output at -vvv --diff', run['log']), ('sglang_service_result', run['result_text']),
                        ('journal', remote(node, 'journalctl --no-pager -o cat')),
                        ('process list', remote(node, 'ps -eo args'))):
        assert key not in text and token not in text, where
    readable = remote(node, "find / -xdev \\( -path /proc -o -path /sys \\) -prune -o -type f -perm -0004 -size -4M -print0 "
                            "| xargs -0 grep -l -F -e %s -e %s || true" % (key, token))
    assert readable == '', readable
    # the key did reach the server (its --config file): the smoke request with it was answered
    assert run['result']['smoke']['ok'] is True
    assert remote(node, 'stat -c %a /var/log/sglang/sglang.log') == '640'


def test_a_startup_history_of_the_wrong_types_is_kept_aside_and_the_start_recorded(node):
    """Issue 25, finding 2, on a real host through the real role: a sglang.starts.json that is valid JSON with fields
    of the wrong types failed every run after the restart ("type str doesn't define __round__ method", no file named);
    now it is kept aside whole, named in a warning, and the start is recorded in a new history."""
    path = '/var/lib/sglang/sglang.starts.json'
    bad = json.dumps({'format': 1, 'records': [{'recorded_at': '2026-12-01T10:00:00Z', 'config': 'c', 'total': 'x',
                                                'caches': 'warm'}]})
    remote(node, "rm -f %s.damaged-*; printf '%%s' '%s' > %s" % (path, bad, path))
    run = deploy(node, 'damaged-history', recording=READY, max_seconds=3)   # another launch command: a restart
    assert run['rc'] == 0 and run['wait']['status'] == 'ready', run['log'][-4000:]
    said = ' '.join(run['log'].split())
    assert 'The startup history %s was damaged (records[0].total is a string, not a number): it was kept as %s.damaged-' \
        % (path, path) in said, run['log'][-4000:]
    kept = remote(node, 'ls %s.damaged-*' % path).split()
    assert len(kept) == 1 and remote(node, 'cat %s' % kept[0]) == bad
    history = json.loads(remote(node, 'cat %s' % path))
    assert len(history['records']) == 1 and isinstance(history['records'][0]['total'], (int, float)), history
