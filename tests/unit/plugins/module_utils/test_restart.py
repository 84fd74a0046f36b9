# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one-process restart (_restart): the plan, the order of its steps on a real log file, a failed release check
that never starts, and a real child process that lives through the hang-up of its session between stop and start.
The unit is a small in-test systemd (a runner that answers systemctl and writes the log as the server would); the
real systemd runs it in tests/integration/test_faults_kill.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _restart as rs
from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _run_offset as ro


def test_the_plan_is_stop_release_measure_start_record_enable_in_that_order():
    assert rs.plan(True, True, '/var/log/sglang.log', True, '/var/lib/sglang/sglang.run.json') == [
        'daemon-reload', 'stop', 'release', 'measure', 'start', 'record', 'enable']
    assert rs.plan(True, True, '/var/log/sglang.log', True) == ['daemon-reload', 'stop', 'release', 'measure', 'start', 'enable']
    assert rs.plan(False, False, '', False) == ['stop', 'start']


class Unit:
    """Answers systemctl like systemd for one unit and appends the server's lines to a real log file."""

    def __init__(self, log):
        self.log = log
        self.calls = []
        self.state = {'ActiveState': 'active', 'InvocationID': 'a' * 32}

    def run(self, argv, data=None):
        self.calls.append(argv[1])
        if argv[1] == 'stop':
            self._append('SIGTERM received, shutting down\nTraceback of a dying child\n')
            self.state = {'ActiveState': 'inactive', 'InvocationID': ''}
        elif argv[1] == 'start':
            self._append('server_args=ServerArgs(...)\n')
            self.state = {'ActiveState': 'active', 'InvocationID': 'b' * 32}
        return 0, '', ''

    def _append(self, text):
        with open(self.log, 'a', encoding='utf-8') as handle:
            handle.write(text)

    def show(self):
        return dict(self.state)


def test_the_log_is_measured_after_the_old_runs_shutdown_lines_and_before_the_new_run(tmp_path):
    log = tmp_path / 'sglang.log'
    log.write_text('old run: The server is fired up and ready to roll!\n')
    unit = Unit(str(log))
    released = []
    run_file = str(tmp_path / 'sglang.run.json')
    restarter = rs.Restarter('sglang.service', 'systemctl', unit.run,
                             lambda: released.append(unit.state['ActiveState']) or {'ok': True, 'summary': 'gpus ok'},
                             unit.show, str(log), run_file)
    result = restarter.restart(rs.plan(True, True, str(log), True, run_file))
    assert unit.calls == ['daemon-reload', 'stop', 'start', 'enable'] and released == ['inactive']
    assert log.read_text()[result.log_size:] == 'server_args=ServerArgs(...)\n'
    assert (result.failed_step, result.previous_invocation, result.invocation, result.active_state) == (None, 'a' * 32, 'b' * 32, 'active')
    assert [step.name for step in result.steps] == ['daemon-reload', 'stop', 'release', 'measure', 'start', 'record', 'enable']
    # the new run is recorded by the restart itself: a rerun after a killed controller reads it from its first line
    assert ro.read(run_file) == (ro.RunRecord(invocation='b' * 32, offset=result.log_size), None)
    assert rs.Restart.from_json(result.to_json()) == result


def test_gpus_not_released_fail_the_restart_and_nothing_is_started(tmp_path):
    unit = Unit(str(tmp_path / 'sglang.log'))
    verdict = {'ok': False, 'summary': 'gpus failed (1 GPU, 1 other holder)',
               'msg': 'pre-flight for sglang.service failed (gpus), nothing was started: gpus: GPU 0 is held by pid 7'}
    result = rs.Restarter('sglang.service', 'systemctl', unit.run, lambda: verdict, unit.show).restart(rs.plan(True, True, '', True))
    assert unit.calls == ['daemon-reload', 'stop'] and result.failed_step == 'release'
    assert result.msg.startswith(verdict['msg'] + '. sglang.service stays stopped: ')
    assert (result.active_state, result.release) == ('inactive', verdict)


