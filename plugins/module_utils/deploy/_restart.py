# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One restart of an SGLang unit, done by one process on the host: stop -> GPU release check -> log size -> start.

Optionally a drain first (a server a rolling change took out of its gateway's rotation): wait until it has nothing in
flight, read from the server itself (``gateway._drain``); a drain past its bound under policy ``fail`` stops the restart
before anything else, the unit untouched.

Optionally ``systemctl reset-failed`` first (the sglang_service role's deploy: the unit's StartLimitBurst= bounds
systemd's own restarts; a deliberate restart must not be refused for them).

The restart used to be four tasks; a controller killed between the stop and the start left the unit stopped until a
rerun. In one process on the host the controller has nothing left to lose between them: once the process runs it
finishes. The loss of the controller's SSH session hangs up the session (SIGHUP, relayed by sudo) and closes its
pipes (SIGPIPE); both are ignored while the unit is down, and the result is written only after the start.

The log size is measured between the stop and the start, so the old run's shutdown lines (SIGTERM, tracebacks of
dying children) stay before the offset the readiness wait reads from.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import dataclasses
import os
import time

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _run_offset as ro
from ansible_collections.llmops.sglang.plugins.module_utils.host._hangup import shielded

ACTIVE_STATES = ('active', 'activating', 'reloading')


@dataclasses.dataclass
class Step:
    """One step of the restart: its name, the exit code (None when not run: check mode), its seconds and a detail."""

    name: str
    rc: int | None = None
    seconds: float = 0.0
    detail: str = ''


@dataclasses.dataclass
class Restart:
    """What a restart did: its steps, the log size measured between stop and start, the GPU release check's result,
    the unit's InvocationID before and after, and the step that failed (None when it ended with the unit active)."""

    unit: str
    steps: list = dataclasses.field(default_factory=list)
    log_size: int | None = None
    release: dict | None = None
    previous_invocation: str = ''
    invocation: str = ''
    active_state: str = ''
    failed_step: str | None = None
    msg: str = ''
    drain: dict | None = None

    def to_json(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data):
        data = dict(data)
        data['steps'] = [Step(**step) for step in data.get('steps') or []]
        return cls(**data)


def plan(daemon_reload, release_check, log_path, enable, run_file='', reset_failed=False, drain=False):
    """The steps of a restart, in order (pure). The run record follows the start at once: a rerun after a controller
    killed before its own sglang_run_offset task then still reads the new run from its first line. The start-rate
    counter is reset before the stop: a failure to reset it leaves the unit untouched. A drain comes first of all: a
    failed one leaves everything as it was (systemd has not even reloaded the new unit)."""
    steps = ['drain'] if drain else []
    steps += ['daemon-reload'] if daemon_reload else []
    if reset_failed:
        steps.append('reset-failed')
    steps.append('stop')
    if release_check:
        steps.append('release')
    if log_path:
        steps.append('measure')
    steps.append('start')
    if log_path and run_file:
        steps.append('record')
    if enable:
        steps.append('enable')
    return steps


def reset_failed_outcome(rc, detail):
    """``(rc, detail)`` of ``systemctl reset-failed``: a unit systemd has not loaded has no counter to reset, which is
    no failure (pure)."""
    if rc != 0 and 'not loaded' in detail:
        return 0, 'not loaded: nothing to reset (%s)' % detail
    return rc, detail


def log_size(path):
    """The size of the log at ``path`` now; 0 when it does not exist yet (a new log starts at 0)."""
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def failure_message(restart, step):
    """What failed, what state the unit is in and what to do (one message per failing step)."""
    unit = restart.unit
    if step.name == 'drain':
        return ('the server still has requests in flight: %s; %s was not touched'
                % ((restart.drain or {}).get('reason') or step.detail, unit))
    if step.name == 'release':
        return ('%s. %s stays stopped: a start now would fail to allocate GPU memory; free the GPUs, then rerun.'
                % ((restart.release or {}).get('msg') or 'the GPUs of %s were not released' % unit, unit))
    if step.name == 'stop':
        return ('systemctl stop %s failed (rc=%s): %s. The unit was not started again; see systemctl status %s.'
                % (unit, step.rc, step.detail, unit))
    if step.name == 'record':
        return ('%s was restarted, but %s. The next run reads its log from the end of the file.' % (unit, step.detail))
    if step.name == 'start':
        return ('systemctl start %s failed (rc=%s) after the stop: %s. See systemctl status %s and journalctl -u %s.'
                % (unit, step.rc, step.detail, unit, unit))
    return ('systemctl %s %s failed (rc=%s): %s. The unit was %s.'
            % (step.name, unit, step.rc, step.detail, 'started' if step.name == 'enable' else 'not touched'))


class Restarter:
    """Runs the plan on the host. ``run`` is a ``_command`` runner, ``release`` a callable returning the GPU release
    check's result ({'ok', 'msg', ...}), ``show`` a callable returning the unit's {'ActiveState', 'InvocationID'}."""

    def __init__(self, unit, systemctl, run, release, show, log_path='', run_file='', drain=None):
        self.unit = unit
        self.drain = drain  # a callable returning the drain's result ({'outcome', 'reason', ...}); None: no drain
        self.systemctl = systemctl
        self.run = run
        self.release = release
        self.show = show
        self.log_path = log_path
        self.run_file = run_file

    def _act(self, name, result):
        if name == 'drain':
            result.drain = self.drain()
            return (0 if result.drain.get('outcome') in ('idle', 'proceed') else 1), result.drain.get('reason') or ''
        if name == 'measure':
            result.log_size = log_size(self.log_path)
            return 0, '%d bytes' % result.log_size
        if name == 'record':
            return self._record(result.log_size)
        if name == 'release':
            result.release = self.release()
            return (0 if result.release.get('ok') else 1), (result.release.get('summary') or '')
        argv = [self.systemctl, name] if name == 'daemon-reload' else [self.systemctl, name, '--', self.unit]
        rc, out, err = self.run(argv)
        detail = (err or out or '').strip()[-300:]
        return reset_failed_outcome(rc, detail) if name == 'reset-failed' else (rc, detail)

    def _record(self, size):
        invocation = self.show().get('InvocationID', '')
        if not invocation:
            return 0, 'no InvocationID: the unit is not running, nothing to record'
        try:
            ro.write(self.run_file, ro.RunRecord(invocation=invocation, offset=int(size or 0)))
        except OSError as err:
            return 1, 'cannot write the run record %s: %s' % (self.run_file, err)
        return 0, self.run_file

    def restart(self, steps):
        """Every step in order, SIGHUP and SIGPIPE ignored throughout; stops at the first failure."""
        result = Restart(unit=self.unit, previous_invocation=self.show().get('InvocationID', ''))
        with shielded():
            for name in steps:
                began = time.monotonic()
                rc, detail = self._act(name, result)
                step = Step(name=name, rc=rc, seconds=round(time.monotonic() - began, 3), detail=detail)
                result.steps.append(step)
                if rc != 0:
                    result.failed_step = name
                    result.msg = failure_message(result, step)
                    break
            props = self.show()
        result.invocation = props.get('InvocationID', '')
        result.active_state = props.get('ActiveState', '')
        if result.failed_step is None and result.active_state not in ACTIVE_STATES:
            result.failed_step = 'start'
            result.msg = ('%s is %s right after its start; see systemctl status %s and journalctl -u %s.'
                          % (self.unit, result.active_state or 'unknown', self.unit, self.unit))
        elif result.failed_step is None:
            result.msg = 'restarted %s (%s)' % (self.unit, ', '.join('%s %.1fs' % (s.name, s.seconds) for s in result.steps))
        return result

    def preview(self, steps):
        """Check mode: what a restart would do, and the log size it would start from; nothing is run."""
        result = Restart(unit=self.unit, steps=[Step(name=name) for name in steps])
        props = self.show()
        result.previous_invocation = result.invocation = props.get('InvocationID', '')
        result.active_state = props.get('ActiveState', '')
        result.log_size = log_size(self.log_path) if self.log_path else None
        result.msg = 'would restart %s (%s)' % (self.unit, ', '.join(steps))
        return result
