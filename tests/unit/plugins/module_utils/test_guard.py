# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The guard's pure parts on recorded inputs: decide() over observations built from real outputs (systemctl show of a
unit systemd restarted, recorded Xid lines of tests/fixtures/nvidia_health, the smoke request's answers from a real
HTTP server), the state a round hands to the next, the event's record and its journal line, the metrics, the
settings' refusals, and the files the module installs (the guard's own sources, read from the loaded modules)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.guard import _install as gi
from ansible_collections.llmops.sglang.plugins.module_utils.guard import _report as report
from ansible_collections.llmops.sglang.plugins.module_utils.guard._act import ActionOutcome
from ansible_collections.llmops.sglang.plugins.module_utils.guard._config import GatewaySettings, GuardConfig, problems
from ansible_collections.llmops.sglang.plugins.module_utils.guard._decide import Decision, Observation, Params, decide
from ansible_collections.llmops.sglang.plugins.module_utils.guard._observe import line_keys, new_fault_lines
from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _lock
from ansible_collections.llmops.sglang.plugins.module_utils.guard._round import record, run_once
from ansible_collections.llmops.sglang.plugins.module_utils.guard._state import GuardState, advance, read, write
from ansible_collections.llmops.sglang.plugins.module_utils.host._systemd import parse_show

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures')
P = Params(hung_after=2, restart_max=1, restart_window=3600, crash_restarts=3, crash_window=600, start_timeout=1800)
NOW = 1_800_000_000.0
WINDOWS = (3600.0, 600.0)


def text(*parts):
    with open(os.path.join(FIXTURES, *parts), encoding='utf-8') as handle:
        return handle.read()


def unit_obs(show_text, **extra):
    """An Observation whose unit part is a recorded ``systemctl show`` answer."""
    props = parse_show(show_text)
    obs = Observation(boot_id='b1', active_state=props['ActiveState'], sub_state=props['SubState'], result=props['Result'],
                      invocation=props['InvocationID'], nrestarts=props['NRestarts'], active_for=600.0)
    for key, value in extra.items():
        setattr(obs, key, value)
    return obs


SERVING = text('guard', 'systemctl-show-serving.txt')
RESTARTING = text('guard', 'systemctl-show-auto-restart.txt')
GAVE_UP = text('guard', 'systemctl-show-gave-up.txt')
GAVE_UP_JOURNAL = text('guard', 'journal-rec-gave-up.txt').splitlines()
INVOCATION = parse_show(SERVING)['InvocationID']


def serving_state(**extra):
    state = GuardState(boot_id='b1', rounds=10, invocation=INVOCATION, serving_invocation=INVOCATION, nrestarts=0)
    for key, value in extra.items():
        setattr(state, key, value)
    return state


# ------------------------------------------------------------------------------------------------ decide: hung
def test_a_failed_generation_with_health_200_is_suspect_then_hung_and_restarted_once():
    failed = unit_obs(SERVING, health=200, smoke_ok=False, smoke_error='smoke request failed: no complete answer within 20s')
    first = decide(failed, serving_state(), P, NOW)
    assert (first.kind, first.action, first.failing) == ('suspect', 'none', True)
    state = advance(serving_state(), failed, first, NOW, WINDOWS)
    assert state.failures == 1
    second = decide(failed, state, P, NOW + 30)
    assert (second.kind, second.action) == ('hung', 'restart')
    assert second.reason.startswith('generation failed while GET /health answered 200, 2 rounds in a row: smoke request failed')


def test_the_restart_budget_bounds_restarts_per_window():
    failed = unit_obs(SERVING, health=200, smoke_ok=False, smoke_error='no tokens')
    spent = serving_state(failures=1, guard_restarts=[NOW - 600])
    decision = decide(failed, spent, P, NOW)
    assert (decision.kind, decision.action) == ('hung', 'none')
    assert 'restart budget spent (1 of 1 within 3600s)' in decision.reason
    assert decide(failed, serving_state(failures=1, guard_restarts=[NOW - 3700]), P, NOW).action == 'restart'
    assert decide(failed, serving_state(failures=1), dataclasses.replace(P, restart_max=0), NOW).action == 'none'


