# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The decide step of the guard: ``decide(observation, state, params, now) -> Decision``, in the wait's style
(wait/_decide.py): a pure function over what one round observed and what earlier rounds left, a table of rules tried
in order, the first with a verdict wins. It never sleeps, reads or writes.

Kinds: ``held`` (the guard stopped this run itself and waits for someone to start it again), ``gpu_fault`` (a new
Xid of one of the server's GPUs that needs a GPU reset or a reboot, or a GPU nvidia-smi no longer lists),
``crash_loop`` (systemd restarted the unit ``crash_restarts`` times within ``crash_window``, or gave up on it: its
journal says the start request repeated too quickly), ``inactive`` (not running: a deliberate stop is not the guard's business), ``starting`` (not yet
serving in this run), ``healthy``, ``suspect`` (a generation request failed, fewer than ``hung_after`` rounds in a
row), ``hung`` (``hung_after`` rounds in a row: generation timed out or returned nothing while ``/health`` answered
200, or ``/health`` failed after this run had served).

Actions: ``restart`` only for ``hung`` and at most ``restart_max`` times within ``restart_window``; ``stop`` for
``gpu_fault`` and ``crash_loop`` (never a restart: on a failed GPU it only hides the fault; in a crash loop it is
what systemd already does); ``none`` otherwise. A ``hung`` server past its restart budget is left running, out of the
gateway's rotation, for a person to look at.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

ACTIVE = ('active', 'reloading')
STARTING_STATES = ('activating',)
EVENT_KINDS = ('hung', 'crash_loop', 'gpu_fault')


@dataclass(frozen=True)
class Params:
    """The bounds of the decision (the guard's settings of the same names, ``guard/_config``)."""

    hung_after: int
    restart_max: int
    restart_window: float
    crash_restarts: int
    crash_window: float
    start_timeout: float

    @classmethod
    def of(cls, config):
        return cls(hung_after=config.hung_after, restart_max=config.restart_max, restart_window=config.restart_window,
                   crash_restarts=config.crash_restarts, crash_window=config.crash_window, start_timeout=config.start_timeout)


@dataclass
class Observation:
    """What one round saw, as plain values."""

    boot_id: str = ''
    active_state: str = ''
    sub_state: str = ''
    result: str = ''
    invocation: str = ''
    nrestarts: Optional[int] = None
    active_for: Optional[float] = None      # seconds since the unit became active, None when it is not
    health: Optional[int] = None            # GET /health status, None when nothing answered
    smoke_ok: Optional[bool] = None         # None: no generation request was sent
    smoke_error: str = ''
    new_faults: List[str] = field(default_factory=list)   # new fault Xids of the server's GPUs, one line each
    gone_gpus: List[str] = field(default_factory=list)    # the server's GPUs nvidia-smi no longer lists or reaches
    line_keys: List[str] = field(default_factory=list)    # every kernel-log line key read this round
    journal: List[str] = field(default_factory=list)
    journal_cursor: str = ''
    first_round: bool = False

    @property
    def active(self):
        return self.active_state in ACTIVE


@dataclass(frozen=True)
class Decision:
    kind: str
    action: str = 'none'
    reason: str = ''
    failing: bool = False   # this round counts as one more failed generation round

    @property
    def event(self):
        return self.kind in EVENT_KINDS


def _window(times, now, window):
    return [t for t in times if now - t <= window]


# ------------------------------------------------------------------------------------------------ rules
def held(obs, state, _params, _now):
    """The guard stopped this run itself: it waits until someone starts the unit again (a new invocation, also one that
    was stopped again before this round saw it running)."""
    if state.held and obs.invocation in ('', state.held_invocation):
        return Decision('held', reason='stopped by the guard: %s; start it again once fixed (a deploy does)' % state.held)
    return None


def gpu_fault(obs, _state, _params, _now):
    if obs.first_round:
        return None  # the lines already in the log when the guard first looked are the pre-flight's business
    if obs.gone_gpus or obs.new_faults:
        what = ['%s is gone' % gpu for gpu in obs.gone_gpus] + obs.new_faults
        return Decision('gpu_fault', 'stop' if obs.active or obs.active_state in STARTING_STATES else 'none', '; '.join(what))
    return None


GAVE_UP = 'Start request repeated too quickly'
EXITED = 'Main process exited'


def last_exit(journal):
    """'code=exited, status=1/FAILURE' from systemd's journal line of the last exit among ``journal``, or ''."""
    lines = [line for line in journal if EXITED in line]
    return lines[-1].split(EXITED, 1)[1].strip(' ,.') if lines else ''


def _last_exit(journal, state):
    """'; last exit: ...' from this round's journal lines, else the one an earlier round read (the journal is read from
    a cursor: the exit that ended the third crash can be in the round before the one that counts the restart)."""
    said = last_exit(journal) or state.last_exit
    return '; last exit: %s' % said if said else ''


def crash_loop(obs, state, params, now):
    gave_up = obs.result == 'start-limit-hit' or any(GAVE_UP in line for line in obs.journal)
    if gave_up and not obs.active:
        return Decision('crash_loop', 'stop', 'systemd gave up restarting it (%s: StartLimitBurst reached)%s'
                        % (GAVE_UP.lower(), _last_exit(obs.journal, state)))
    restarts = _window(state.restarts, now, params.crash_window)
    if obs.nrestarts is not None and state.nrestarts is not None and obs.nrestarts > state.nrestarts:
        restarts = restarts + [now] * (obs.nrestarts - state.nrestarts)
    if len(restarts) >= params.crash_restarts:
        return Decision('crash_loop', 'stop', 'systemd restarted it %d times within %ds%s'
                        % (len(restarts), params.crash_window, _last_exit(obs.journal, state)))
    return None


def inactive(obs, _state, _params, _now):
    if not obs.active and obs.active_state not in STARTING_STATES:
        return Decision('inactive', reason='the unit is %s (%s): a stop is not the guard\'s business' % (obs.active_state or 'unknown', obs.sub_state))
    return None


def starting(obs, state, params, _now):
    """Not yet serving in this run: the readiness wait's business, until start_timeout."""
    if obs.smoke_ok or state.serving_invocation == obs.invocation:
        return None
    if obs.active_for is not None and obs.active_for >= params.start_timeout:
        return None  # active for longer than any start may take and never served: judged like a hang
    return Decision('starting', reason='not serving yet in this run (GET /health %s)' % (obs.health or 'no answer'))


def healthy(obs, _state, _params, _now):
    if obs.smoke_ok:
        return Decision('healthy', reason='a generation request answered')
    return None


def failing(obs, state, params, now):
    """Generation failed (or /health failed after this run served): a hang once it happened hung_after rounds in a row."""
    count = (state.failures if state.invocation == obs.invocation else 0) + 1
    why = obs.smoke_error or 'GET /health %s' % (obs.health or 'did not answer')
    health = 'while GET /health answered 200' if obs.health == 200 else 'and GET /health %s' % (obs.health or 'did not answer')
    if count < params.hung_after:
        return Decision('suspect', reason='generation failed %s (%d of %d rounds): %s' % (health, count, params.hung_after, why), failing=True)
    reason = 'generation failed %s, %d rounds in a row: %s' % (health, count, why)
    budget = len(_window(state.guard_restarts, now, params.restart_window))
    if budget < params.restart_max:
        return Decision('hung', 'restart', reason, failing=True)
    return Decision('hung', 'none', '%s; restart budget spent (%d of %d within %ds): left running out of rotation for a person to look at'
                    % (reason, budget, params.restart_max, params.restart_window), failing=True)


RULES = (held, gpu_fault, crash_loop, inactive, starting, healthy, failing)


def decide(obs, state, params, now):
    """The first rule with a decision (``failing`` always has one)."""
    for rule in RULES:
        decision = rule(obs, state, params, now)
        if decision is not None:
            return decision
    raise AssertionError('the last rule always decides')
