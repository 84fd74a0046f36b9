# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the guard does about a decision, within its bounds, and how that ended.

* ``restart`` (a hang, within its budget): out of the gateway's rotation; the restart's own steps (``deploy/_restart``:
  stop, the GPU release check, the log's size, start, the run record), so the stop reaches the unit's whole cgroup
  and ends within the unit's ``TimeoutStopSec`` and no process of the server still holds a GPU when it starts again;
  the readiness wait (``wait/_round``) from the new run's first log line; one generation request; back into rotation
  only then.
* ``stop`` (a GPU fault, a crash loop): out of rotation, ``systemctl stop``, the GPU release check, and the unit is
  held stopped until someone starts it again. Never a start on a GPU that reported a fault.
* ``out_of_rotation`` (a hang past its restart budget): out of rotation, the server left running for a person.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _restart as rs
from ansible_collections.llmops.sglang.plugins.module_utils.host._systemd import SystemdError, show
from ansible_collections.llmops.sglang.plugins.module_utils.preflight._host import PreflightHost, release_params, run_preflight
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._smoke import run_smoke
from ansible_collections.llmops.sglang.plugins.module_utils.wait._round import WaitParams, run_round


@dataclass
class ActionOutcome:
    """How an action ended: ``ok``, one sentence, and the detail of each step."""

    action: str
    ok: bool = True
    outcome: str = ''
    seconds: float = 0.0
    held: str = ''
    restarted: bool = False
    restart: Optional[dict] = None
    wait: Optional[dict] = None
    release: Optional[dict] = None
    gateway: List[dict] = field(default_factory=list)
    in_rotation: Optional[bool] = None

    def to_json(self):
        return asdict(self)


def _holders(release):
    """'pid 4242 sglang::scheduler_TP0 still holds GPU [0]' for each process still on the server's GPUs."""
    holders = ((release or {}).get('checks') or {}).get('gpus', {}).get('details', {}).get('holders') or []
    return ['pid %s %s still holds GPU %s' % (h['pid'], h['title'], h['gpus']) for h in holders if h.get('gpus')]


class Actor:
    """Acts on the host for one decision. ``rotation`` is a ``guard/_gateway.GatewayRotation`` (None: no gateway)."""

    def __init__(self, config, run, which, rotation=None, clock=time.monotonic):
        self.config = config
        self.run = run
        self.which = which
        self.rotation = rotation
        self.clock = clock
        self.systemctl = which('systemctl') or 'systemctl'

    def release(self):
        """The restart's GPU release check after a stop: no process of the server holds its GPUs; the server's own
        orphans (outside the stopped unit's cgroup) are stopped, never another process."""
        c = self.config
        params = release_params(dict(unit=c.unit, user=c.user, environment=c.environment, gpu_devices=c.gpu_devices,
                                     shared_devices=c.shared_devices, cleanup=True, stop_timeout=c.stop_timeout))
        return run_preflight(PreflightHost(self.run, self.which), params)

    def _show(self):
        try:
            return show(self.config.unit, ('ActiveState', 'InvocationID'), self.run, self.systemctl)
        except SystemdError:
            return {}

    def _out(self, outcome):
        if self.rotation is None:
            return True
        moved = self.rotation.out()
        outcome.gateway.append(dict(moved.to_json(), move='out'))
        outcome.in_rotation = not moved.ok
        return moved.ok

    def act(self, decision, state):
        """The action the decision allows; None when there is nothing to do."""
        started = self.clock()
        if decision.action == 'restart':
            outcome = self.restart()
        elif decision.action == 'stop':
            outcome = self.stop(decision)
        elif decision.kind == 'hung' and self.rotation is not None and not state.out_of_rotation:
            outcome = ActionOutcome('out_of_rotation')
            outcome.ok = self._out(outcome)
            outcome.outcome = 'taken out of the gateway\'s rotation and left running' if outcome.ok else outcome.gateway[-1]['detail']
        else:
            return None
        outcome.seconds = round(self.clock() - started, 1)
        return outcome

    def stop(self, decision):
        outcome = ActionOutcome('stop', held='%s: %s' % (decision.kind, decision.reason))
        self._out(outcome)
        began = self.clock()
        rc, out, err = self.run([self.systemctl, 'stop', '--', self.config.unit])
        took = self.clock() - began
        outcome.release = self.release()
        left = _holders(outcome.release)
        outcome.ok = rc == 0 and not left
        if rc != 0:
            outcome.outcome = 'systemctl stop failed (rc=%d): %s' % (rc, (err or out).strip()[-200:])
        else:
            outcome.outcome = 'stopped in %.1fs and held stopped; %s' % (
                took, '; '.join(left) if left else 'no process of the server holds its GPUs')
        return outcome

    def restart(self):
        c = self.config
        outcome = ActionOutcome('restart')
        self._out(outcome)
        steps = rs.plan(False, True, c.log_path, False, c.run_file)
        restarter = rs.Restarter(c.unit, self.systemctl, self.run, self.release, self._show, c.log_path, c.run_file)
        result = restarter.restart(steps)
        outcome.restart = result.to_json()
        outcome.release = result.release
        if result.failed_step:
            outcome.ok, outcome.outcome = False, result.msg
            return outcome
        outcome.restarted = True
        wait = run_round(WaitParams(log_path=c.log_path or None, log_offset=result.log_size if c.log_path else None, unit=c.unit,
                                    url=c.url, api_key=c.api_key, timeout=c.start_timeout, stall_timeout=c.stall_timeout))
        outcome.wait = dict((key, wait.get(key)) for key in ('status', 'stage', 'elapsed', 'msg', 'signature'))
        if wait.get('status') != 'ready':
            outcome.ok = False
            outcome.outcome = 'restarted, but the start was not proven: %s' % (wait.get('msg') or wait.get('status'))
            return outcome
        smoke = run_smoke(c.generation_request())
        if not smoke.ok:
            outcome.ok = False
            outcome.outcome = 'restarted and ready, but generation still fails: %s' % smoke.message()
            return outcome
        outcome.outcome = 'restarted in %.1fs, ready after %.1fs, a generation request answered' % (
            sum(step.seconds for step in result.steps), wait.get('elapsed') or 0.0)
        if self.rotation is not None:
            back = self.rotation.back()
            outcome.gateway.append(dict(back.to_json(), move='in'))
            outcome.in_rotation = back.ok
            outcome.outcome += '; %s' % back.detail
            outcome.ok = back.ok
        return outcome