def test_a_healthy_round_resets_the_count_and_a_new_run_starts_counting_afresh():
    ok = unit_obs(SERVING, health=200, smoke_ok=True)
    assert decide(ok, serving_state(failures=1), P, NOW).kind == 'healthy'
    assert advance(serving_state(failures=1), ok, Decision('healthy'), NOW, WINDOWS).failures == 0
    other_run = unit_obs(SERVING, health=200, smoke_ok=False, invocation='another-run')
    state = serving_state(failures=1, serving_invocation='another-run')
    assert decide(other_run, state, P, NOW).kind == 'suspect', 'failures of an earlier run do not count'


def test_a_run_that_never_served_is_starting_until_start_timeout():
    starting = unit_obs(SERVING, health=503, smoke_ok=False, invocation='new-run', active_for=100.0)
    assert decide(starting, serving_state(), P, NOW).kind == 'starting'
    stuck = unit_obs(SERVING, health=503, smoke_ok=False, invocation='new-run', active_for=1900.0)
    assert decide(stuck, serving_state(), P, NOW).kind == 'suspect'


# ------------------------------------------------------------------------------------------------ decide: crash loop
def test_restarts_by_systemd_within_the_window_are_a_crash_loop_that_is_stopped():
    props = parse_show(RESTARTING)
    assert (props['ActiveState'], props['SubState'], props['NRestarts']) == ('activating', 'auto-restart', 2)
    two = decide(unit_obs(RESTARTING), serving_state(nrestarts=1, restarts=[NOW - 40]), P, NOW)
    assert two.kind == 'starting', 'two restarts: systemd is still trying'
    three = unit_obs(RESTARTING, nrestarts=3)
    decision = decide(three, serving_state(nrestarts=1, restarts=[NOW - 40]), P, NOW)
    assert (decision.kind, decision.action) == ('crash_loop', 'stop')
    assert decision.reason == 'systemd restarted it 3 times within 600s'
    with_journal = decide(unit_obs(RESTARTING, nrestarts=3, journal=GAVE_UP_JOURNAL[:6]), serving_state(nrestarts=1, restarts=[NOW - 40]), P, NOW)
    assert with_journal.reason == 'systemd restarted it 3 times within 600s; last exit: code=exited, status=1/FAILURE'
    old = decide(three, serving_state(nrestarts=1, restarts=[NOW - 700]), P, NOW)
    assert old.kind != 'crash_loop', 'a restart outside the window does not count'


def test_the_last_exit_read_in_an_earlier_round_is_still_said():
    """The journal is read from a cursor: the exit line of a crash can come in the round before the one that counts
    the third restart (demo guard at load 6-8 in CI: 'systemd restarted it 3 times within 600s; stopped in 0.0s ...')."""
    earlier = unit_obs(RESTARTING, nrestarts=2, journal=GAVE_UP_JOURNAL[:6])
    state = advance(serving_state(nrestarts=1, restarts=[NOW - 40]), earlier, Decision('starting'), NOW - 5, WINDOWS)
    assert state.last_exit == 'code=exited, status=1/FAILURE'
    decision = decide(unit_obs(RESTARTING, nrestarts=3), state, P, NOW)
    assert decision.reason == 'systemd restarted it 3 times within 600s; last exit: code=exited, status=1/FAILURE'
    # kept while no line says otherwise; a deliberate start forgets it with the crashes
    assert advance(state, unit_obs(RESTARTING, nrestarts=3), decision, NOW, WINDOWS).last_exit == 'code=exited, status=1/FAILURE'
    fresh = unit_obs(SERVING, nrestarts=0, health=200, smoke_ok=True, invocation='deploy-run')
    assert advance(state, fresh, Decision('healthy'), NOW, WINDOWS).last_exit == ''
    # a state written before the field existed reads with none
    old = state.to_json()
    del old['last_exit']
    assert GuardState.from_json(old).last_exit == ''


