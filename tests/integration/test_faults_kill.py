# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The controller SIGKILLed at a task of a deploy that changes the unit, the environment, the secrets and the SM120
patches (issue 16, fault 2): real ansible-playbook, real SSH to one systemd-nspawn host (tests/infra/fleet.sh), real
systemd, real SGLang 0.5.9 source patched and reverted; the server is the SGLang stand-in replaying a recorded start.

Each kill point deploys the other of two whole configurations, SIGKILLs the process group of ansible-playbook when
its output reaches the task, then checks the host: every file is one of its two whole contents, the patch state is
one of its two whole states, the unit is active and enabled. The rerun must converge to a ready server with exactly
the one restart the change needs (systemd's InvocationIDs in the journal). One more kill lands inside the restart
itself: when the unit leaves ``active`` (seen from the host), and the unit must come back without the controller.

CI runs a sample (right after the SM120 patch write, right before and right after the restart, and inside it); ``LLMOPS_KILL_EVERY_TASK=1`` kills at
every task header of the changing deploy instead (docs/reliability.md).

Run: PYTHONPATH=<dir above ansible_collections> LLMOPS_FLEET_DIR=... python -m pytest tests/integration/test_faults_kill.py
(LLMOPS_KILL_HOST names the test host; default kill<pid>).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import queue
import subprocess
import threading
import time

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.sglang._sm120_patch import PATCH_FILES

import test_faults as tf  # pylint: disable=import-error
from test_faults import fh, kill_controller, kill_when_replaced, remote, settled, show  # noqa: F401  pylint: disable=import-error,unused-import

# test_faults' skip conditions, and a group of its own: the file on one worker, its module-scoped set-up runs once
pytestmark = [mark for mark in tf.pytestmark if mark.name != 'xdist_group'] + [pytest.mark.xdist_group('test_faults_kill')]

UNIT = tf.UNIT
FILES = {'unit': UNIT, 'environment': '/etc/sglang/sglang.env', 'secret environment': '/etc/sglang/sglang.secret.env',
         'API key': '/etc/sglang/sglang.secret-args.yaml', 'deployment record': tf.STAMP}
SGLANG = '/opt/sglang/venv/lib/python3*/site-packages/sglang'
COMMON = {'recording': tf.READY, 'max_seconds': 3, 'sglang_service_stable_for': 2,
          # the shutdown of a real server takes seconds; a stop that lasts one makes the kill inside the restart land
          'sglang_service_unit_extra': {'ExecStopPost': '/bin/sleep 1'}}
CONFIGS = (
    dict(COMMON, sglang_service_restart_sec=5, sglang_service_sm120_patch='absent', sglang_service_api_key='kill-key-a',
         sglang_service_environment={'LLMOPS_KILL_TEST': 'a'}, sglang_service_secret_environment={'HF_TOKEN': 'hf_a'}),
    dict(COMMON, sglang_service_restart_sec=11, sglang_service_sm120_patch='present', sglang_service_api_key='kill-key-b',
         sglang_service_environment={'LLMOPS_KILL_TEST': 'b'}, sglang_service_secret_environment={'HF_TOKEN': 'hf_b'}),
)
# A single host deploys in one task (its plan task runs install, configure, restart, verify, rollback and finish), so
# the points between its steps are lines its steps print: (text in the line, occurrence, lines after it). The sample CI
# kills at: right after the install step (its last line, the pre-flight's, is a detail line: the deploy runs with -v;
# the SM120 patch written, unit and environment old), right before the restart (the restart step says why before it
# builds the restart module's payload: every file new, the server old), right after it (the next line, the wait's:
# restarted, not waited for); the kill inside the restart (between its stop and its start) is a test of its own. Each
# point costs a kill and a rerun (~50 s on 2 idle cores), so the other points run with LLMOPS_KILL_EVERY_TASK=1 (every
# task header, and these).
SAMPLE = (
    (': pre-flight ok: ', 1, 0),
    (': restarting sglang.service: ', 1, 0),
    (': restarting sglang.service: ', 1, 1),
)
HEADERS = ('TASK [', 'RUNNING HANDLER [')


def record_state(text):
    """The deployment record without what differs between two deploys of one configuration (its time, the unit's
    InvocationID, the SGLang tree digest that includes mtimes); raises if the record does not parse."""
    record = json.loads(text)
    record.pop('recorded_at')
    record['unit'].pop('invocation')
    record['sglang'].pop('tree')
    return json.dumps(record, sort_keys=True)


def snapshot(node):
    """{name: sha256 or None} of every file the deploy writes, the deployment record's content, and 'patch': the
    digests of the sources the SM120 patcher edits."""
    # one SSH command for the whole snapshot: each file base64-encoded on a line of its own after its '== N' line,
    # then the digests of the patcher's files that this SGLang release has (some are of other releases)
    names = list(FILES)
    script = ''.join("echo '== %d'; (cat %s 2>/dev/null || true) | base64 -w0; echo; " % (i, FILES[name])
                     for i, name in enumerate(names))
    script += ("echo '== patch'; cd %s && for f in %s; do if [ -f \"$f\" ]; then sha256sum \"$f\"; fi; done"
               % (SGLANG, ' '.join(sorted(PATCH_FILES))))
    sections = {}
    for block in ('\n' + remote(node, script)).split('\n== ')[1:]:
        key, _sep, body = block.partition('\n')
        sections[key] = body
    digests = {}
    for i, name in enumerate(names):
        text = base64.b64decode(sections[str(i)].strip()).decode('utf-8')
        digests[name] = record_state(text) if FILES[name] == tf.STAMP else hashlib.sha256(text.encode('utf-8')).hexdigest()
    digests['patch'] = sections['patch'].strip()
    return digests


def invocations_since(node, since):
    """The InvocationIDs systemd gave sglang.service since host time SINCE (its own messages in the journal)."""
    text = remote(node, 'journalctl -u sglang.service --since @%d -o json --no-pager' % int(since))
    ids = set()
    for line in text.splitlines():
        entry = json.loads(line)
        ids.update(entry[key] for key in ('INVOCATION_ID', '_SYSTEMD_INVOCATION_ID') if entry.get(key))
    return ids


def normal(header):
    """A task header without the patch state its name carries (the two directions of the change name it apart)."""
    return header.replace('(present)', '(...)').replace('(absent)', '(...)')


def headers(log):
    return [normal(line.split('] ')[0] + ']') for line in log.splitlines() if line.startswith(HEADERS)]


@pytest.fixture(scope='module')
def host(tmp_path_factory):
    """A host deployed with CONFIGS[0]; 'current' is the index of the config it runs."""
    name = os.environ.get('LLMOPS_KILL_HOST') or 'kill%d' % (os.getpid() % 100000)
    with fh.sglang_host(name, tmp_path_factory.mktemp('kill')) as node:
        done = tf.deploy(node, 'first', **CONFIGS[0])
        assert done['rc'] == 0, done['log'][-4000:]
        node['current'] = 0
        yield node


def kill_at(node, tag, config, point):
    """Start a deploy of CONFIG and SIGKILL its process group at POINT (text in the line: a task header or a step's line,
    its occurrence, and how many lines after it); returns (killed, output). A deploy that ends before the point is not
    killed."""
    text, occurrence, after = (tuple(point) + (0,))[:3]
    # -v: the install step's last line (its pre-flight's, when it passed) is a detail line
    proc, dummy = tf.start(node, tag, ['-v'], **config)
    seen, count, left = [], 0, None
    for line in proc.stdout:
        seen.append(line)
        if left is None and text in normal(line):
            count += 1
            left = after if count == occurrence else None
        elif left is not None:
            left -= 1
        if left == 0:
            kill_controller(proc)
            break
    proc.wait(timeout=120)
    proc.stdout.close()
    return proc.returncode == -9, ''.join(seen)


def settle(node, timeout=60):
    """The unit's state once a restart the killed run left under way is over (active, or not after TIMEOUT)."""
    deadline = time.monotonic() + timeout
    while True:
        state = show(node, 'ActiveState', 'UnitFileState', 'InvocationID')
        if state['ActiveState'] == 'active' or time.monotonic() > deadline:
            return state
        time.sleep(0.5)


class Round:
    """One changing deploy that is interrupted: the host before it, the journal time it began at, and the checks."""

    def __init__(self, node):
        self.node = node
        self.target = 1 - node['current']
        self.since = float(remote(node, 'date +%s.%N'))
        self.invocation = show(node, 'InvocationID')['InvocationID']
        self.before = snapshot(node)
        self.killed = None

    def assert_left_whole(self, where):
        """Right after the kill: the unit active and enabled, every file and the patch state whole (old or new, the
        new being what the rerun leaves, checked in converges)."""
        state = settle(self.node)
        assert (state['ActiveState'], state['UnitFileState']) == ('active', 'enabled'), (where, state)
        self.killed = snapshot(self.node)

    def converges(self, tag, **extra):
        """The rerun ends ready with the new configuration and exactly the one restart the change needs."""
        node = self.node
        rerun = tf.deploy(node, tag, **dict(CONFIGS[self.target], **extra))
        assert rerun['rc'] == 0, rerun['log'][-4000:]
        after = show(node, 'ActiveState', 'UnitFileState', 'InvocationID', 'RestartUSec')
        assert (after['ActiveState'], after['UnitFileState']) == ('active', 'enabled')
        assert after['RestartUSec'] == '%ds' % CONFIGS[self.target]['sglang_service_restart_sec']
        # ready: the rerun's wait says so, or (a kill after the record) the record is of the start that serves
        record = json.loads(remote(node, 'cat %s' % tf.STAMP))
        assert (rerun['wait'] or {}).get('status', 'ready') == 'ready'
        assert record['unit']['invocation'] == after['InvocationID']
        now = snapshot(node)
        for key, value in now.items():
            assert value != self.before[key], '%s did not change: the deploy does not change it' % key
            assert self.killed[key] in (self.before[key], value), '%s was neither whole state after the kill' % key
        new = invocations_since(node, self.since) - {self.invocation}
        assert new == {after['InvocationID']}, (new, after)
        # what runs is what was deployed: the live process's own environment (issue 25)
        assert live_environment(node)['LLMOPS_KILL_TEST'] == CONFIGS[self.target]['sglang_service_environment']['LLMOPS_KILL_TEST']
        node['current'] = self.target
        return rerun


def live_environment(node):
    """The environment the server's main process started with, from /proc/<MainPID>/environ on the host."""
    text = remote(node, "tr '\\0' '\\n' </proc/$(systemctl show -p MainPID --value sglang.service)/environ")
    return dict(line.partition('=')[::2] for line in text.splitlines() if '=' in line)


def kill_points():
    if os.environ.get('LLMOPS_KILL_EVERY_TASK') == '1':
        return ['every']
    return list(SAMPLE)


def points_of(node, point):
    """[(text, occurrence[, lines after])]: POINT, or for 'every' each header of a changing deploy (run once to list
    them) and the SAMPLE's points between the steps of the plan task."""
    if point != 'every':
        return [point]
    target = 1 - node['current']
    listed = tf.deploy(node, 'list-tasks', **CONFIGS[target])
    assert listed['rc'] == 0, listed['log'][-4000:]
    node['current'] = target
    counts, points = {}, []
    for header in headers(listed['log']):
        counts[header] = counts.get(header, 0) + 1
        points.append((header, counts[header]))
    return points + list(SAMPLE)


@pytest.mark.parametrize('point', kill_points(), ids=lambda point: point if point == 'every' else '%s+%d' % (point[0].strip(' :'), point[2]))
def test_a_controller_killed_at_a_task_leaves_whole_files_and_its_rerun_converges_with_one_restart(host, point):
    results, points = [], points_of(host, point)
    # LLMOPS_KILL_FROM=N resumes the full loop at its Nth point (0-based), e.g. after a run cut short by a time limit
    points = points[int(os.environ.get('LLMOPS_KILL_FROM') or 0):] if point == 'every' else points
    for number, point in enumerate(points):
        header, occurrence = point[:2]
        began = time.monotonic()
        fault = Round(host)
        killed, log = kill_at(host, 'kill-%d' % number, CONFIGS[fault.target], point)
        assert killed, 'the deploy never reached %s #%d:\n%s' % (header, occurrence, log[-3000:])
        fault.assert_left_whole(header)
        fault.converges('rerun-%d' % number)
        results.append((header, occurrence, round(time.monotonic() - began, 1)))
        print('kill point %s #%d: whole, converged with one restart, kill+rerun %.1fs' % results[-1])
    assert len(results) == len(points)


def start_until_the_unit_stops(host, config, attempts=2):
    """A changing deploy and a watcher on the host: (deploy, watcher) once the watcher saw the unit leave 'active'.
    Bounded: a deploy that ends first fails the test with its output, unless it is ansible-playbook's own error (rc 1:
    no task ran to its end; seen once in CI at load 10 with molecule beside it), which is printed and started again once."""
    for attempt in range(attempts):
        watch = subprocess.Popen([fh.FLEET, 'ssh', host['name'],
                                  'while systemctl is-active -q sglang.service; do sleep 0.02; done; echo down; '
                                  'until systemctl is-active -q sglang.service; do sleep 0.05; done; echo up'],
                                 stdout=subprocess.PIPE, text=True)
        lines = queue.Queue()
        threading.Thread(target=lambda w=watch: lines.put(w.stdout.readline()), daemon=True).start()
        proc, dummy = tf.start(host, 'kill-inside-%d' % attempt, **config)
        deadline = time.monotonic() + 600
        line = None
        while line is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                if proc.poll() is not None and lines.empty():
                    break
        if line == 'down\n':
            return proc, watch
        watch.kill()
        watch.wait(timeout=60)
        if proc.poll() is None:
            kill_controller(proc)
        out = proc.communicate(timeout=60)[0]
        print('attempt %d: the deploy ended (rc %s) before the unit stopped:\n%s' % (attempt, proc.returncode, out[-4000:]))
        assert proc.returncode == 1 and attempt + 1 < attempts, 'the unit never left active:\n%s' % out[-4000:]
    raise AssertionError('unreachable')


def test_a_controller_killed_inside_the_restart_leaves_the_unit_to_start_without_it(host):
    """The kill lands after the unit left 'active' (seen on the host) and before its start: the restart module goes on
    alone and the unit comes back with the new settings; the rerun waits for that start (no second restart)."""
    fault = Round(host)
    proc, watch = start_until_the_unit_stops(host, CONFIGS[fault.target])
    try:
        kill_controller(proc)
        killed = time.monotonic()
        assert proc.wait(timeout=60) == -9
        assert watch.stdout.readline() == 'up\n'            # started again with the controller dead
        print('killed inside the restart; the unit was active again %.1fs later' % (time.monotonic() - killed))
        assert watch.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            kill_controller(proc)
        proc.communicate(timeout=60)
    fault.assert_left_whole('inside the restart')
    started = show(host, 'InvocationID', 'RestartUSec')
    assert started['InvocationID'] != fault.invocation
    assert started['RestartUSec'] == '%ds' % CONFIGS[fault.target]['sglang_service_restart_sec']
    fault.converges('rerun-inside')
    assert show(host, 'InvocationID')['InvocationID'] == started['InvocationID']   # the rerun waited for that start


@pytest.mark.parametrize('damage', ['skip_unchanged=false', 'truncated record'])
def test_files_new_and_server_old_restart_once_whatever_the_record_says(host, damage):
    """Issue 25, finding 1: the controller killed before the restart (every file new, the server old), then a rerun
    that cannot lean on the deployment record (-e sglang_service_skip_unchanged=false, or the record cut in half):
    the running process itself says it runs the older configuration, so the rerun restarts it once and only then
    records the deployment; the live process's arguments and environment are the new ones."""
    fault = Round(host)
    killed, log = kill_when_replaced(host, 'kill-old-%s' % damage[:4], CONFIGS[fault.target], UNIT)
    assert killed, log[-3000:]
    fault.assert_left_whole('the new unit file written')
    settled(host)
    running = live_environment(host).get('LLMOPS_KILL_TEST')
    if running == CONFIGS[fault.target]['sglang_service_environment']['LLMOPS_KILL_TEST']:
        # seen in CI at load 10: the restart module was on its way when the kill came, so the host restarted the unit
        # with the new files; there is no old server for the rerun to find (it rightly restarts nothing)
        pytest.skip('the kill landed after the restart was dispatched: the unit already runs the new configuration')
    assert running == CONFIGS[1 - fault.target]['sglang_service_environment']['LLMOPS_KILL_TEST']
    extra = {}
    if damage == 'truncated record':
        remote(host, 'truncate -s 40 %s' % tf.STAMP)
        fault.before['deployment record'] = None    # damaged: neither whole state
        fault.killed['deployment record'] = None
    else:
        extra['sglang_service_skip_unchanged'] = False
    rerun = fault.converges('rerun-old-%s' % damage[:4], **extra)
    said = [line for line in rerun['log'].splitlines() if 'restarting sglang.service: ' in line]
    assert len(said) == 1 and 'the running server runs an older configuration (' in said[0], said or rerun['log'][-3000:]
    # the API key's --config file and the secret environment are new in this configuration: both are named, no value
    assert 'changed after its start' in said[0] and 'hf_' not in said[0] and 'kill-key' not in said[0], said[0]
