# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""GPU holders of the pre-flight (_procfs, _gpu_holders, _proc_stop): each classifier rule on its own, then real
processes holding stand-in device files (another user's, a re-parented orphan with SGLang's process title, one that
only maps the file) read from the real /proc, and orphans stopped for real (SIGTERM, and SIGKILL for one that ignores it).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _gpu_holders as gh
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _proc_stop as ps
from ansible_collections.llmops.sglang.plugins.module_utils.host._procfs import (
    Proc, parse_cgroup, parse_stat, process_age, read_processes, unit_of_cgroup)

import preflight_procs as pp

UNIT = 'sglang.service'
SVC = 998


def proc(pid, ppid=1, uid=SVC, user='sglang', title='sglang::scheduler_TP0', cgroup='/user.slice/user-0.slice/session-3.scope',
         comm=None):
    return Proc(pid=pid, ppid=ppid, uid=uid, user=user, start_time=pid * 10, cmdline=[title] if title else [],
                comm=comm or (title or 'python3')[:15], cgroup=cgroup, unit=unit_of_cgroup(cgroup))


def kind(target, procs=None, unit_active=False, uid=SVC):
    procs = procs or {target.pid: target}
    return gh.classify(target, procs, UNIT, unit_active, uid)[0]


# ---- each classifier rule ------------------------------------------------------------------------------------------

def test_own_current_run_is_the_units_cgroup_while_active():
    server = proc(100, cgroup='/system.slice/sglang.service', title='python3')
    assert kind(server, unit_active=True) == gh.OWN


def test_left_in_the_units_cgroup_while_inactive_is_an_orphan():
    left = proc(100, cgroup='/system.slice/sglang.service', title='python3', ppid=1)
    assert kind(left, unit_active=False) == gh.ORPHAN


def test_reparented_sglang_scheduler_of_the_service_user_is_an_orphan():
    assert kind(proc(100)) == gh.ORPHAN
    assert kind(proc(100, title='sglang::detokenizer')) == gh.ORPHAN
    launcher = proc(100, title='/opt/sglang/venv/bin/python')
    launcher.cmdline = ['/opt/sglang/venv/bin/python', '-m', 'sglang.launch_server', '--port', '30000']
    assert kind(launcher) == gh.ORPHAN


def test_child_of_an_orphan_is_an_orphan():
    root = proc(100)
    child = proc(101, ppid=100, title='python3')
    verdict, reason = gh.classify(child, {100: root, 101: child}, UNIT, False, SVC)
    assert verdict == gh.ORPHAN and 'pid 100' in reason


def test_adopted_by_a_user_systemd_counts_as_reparented():
    manager = proc(50, uid=SVC, title='/lib/systemd/systemd', comm='systemd', cgroup='/user.slice/user-998.slice/user@998.service/init.scope')
    orphan = proc(100, ppid=50)
    assert kind(orphan, {50: manager, 100: orphan}) == gh.ORPHAN


def test_another_user_is_foreign_even_with_sglang_title():
    assert kind(proc(100, uid=1000, user='alice')) == gh.FOREIGN


def test_another_service_is_foreign_even_as_the_service_user():
    other = proc(100, cgroup='/system.slice/sglang-b.service')
    verdict, reason = gh.classify(other, {100: other}, UNIT, False, SVC)
    assert verdict == gh.FOREIGN and 'sglang-b.service' in reason


def test_sglang_started_by_hand_with_a_live_parent_is_foreign():
    shell = proc(90, title='-bash', comm='bash')
    server = proc(100, ppid=90)
    assert kind(server, {90: shell, 100: server}) == gh.FOREIGN


def test_a_reparented_non_sglang_process_of_the_service_user_is_foreign():
    assert kind(proc(100, title='python3 train.py')) == gh.FOREIGN


def test_unknown_service_user_makes_everything_foreign():
    assert kind(proc(100), uid=None) == gh.FOREIGN


def test_visible_gpus_follows_cuda_visible_devices():
    devices = {0: '/dev/nvidia0', 1: '/dev/nvidia1', 2: '/dev/nvidia2'}
    assert gh.visible_gpus(None, devices) == devices
    assert gh.visible_gpus('2,0', devices) == {2: '/dev/nvidia2', 0: '/dev/nvidia0'}
    assert gh.visible_gpus('', devices) == {}
    assert gh.visible_gpus('1,7,2', devices) == {1: '/dev/nvidia1'}  # CUDA stops at the first invalid entry
    assert gh.visible_gpus('GPU-b2', devices, {'GPU-b2': 2}) == {2: '/dev/nvidia2'}


def test_nvidia_smi_compute_apps_and_uuids():
    uuids = gh.parse_gpu_uuids('0, GPU-aaa\n1, GPU-bbb\n')
    apps = gh.parse_compute_apps('13118, GPU-bbb, 76800\n4242, GPU-aaa, [N/A]\n', uuids)
    assert uuids == {'GPU-aaa': 0, 'GPU-bbb': 1}
    assert apps == {13118: [(1, 76800)], 4242: [(0, None)]}