def test_systemd_giving_up_is_a_crash_loop():
    """systemd 252 keeps Result=exit-code when it gives up (recorded): its journal line says so."""
    assert parse_show(GAVE_UP)['Result'] == 'exit-code'
    patient = dataclasses.replace(P, crash_restarts=9)
    decision = decide(unit_obs(GAVE_UP, journal=GAVE_UP_JOURNAL[-7:]), serving_state(nrestarts=3, restarts=[NOW - 5] * 3), patient, NOW)
    assert (decision.kind, decision.action) == ('crash_loop', 'stop')
    assert decision.reason == ('systemd gave up restarting it (start request repeated too quickly: StartLimitBurst reached); '
                               'last exit: code=exited, status=1/FAILURE')
    assert decide(unit_obs(GAVE_UP), serving_state(nrestarts=3), patient, NOW).kind == 'inactive'


def test_a_deliberate_start_forgets_earlier_crashes():
    state = serving_state(nrestarts=3, restarts=[NOW - 60, NOW - 50, NOW - 40])
    fresh = unit_obs(SERVING, nrestarts=0, health=200, smoke_ok=True, invocation='deploy-run')
    assert advance(state, fresh, Decision('healthy'), NOW, WINDOWS).restarts == []


# ------------------------------------------------------------------------------------------------ decide: gpu fault
XID119 = text('nvidia_health', 'xid119-gsp-timeout-h100-dmesg', 'kernel_log.txt')


def test_a_new_xid_of_the_servers_gpu_is_a_gpu_fault_that_stops_never_restarts():
    seen = line_keys('[Sun Feb 23 16:20:00 2025] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.161.08\n')
    faults = new_fault_lines(XID119, seen, {'0000:9b:00'})
    assert len(faults) == 1 and faults[0].startswith('GPU 0000:9b:00: Xid 119 (GSP RPC Timeout; NVIDIA: RESET_GPU) x5, last: ')
    assert faults[0].endswith("name=gpud, Timeout after 6s of waiting for RPC response from GPU4 GSP! "
                              "Expected function 76 (GSP_RM_CONTROL) (0x20803032 0x58c).'")
    obs = unit_obs(SERVING, health=200, smoke_ok=True, new_faults=faults)
    decision = decide(obs, serving_state(), P, NOW)
    assert (decision.kind, decision.action) == ('gpu_fault', 'stop')
    assert new_fault_lines(XID119, seen, {'0000:19:00'}) == [], 'another GPU\'s Xid is not this server\'s fault'
    assert new_fault_lines(XID119, line_keys(XID119), {'0000:9b:00'}) == [], 'lines seen before are not new'
    assert new_fault_lines(XID119 + XID119, line_keys(XID119), {'0000:9b:00'})[0].split(' last')[0].endswith('x5,'), 'the same lines again are new'


def test_lines_already_in_the_log_at_the_first_round_are_not_the_guards():
    obs = unit_obs(SERVING, health=200, smoke_ok=True, new_faults=['GPU 0000:9b:00: Xid 119'], first_round=True)
    assert decide(obs, GuardState(), P, NOW).kind != 'gpu_fault'


def test_a_gone_gpu_is_a_gpu_fault_and_an_app_xid_is_not():
    gone = unit_obs(SERVING, health=200, smoke_ok=True, gone_gpus=['0000:0b:00 (nvidia-smi: Unable to determine the device handle)'])
    assert decide(gone, serving_state(), P, NOW).kind == 'gpu_fault'
    app = text('nvidia_health', 'xid13-xid109-dmesg', 'kernel_log.txt').split('\n')[1]  # an Xid 13: the application's
    assert new_fault_lines(app + '\n', [], {'0000:cb:00'}) == []


