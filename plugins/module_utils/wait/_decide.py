# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The decide step of llmops.sglang.wait_for_sglang: ``decide(observation, state, params) -> Verdict``.

A pure function over what the round observed: it never sleeps, reads or writes. A Verdict either ends the wait
(``status``), asks the round for one more step of its own (``act``: tell the classifier that the process exited, ask
it whether a quiet log proves a crash, or open the stability window after ready), or says keep watching (both None).

The rules are two small tables of pure predicates (in the style of kubernetes.core's ``k8s/waiter.py``, which has
success predicates only): TERMINAL_RULES in the order they are tried, and READY_RULES per readiness mode.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

# After the log decided a crash, keep reading until the classifier says nothing more will refine the verdict, the
# process or unit is gone, SETTLE_QUIET seconds pass without a new line, or SETTLE_MAX seconds in all: the root cause
# (an OOM line, a C++ what(), the traceback's last line) often follows the fatal phrase by a few lines.
SETTLE_QUIET = 1.0
SETTLE_MAX = 3.0
# A log that lags the exit of its process (tee, journald) gets this long before the exit is decided.
EXIT_DRAIN = 0.1
# With the log alone (no pid, no unit), a log quiet for this long is handed to the classifier, which may prove a crash
# from it (a top-level traceback closed by its exception line means the interpreter is exiting).
LOG_QUIET_SECONDS = 2.0
# /health 200 with a silent log for this long is ready (a server logging above info never prints the ready line).
HEALTH_ONLY_SECONDS = 30.0
# Node ranks >= 1: a log quiet for this long after the KV cache stage means the schedulers are up.
RANK_SETTLE_SECONDS = 10.0


@dataclass(frozen=True)
class Observation:
    """What the round saw, as plain values (times in seconds)."""
    elapsed: float                  # since the wait started
    since_change: float             # since new log text or a unit / HTTP / pid change
    quiet_for: float                # since new log text
    log_watched: bool
    log_status: str                 # the classifier's: starting, ready, crashed
    log_stage: str
    settled: bool                   # the classifier expects nothing more that refines its crash verdict
    process_watched: bool           # a pid or unit is watched
    exited_for: Optional[float]     # since the process / unit was seen gone, None while it runs
    crash_for: Optional[float]      # since the log decided the crash
    health: Optional[int]           # status of the last /health probe
    health_ok_for: Optional[float]  # since /health answers 200 without a break
    model_ok: bool                  # served_model_name is listed (or not asked for)
    scheduler_up: bool              # ranks >= 1: a scheduler line showed it is up
    quiet_asked: bool               # the classifier was already asked about this quiet
    ready_for: Optional[float] = None   # since ready was first decided (the stability window), None before
    post_ready_crash: bool = False      # a crash line came after the ready line


@dataclass(frozen=True)
class Verdict:
    status: Optional[str] = None    # ready, crashed, stalled, timeout, error, rebooted; None = not decided
    act: Optional[str] = None       # conclude_exit, ask_log_quiet: the round does this, then decides again
    reason: Optional[str] = None    # which rule decided


KEEP_WATCHING = Verdict()


# ------------------------------------------------------------------------------------------------ readiness rules
def ready_line(obs, _params):
    return obs.log_status == "ready" and obs.model_ok


def health_200(obs, _params):
    return obs.health == 200 and obs.model_ok


def health_and_line(obs, _params):
    """/health 200 proves ready only together with the log's ready line (or when no log is watched): SGLang answers
    200 on /health before warmup on old releases."""
    return obs.health == 200 and obs.model_ok and (obs.log_status == "ready" or not obs.log_watched)


def health_only(obs, _params):
    """/health 200 for HEALTH_ONLY_SECONDS while the log said nothing at all (--log-level warning hides the ready
    line; SGLang 0.5.0rc2+ answers 503 until warmup is done)."""
    return (obs.health == 200 and obs.model_ok and obs.exited_for is None and obs.log_status == "starting"
            and obs.health_ok_for is not None and obs.health_ok_for >= HEALTH_ONLY_SECONDS
            and obs.quiet_for >= HEALTH_ONLY_SECONDS)