def test_holder_that_proc_does_not_show_is_foreign_with_its_memory():
    holders = gh.find_holders({}, {1: '/dev/nvidia1'}, UNIT, True, SVC, compute_apps={13118: [(1, 76800)]})
    assert [(h.pid, h.kind, h.gpus, h.memory_mib) for h in holders] == [(13118, gh.FOREIGN, [1], 76800)]
    assert gh.blocking(holders) == holders


def test_proc_parsers():
    assert parse_stat('4242 (sglang::sched (x)) S 1 4242 4242 0 -1 4194560 ' + ' '.join(['0'] * 12) + ' 987654 0') == (1, 987654)
    assert parse_cgroup('12:pids:/x\n1:name=systemd:/system.slice/a.service\n0::/system.slice/sglang.service\n') == '/system.slice/sglang.service'
    assert unit_of_cgroup('/system.slice/sglang.service') == 'sglang.service'
    assert unit_of_cgroup('/user.slice/user-0.slice/session-4.scope') == 'session-4.scope'
    assert unit_of_cgroup('/') == ''


# ---- real processes ------------------------------------------------------------------------------------------------

@pytest.fixture
def devices():
    """Stand-in device files for two GPUs and the control node, readable by another user."""
    root = tempfile.mkdtemp(prefix='llmops-preflight-dev-', dir='/tmp')
    os.chmod(root, 0o755)
    paths = {}
    for name in ('nvidia0', 'nvidia1', 'nvidiactl'):
        path = os.path.join(root, name)
        with open(path, 'wb') as handle:
            handle.write(b'\0' * 4096)
        os.chmod(path, 0o666)
        paths[name] = path
    yield paths
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def spawner():
    spawn = pp.Spawner()
    yield spawn
    spawn.close()


def test_real_holders_are_found_and_classified(devices, spawner):
    me = os.getuid()
    orphan = spawner.start([devices['nvidia0'], devices['nvidiactl']], title='sglang::scheduler_TP0', detach=True)
    mapper = spawner.start(['map:' + devices['nvidia1']], title='sglang::detokenizer', detach=True)
    stranger = spawner.start([devices['nvidia1']], title='python3', uid=pp.NOBODY)
    child_of_test = spawner.start([devices['nvidia0']], title='sglang::scheduler_TP1')
    procs = read_processes()
    gpus = {0: devices['nvidia0'], 1: devices['nvidia1']}
    holders = dict((h.pid, h) for h in gh.find_holders(procs, gpus, UNIT, False, me, shared=[devices['nvidiactl']]))
    assert holders[orphan].kind == gh.ORPHAN and holders[orphan].gpus == [0]
    assert holders[orphan].devices == [devices['nvidia0'], devices['nvidiactl']]
    assert holders[mapper].kind == gh.ORPHAN and holders[mapper].gpus == [1]  # held through a memory mapping only
    assert holders[stranger].kind == gh.FOREIGN and holders[stranger].user == 'nobody'
    # Its parent (this test) is alive: an SGLang process started by hand, never stopped.
    assert holders[child_of_test].kind == gh.FOREIGN
    assert sorted(h.pid for h in gh.blocking(list(holders.values()))) == sorted([stranger, child_of_test])


def test_orphans_are_stopped_with_sigterm_then_sigkill(devices, spawner):
    polite = spawner.start([devices['nvidia0']], title='sglang::scheduler_TP0', detach=True)
    stubborn = spawner.start([devices['nvidia1']], title='sglang::scheduler_TP1', detach=True, ignore_term=True)
    procs = read_processes()
    outcome = ps.stop([procs[polite], procs[stubborn]], term_timeout=1.0, kill_timeout=5.0)
    by_pid = dict((entry['pid'], entry) for entry in outcome)
    assert by_pid[polite]['signal'] == 'SIGTERM' and by_pid[polite]['stopped'] is True
    assert by_pid[stubborn]['signal'] == 'SIGKILL' and by_pid[stubborn]['stopped'] is True
    assert pp.wait_gone(polite) and pp.wait_gone(stubborn)


def test_a_reused_pid_is_never_signalled(devices, spawner):
    pid = spawner.start([devices['nvidia0']], title='sglang::scheduler_TP0', detach=True)
    seen = read_processes()[pid]
    seen.start_time -= 1  # what a different process with the same pid looks like
    sent = []
    outcome = ps.stop([seen], term_timeout=0.2, kill_timeout=0.2, kill=lambda p, s: sent.append((p, s)))
    assert sent == [] and outcome[0]['signal'] is None and outcome[0]['stopped'] is True
    assert not pp.wait_gone(pid, timeout=0.2)


def test_process_age_of_a_real_process():
    """How long a process has run, from /proc (the wait counts its own start-up into timeout with it)."""
    import subprocess
    import time
    proc = subprocess.Popen(["sleep", "30"])
    try:
        time.sleep(0.5)
        age = process_age(proc.pid)
        assert 0.4 <= age <= 10.0
        assert process_age(proc.pid) >= age
    finally:
        proc.kill()
        proc.wait()
    # a process that is gone, or a /proc that cannot tell, counts nothing
    assert process_age(proc.pid) == 0.0
    assert process_age("self", proc_root="/nonexistent") == 0.0