def test_held_until_someone_starts_it_again():
    held = serving_state(held='gpu_fault: Xid 119', held_invocation=INVOCATION)
    stopped = unit_obs(SERVING, active_state='inactive', sub_state='dead', invocation='')
    assert decide(stopped, held, P, NOW).kind == 'held'
    restarted = unit_obs(SERVING, health=200, smoke_ok=True, invocation='deploy-run')
    assert decide(restarted, held, P, NOW).kind == 'healthy'
    assert advance(held, restarted, Decision('healthy'), NOW, WINDOWS).held == ''
    # started and stopped again between two rounds (found by the guard molecule scenario): not the guard's hold any more
    gone_again = unit_obs(SERVING, active_state='inactive', sub_state='dead', invocation='operator-run')
    assert decide(gone_again, held, P, NOW).kind != 'held'
    assert advance(held, gone_again, decide(gone_again, held, P, NOW), NOW, WINDOWS).held == ''


def test_a_stopped_unit_is_not_the_guards_business():
    stopped = unit_obs(SERVING, active_state='inactive', sub_state='dead', result='success')
    assert decide(stopped, serving_state(), P, NOW).kind == 'inactive'


# ------------------------------------------------------------------------------------------------ state, record, report
def test_record_counts_the_event_holds_and_remembers_the_restart():
    new = advance(serving_state(), unit_obs(SERVING), Decision('gpu_fault', 'stop', 'Xid 119'), NOW, WINDOWS)
    event = record(new, Decision('gpu_fault', 'stop', 'Xid 119'), ActionOutcome('stop', outcome='stopped in 1.2s', held='gpu_fault: Xid 119'),
                   INVOCATION, 20)
    assert (new.counters, new.actions, new.held, new.held_invocation) == ({'gpu_fault': 1}, {'stop': 1}, 'gpu_fault: Xid 119', INVOCATION)
    assert report.event_line('sglang.service', event) == 'llmops.sglang guard: sglang.service: gpu_fault -> stop: Xid 119; stopped in 1.2s'
    restarted = advance(serving_state(failures=1), unit_obs(SERVING), Decision('hung', 'restart', 'x', True), NOW, WINDOWS)
    record(restarted, Decision('hung', 'restart', 'x', True),
           ActionOutcome('restart', restarted=True, restart={'invocation': 'run-2'}, outcome='restarted'), INVOCATION, 20)
    assert (restarted.guard_restarts, restarted.failures, restarted.serving_invocation) == ([NOW], 0, 'run-2')


def test_metrics_name_every_kind_from_the_first_round():
    state = GuardState(counters={'hung': 2}, actions={'restart': 1}, last_round=NOW)
    metrics = report.prometheus_text(state, 'sglang.service')
    assert 'sglang_guard_events_total{unit="sglang.service",kind="hung"} 2.0' in metrics.splitlines()
    assert 'sglang_guard_events_total{unit="sglang.service",kind="gpu_fault"} 0.0' in metrics.splitlines()
    assert '# TYPE sglang_guard_events_total counter' in metrics.splitlines()
    assert report.metrics_path_beside('/var/lib/node_exporter/textfile_collector/sglang.prom', 'sglang.service') == \
        '/var/lib/node_exporter/textfile_collector/sglang-guard.prom'


def test_state_round_trips_and_a_damaged_file_is_set_aside(tmp_path):
    path = str(tmp_path / 'guard.json')
    state = serving_state(counters={'hung': 1})
    write(path, state)
    assert read(path)[0] == state
    with open(path, 'w') as handle:
        handle.write('{"rounds": "many"}')
    fresh, damage = read(path)
    assert fresh == GuardState() and 'rounds' in damage.why and os.path.exists(damage.kept_as)