def test_a_unit_that_is_not_active_after_its_start_fails_the_start(tmp_path):
    unit = Unit(str(tmp_path / 'sglang.log'))
    unit.run = lambda argv, data=None: (0, '', '')     # systemd accepted the start, the unit died at once
    unit.state = {'ActiveState': 'failed', 'InvocationID': 'c' * 32}
    result = rs.Restarter('sglang.service', 'systemctl', unit.run, None, unit.show).restart(['stop', 'start'])
    assert (result.failed_step, result.active_state) == ('start', 'failed')


def test_check_mode_runs_nothing_and_reports_the_log_size_now(tmp_path):
    log = tmp_path / 'sglang.log'
    log.write_text('12345')
    unit = Unit(str(log))
    result = rs.Restarter('sglang.service', 'systemctl', unit.run, None, unit.show, str(log)).preview(['stop', 'measure', 'start'])
    assert unit.calls == [] and result.log_size == 5 and [step.rc for step in result.steps] == [None, None, None]


CHILD = textwrap.dedent('''
    import os, sys, time
    from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _restart as rs
    with rs.shielded():
        sys.stdout.write('stopped\\n')
        sys.stdout.flush()
        time.sleep(0.5)                       # the session is hung up and its pipe closed meanwhile
        try:
            sys.stdout.write('x' * 65536)
            sys.stdout.flush()
        except BrokenPipeError:
            pass
        with open(sys.argv[1], 'w') as handle:
            handle.write('started')
''')


def test_a_process_in_the_shield_lives_through_the_hangup_and_the_closed_pipe_of_its_session(tmp_path):
    marker = tmp_path / 'started'
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    child = subprocess.Popen([sys.executable, '-c', CHILD, str(marker)], stdout=subprocess.PIPE, env=env)
    assert child.stdout.readline() == b'stopped\n'
    child.stdout.close()                      # the controller's end of the session is gone
    child.send_signal(signal.SIGHUP)          # and sshd (or sudo) hangs up the session
    assert child.wait(timeout=30) in (0, 120)  # 120: Python could not flush stdout at exit; the work was done
    assert marker.read_text() == 'started'


def test_the_start_rate_counter_is_reset_after_the_daemon_reload_and_before_the_stop():
    assert rs.plan(True, True, '/var/log/sglang.log', True, '/var/lib/sglang/sglang.run.json', reset_failed=True) == [
        'daemon-reload', 'reset-failed', 'stop', 'release', 'measure', 'start', 'record', 'enable']
    assert rs.plan(False, False, '', False, reset_failed=True) == ['reset-failed', 'stop', 'start']


def test_reset_failed_outcome():
    assert rs.reset_failed_outcome(0, '') == (0, '')
    # a unit systemd has not loaded has no counter to reset
    rc, detail = rs.reset_failed_outcome(1, 'Failed to reset failed state of unit sglang.service: Unit sglang.service not loaded.')
    assert rc == 0 and detail.startswith('not loaded: nothing to reset')
    assert rs.reset_failed_outcome(1, 'Failed to connect to bus') == (1, 'Failed to connect to bus')


class CounterUnit(Unit):
    """A unit whose reset-failed answers rc/stderr."""

    def __init__(self, log, rc, err):
        super().__init__(log)
        self.reset = (rc, err)

    def run(self, argv, data=None):
        if argv[1] == 'reset-failed':
            self.calls.append('reset-failed')
            return self.reset[0], '', self.reset[1]
        return super().run(argv, data)