def rank_schedulers_up(obs, _params):
    """Node ranks >= 1 print no ready line and open no port: alive, past the KV cache, and a scheduler line (or a
    quiet log) shows the schedulers are up."""
    if obs.exited_for is not None:
        return False
    if obs.log_status == "ready":
        return True
    if obs.log_stage not in _AFTER_KV_CACHE:
        return False
    return obs.scheduler_up or obs.quiet_for >= RANK_SETTLE_SECONDS


_AFTER_KV_CACHE = ("kv_cache", "cuda_graph", "http_listening", "warmup", "ready")

READY_RULES = {
    "log": (ready_line,),
    "health": (health_200,),
    "health_generate": (health_200,),
    "auto": (health_and_line, health_only),
    "rank": (rank_schedulers_up,),
}


def ready_mode(params):
    if params.node_rank >= 1:
        return "rank"
    if params.ready_probe == "log" or not params.url:
        return "log"
    return params.ready_probe


# ------------------------------------------------------------------------------------------------ terminal rules
def host_rebooted(_obs, state, _params):
    """The host's boot id changed since the wait began: a reboot, not a crash of the server."""
    return Verdict("rebooted", reason="boot_id") if state.rebooted else None


def watcher_error(_obs, state, _params):
    return Verdict("error", reason="error") if state.error is not None else None


def crash_from_log(obs, _state, params):
    """The log decided a crash: report it once the settle is over."""
    if obs.log_status != "crashed":
        return None
    if (not obs.log_watched or obs.settled or obs.exited_for is not None or obs.quiet_for >= SETTLE_QUIET
            or (obs.crash_for or 0.0) >= SETTLE_MAX or obs.elapsed >= params.timeout):
        return Verdict("crashed", reason="log")
    return KEEP_WATCHING


def process_gone(obs, state, _params):
    """The process or unit is gone: give a lagging log EXIT_DRAIN, then let the classifier conclude; crashed."""
    if obs.exited_for is None:
        return None
    if state.exit_concluded or obs.log_status == "crashed":
        return Verdict("crashed", reason="exit")
    if obs.log_watched and obs.exited_for < EXIT_DRAIN:
        return KEEP_WATCHING
    return Verdict(act="conclude_exit")


def unstable_after_ready(obs, state, params):
    """Within ``stable_for`` after ready: an exit of the process or unit (a restart counts), or a crash line after the
    ready line, fails the start; at the window's end it is ready. Before ready (or without a window): no verdict."""
    if obs.ready_for is None:
        return None
    if obs.exited_for is not None:
        if obs.log_watched and obs.exited_for < EXIT_DRAIN:
            return KEEP_WATCHING  # the dying server's last lines
        return Verdict("crashed", reason="exit_after_ready")
    if obs.post_ready_crash and (obs.quiet_for >= SETTLE_QUIET or not obs.process_watched):
        return Verdict("crashed", reason="log_after_ready")
    if obs.ready_for >= params.stable_for:
        return Verdict("ready", reason=state.ready_by)
    return KEEP_WATCHING


def ready(obs, _state, params):
    mode = ready_mode(params)
    for rule in READY_RULES[mode]:
        if rule(obs, params):
            if params.stable_for > 0:
                return Verdict(act="begin_stability", reason=rule.__name__)
            return Verdict("ready", reason=rule.__name__)
    return None


def quiet_log(obs, _state, _params):
    """No process watched: a quiet log is handed to the classifier once per quiet."""
    if (obs.log_watched and not obs.process_watched and obs.log_status == "starting"
            and obs.quiet_for >= LOG_QUIET_SECONDS and not obs.quiet_asked):
        return Verdict(act="ask_log_quiet")
    return None


def stalled(obs, _state, params):
    if params.stall_timeout > 0 and obs.since_change >= params.stall_timeout:
        return Verdict("stalled", reason="stall_timeout")
    return None


def timed_out(obs, _state, params):
    return Verdict("timeout", reason="timeout") if obs.elapsed >= params.timeout else None


TERMINAL_RULES = (host_rebooted, watcher_error, unstable_after_ready, crash_from_log, process_gone, ready, quiet_log, stalled, timed_out)


def decide(obs, state, params):
    """The first rule that has a verdict, else KEEP_WATCHING."""
    for rule in TERMINAL_RULES:
        verdict = rule(obs, state, params)
        if verdict is not None:
            return verdict
    return KEEP_WATCHING