def test_settings_refused_with_what_to_do():
    found = problems(GuardConfig(url='127.0.0.1:30000', interval=10, smoke_timeout=20, metrics_path='/x/guard.txt',
                                 gateway=GatewaySettings(url='http://gw:30080', worker_url='node1:30000')))
    assert [f.split(' ')[0] for f in found] == ['url', 'smoke_timeout', 'metrics_path', 'gateway.worker_url']
    assert problems(GuardConfig()) == []
    assert GuardConfig.from_json(json.loads(GuardConfig(gateway=GatewaySettings('http://g', 'http://w')).text())).gateway.url == 'http://g'


def test_the_installed_code_is_the_loaded_modules_own_source(tmp_path):
    sources = gi.runtime_sources()
    round_file = 'ansible_collections/llmops/sglang/plugins/module_utils/guard/_round.py'
    with open(sys.modules['ansible_collections.llmops.sglang.plugins.module_utils.guard._round'].__file__, 'rb') as handle:
        assert sources[round_file] == handle.read()
    assert sources['ansible_collections/__init__.py'] == b''
    layout = gi.Layout('sglang-guard', str(tmp_path / 'lib-dir'), str(tmp_path / 'guard.json'), unit_dir=str(tmp_path / 'units'))
    wanted = gi.wanted_files(layout, GuardConfig(interval=7), '/usr/bin/python3', sources)
    todo = gi.plan(wanted)
    gi.apply(wanted, todo, [])
    assert gi.plan(wanted) == [], 'a second run changes nothing'
    assert oct(os.stat(layout.config_path).st_mode & 0o777) == '0o600'
    assert 'OnUnitActiveSec=7\n' in open(layout.timer).read()
    stale = tmp_path / 'lib-dir' / 'lib' / 'old.py'
    stale.write_text('')
    assert gi.stale_files(layout, wanted) == [str(stale)]


def test_a_round_leaves_nothing_stale_beside_its_code(tmp_path):
    """Found by the guard molecule scenario's idempotence step: the rounds' __pycache__ made every install a change."""
    layout = gi.Layout('sglang-guard', str(tmp_path / 'lib-dir'), str(tmp_path / 'guard.json'), unit_dir=str(tmp_path / 'units'))
    wanted = gi.wanted_files(layout, GuardConfig(), sys.executable, gi.runtime_sources())
    gi.apply(wanted, gi.plan(wanted), [])
    exec_start = [line for line in open(layout.service).read().splitlines() if line.startswith('ExecStart=')][0]
    python_and_flags = exec_start[len('ExecStart='):].split()[:-3]  # without the entry program and --config FILE
    lib = os.path.join(layout.install_dir, 'lib')
    entry = 'ansible_collections.llmops.sglang.plugins.module_utils.guard._round'
    subprocess.run(python_and_flags + ['-c', 'import sys; sys.path.insert(0, %r); import %s' % (lib, entry)], check=True)
    assert gi.stale_files(layout, wanted) == []


@pytest.mark.parametrize('name', ['systemctl-show-serving.txt', 'systemctl-show-auto-restart.txt', 'systemctl-show-gave-up.txt'])
def test_recorded_unit_states_parse(name):
    props = parse_show(text('guard', name))
    assert set(('ActiveState', 'SubState', 'Result', 'InvocationID', 'NRestarts')) <= set(props)


def test_a_round_only_notes_a_deploy_that_holds_the_host_lock(tmp_path):
    lock = str(tmp_path / 'sglang.lock')
    held = _lock.apply(lock, _lock.Request(state='present', lease=600, holder=_lock.Holder(controller='ctl', user='ops', play='deploy')))
    assert held.acquired
    config = GuardConfig(state_path=str(tmp_path / 'guard.json'), lock_path=lock)
    calls = []
    result = run_once(config, run=lambda argv, data=None: calls.append(argv) or (1, '', ''), which=lambda name: None, log=calls.append)
    assert result['decision'] == {'kind': 'deploying', 'action': 'none', 'reason': "a deploy holds the host lock: ops@ctl, play 'deploy'"}
    assert calls == [], 'nothing observed, nothing done'
    assert read(config.state_path)[0].last_kind == 'deploying'