def test_a_unit_not_loaded_is_restarted_after_its_reset(tmp_path):
    unit = CounterUnit(str(tmp_path / 'sglang.log'), 1, 'Unit sglang.service not loaded.')
    result = rs.Restarter('sglang.service', 'systemctl', unit.run, lambda: {'ok': True}, unit.show).restart(
        rs.plan(True, True, '', True, reset_failed=True))
    assert unit.calls == ['daemon-reload', 'reset-failed', 'stop', 'start', 'enable'] and result.failed_step is None


def test_a_counter_that_cannot_be_reset_leaves_the_unit_untouched(tmp_path):
    unit = CounterUnit(str(tmp_path / 'sglang.log'), 1, 'Failed to connect to bus')
    result = rs.Restarter('sglang.service', 'systemctl', unit.run, lambda: {'ok': True}, unit.show).restart(
        rs.plan(True, True, '', True, reset_failed=True))
    assert unit.calls == ['daemon-reload', 'reset-failed'] and result.failed_step == 'reset-failed'
    assert result.msg == ('systemctl reset-failed sglang.service failed (rc=1): Failed to connect to bus. The unit was not '
                          'touched.') and result.active_state == 'active'


class Metrics:
    """A real server's /metrics on a real port: ``busy`` requests running for ``seconds`` from its first reading (from
    the first reading, not the server's start: on a loaded machine the drain's first look could come after the window)."""

    def __init__(self, busy, seconds):
        import http.server
        import threading
        import time

        state = {'busy': busy, 'until': None}

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                if state['until'] is None:
                    state['until'] = time.monotonic() + seconds
                running = state['busy'] if time.monotonic() < state['until'] else 0
                body = ('sglang:num_running_reqs{model_name="m"} %d\nsglang:num_queue_reqs{model_name="m"} 0\n' % running).encode()
                self.send_response(200)
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = 'http://127.0.0.1:%d' % self.server.server_address[1]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def drainer(url, timeout, policy='fail'):
    from ansible_collections.llmops.sglang.plugins.module_utils.gateway._drain import DrainSettings, drain_server
    return lambda: drain_server(url, DrainSettings(timeout=timeout, policy=policy, interval=0.05, idle_spacing=0.1)).to_json()


def test_a_drain_is_the_first_step_and_the_stop_waits_for_the_last_request(tmp_path):
    """The roll's drain in the restart: the real server below still runs 2 requests for 0.4 s; the stop comes after."""
    unit, server = Unit(str(tmp_path / 'sglang.log')), Metrics(2, 0.4)
    try:
        restarter = rs.Restarter('sglang.service', 'systemctl', unit.run, lambda: {'ok': True}, unit.show,
                                 drain=drainer(server.url, 30.0))
        result = restarter.restart(rs.plan(True, False, '', True, drain=True))
    finally:
        server.close()
    assert [s.name for s in result.steps] == ['drain', 'daemon-reload', 'stop', 'start', 'enable']
    assert unit.calls == ['daemon-reload', 'stop', 'start', 'enable'] and result.failed_step is None
    assert (result.drain['outcome'], result.drain['in_flight_at_start'], result.drain['drained']) == ('idle', 2, 2)
    assert result.drain['seconds'] >= 0.35 and result.steps[0].seconds >= 0.35


def test_a_failed_drain_touches_nothing_not_even_the_daemon_reload(tmp_path):
    unit, server = Unit(str(tmp_path / 'sglang.log')), Metrics(3, 60)
    try:
        result = rs.Restarter('sglang.service', 'systemctl', unit.run, lambda: {'ok': True}, unit.show,
                              drain=drainer(server.url, 0.3)).restart(rs.plan(True, True, '', True, drain=True))
    finally:
        server.close()
    assert unit.calls == [] and result.failed_step == 'drain' and result.invocation == 'a' * 32
    assert result.msg.startswith('the server still has requests in flight: still 3 request(s) (3 running, 0 waiting) after ')
    assert result.msg.endswith('; sglang.service was not touched')
    assert (result.drain['outcome'], result.drain['still_running'], result.drain['at_timeout']) == ('fail', 3, 3)
