# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One wait round of llmops.sglang.wait_for_sglang: observe -> decide -> report, in a loop.

* observe (wait._observe): the log source's new text through the log classifier, the systemd unit, the
  process id and HTTP, written into the round's WaitState;
* decide (wait._decide): a pure ``decide(observation, state, params)`` over a table of rules;
* report (wait._report): the result and its message.

All memory of a wait is a WaitState (wait._state), so the action plugin can run many short rounds (and print
their progress events between them) without losing or double-counting a line. The round reads a backlog in bounded
chunks and checks its deadline between them, so neither ``timeout`` nor a round's length depends on the backlog.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.host._command import local_run
from ansible_collections.llmops.sglang.plugins.module_utils.log._classifier import LogClassifier
from ansible_collections.llmops.sglang.plugins.module_utils.wait._sources import LogSourceError, open_source
from ansible_collections.llmops.sglang.plugins.module_utils.wait._decide import Observation, decide
from ansible_collections.llmops.sglang.plugins.module_utils.wait._observe import (
    PROGRESS_STAGES, Events, LogWatch, ProbeWatch, stage_index)
from ansible_collections.llmops.sglang.plugins.module_utils.wait._report import Report
from ansible_collections.llmops.sglang.plugins.module_utils.wait._state import (
    TERMINAL, WaitError, WaitState)

__all__ = ("TERMINAL", "WaitParams", "WaitRound", "run_round")

INNER_POLL = 0.05   # seconds between two looks at a log file (a stat) or a journal stream
READ_SLICE = 0.25   # longest time spent reading a backlog before the round probes and decides again
LINGER = 2.0        # seconds a round goes on after a stage change before it returns (progress output)
LINGER_LATE = 5.0   # from http_listening on: warmup and the ready line follow within seconds
LINGER_QUIET = 0.3  # ... and the round ends only in a pause of the log, so a burst's last (often decisive) line is
LINGER_MAX = 3.0    # read in this round rather than after the next module's start-up; at most this much later
LAST_ROUND_MARGIN = 0.5   # seconds: see WaitRound._last_round


@dataclass
class WaitParams:
    """Validated options of one wait (the module's public options that the round uses)."""
    log_path: Optional[str] = None
    log_offset: Optional[int] = None
    unit: Optional[str] = None
    pid: Optional[int] = None
    url: Optional[str] = None
    served_model_name: Optional[str] = None
    api_key: Optional[str] = None
    validate_certs: bool = True
    timeout: float = 1800
    stall_timeout: float = 900
    stable_for: float = 0
    sleep: float = 0.25
    crash_patterns: List[str] = field(default_factory=list)
    ignore_patterns: List[str] = field(default_factory=list)
    node_rank: int = 0
    ready_probe: str = "auto"
    host: Optional[str] = None

    def __post_init__(self):
        self.url = self.url.rstrip("/") if self.url else None
        self.timeout = float(self.timeout)
        self.stall_timeout = float(self.stall_timeout or 0)
        self.stable_for = float(self.stable_for or 0)
        self.sleep = max(0.01, float(self.sleep))
        self.crash_patterns = list(self.crash_patterns or [])
        self.ignore_patterns = list(self.ignore_patterns or [])
        self.node_rank = int(self.node_rank or 0)
        self.ready_probe = self.ready_probe or "auto"
        self.host = self.host or socket.gethostname()

    @classmethod
    def from_options(cls, options, host=None):
        """The round's parameters from the module's options; options the round does not use (deployment, handled
        by the action plugin) are left out by name, so a misspelled field fails here."""
        names = [n for n in cls.__dataclass_fields__ if n != "host"]
        return cls(host=host, **dict((n, options[n]) for n in names if n in options))


class WaitRound:
    """Runs one round of the wait. Construct with the carried state (WaitState.to_json(), or None for the first)."""

    def __init__(self, params, state=None, run_command=None, clock=time.monotonic, sleeper=time.sleep,
                 journal_stream_factory=None, spent=0.0):
        # journal_stream_factory(invocation_id, cursor) -> JournalStream: follow the journal with one
        # `journalctl -f` per round; None = run journalctl once per probe tick instead.
        # spent: seconds this round's process took to start (with the controller's share in a first round, see
        # WaitState.fresh); a round that would end so close to the timeout that the next one could not start in time
        # goes on to the timeout itself.
        self.p = params
        self.startup = max(0.0, spent)
        self.clock = clock
        self.sleeper = sleeper
        self.state = WaitState.restore(state, clock(), spent)
        self.events = Events()
        self.classifier = LogClassifier(params.crash_patterns, params.ignore_patterns, state=self.state.classifier)
        run_command = run_command or local_run
        self.source = None
        try:
            self.source = open_source(params.log_path, params.log_offset, params.unit, self.state.log, run_command,
                                      journal_stream_factory, params.sleep, self.events.probes)
        except OSError as exc:
            self.state.error = WaitError(kind="log", path=params.log_path, error="%s" % exc)
        self.log = LogWatch(self.source, self.classifier, self.state, params.node_rank, self.events) if self.source else None
        self.probes = ProbeWatch(params, self.state, run_command, self.events)

    def run(self, round_seconds=None):
        """Run the round. round_seconds None = until a terminal status (the module called without the action)."""
        try:
            return self.result(self._loop(round_seconds))
        finally:
            if self.source is not None:
                self.source.close()

    # ---------------------------------------------------------------------------------------------- the loop
    def _loop(self, round_seconds):
        t0 = self.clock()
        round_end = None if round_seconds is None else t0 + round_seconds
        stage0, bucket0 = self.classifier.stage, self._bucket()
        next_probe, probed_ready, changed_at = t0, False, None
        while True:
            now = self.clock()
            backlog = self._read(now, min(now + READ_SLICE, round_end if round_end is not None else now + READ_SLICE,
                                          self.state.start + self.p.timeout))
            ready_line = self.classifier.status == "ready"
            if now >= next_probe or (ready_line and not probed_ready):
                probed_ready = ready_line
                self._probe(self.clock())
                next_probe = now + self.p.sleep
            verdict = self._decide(self.clock())
            if verdict.status is not None:
                return verdict.status
            now = self.clock()
            if round_end is not None and not self._last_round(now):
                if now >= round_end:
                    return "starting"
                if changed_at is None and (self.classifier.stage != stage0 or self._bucket() != bucket0):
                    changed_at = now
                # Return soon after a change so the action plugin can print it, but linger a little: the decisive line
                # (a crash right after "Capture cuda graph begin", the ready line right after warmup) often follows a
                # stage change closely, and would otherwise fall into the gap while the next round starts.
                if changed_at is not None:
                    late = stage_index(self.classifier.stage) >= stage_index("http_listening")
                    over = now - changed_at - (LINGER_LATE if late else LINGER)
                    if over >= 0 and (now - self.state.quiet_since >= LINGER_QUIET or over >= LINGER_MAX):
                        return "starting"
            if not backlog:
                self.sleeper(max(0.005, self._pause(next_probe)))

    def _last_round(self, now):
        """Whether the next round could not start before the timeout: its module start-up (as long as this round's,
        plus a margin) would carry the verdict past it, so this round goes on to the verdict."""
        return self.state.start + self.p.timeout - now <= 2 * self.startup + LAST_ROUND_MARGIN

    def _pause(self, next_probe):
        if self.source is not None and self.source.live:
            return min(INNER_POLL, self.p.sleep)
        return next_probe - self.clock()

    def _bucket(self):
        pr = self.state.log.progress
        return None if pr is None or self.classifier.stage not in PROGRESS_STAGES else min(pr, 100) // 25

    def _read(self, now, until, force=False):
        """Read the log up to `until`; True when a backlog is left (the caller goes on without sleeping)."""
        if self.log is None or self.state.error is not None:
            return False
        try:
            self.log.read(now, until, self.clock, force=force)
        except LogSourceError as exc:
            self.state.error = WaitError(kind="log", path=self.p.log_path, error="%s" % exc)
            return False
        return self.log.backlog

    def _probe(self, now):
        gone_before = self.state.exited is not None
        self.probes.probe_all(now, self.classifier.status, self.classifier.stage, self.source is not None)
        if self.state.exited is not None and not gone_before:
            # the lines a dying server wrote just before its exit are read before anything is decided
            self._read(now, now + READ_SLICE, force=True)

    # ---------------------------------------------------------------------------------------------- decide and act
    def observe(self, now):
        st, c = self.state, self.classifier
        if c.status == "crashed" and st.crash_at is None:
            st.crash_at = now
        health = ((st.http.results or {}).get("health") or {}).get("status")
        name = self.p.served_model_name if self.p.url else None
        exited_at = None if st.exited is None else (st.exited.at if st.exited.at is not None else now)
        return Observation(
            elapsed=now - st.start, since_change=now - st.last_change, quiet_for=now - st.quiet_since,
            log_watched=self.source is not None, log_status=c.status, log_stage=c.stage,
            settled=c.settled, process_watched=bool(self.p.pid or self.p.unit),
            exited_for=None if exited_at is None else max(0.0, now - exited_at),
            crash_for=None if st.crash_at is None else now - st.crash_at,
            health=health, health_ok_for=None if st.http.ok_since is None else now - st.http.ok_since,
            model_ok=not name or name in (st.http.models or []), scheduler_up=st.log.scheduler_up,
            quiet_asked=st.log_quiet_asked is not None and st.log_quiet_asked == st.quiet_since,
            ready_for=None if st.ready_at is None else now - st.ready_at,
            post_ready_crash=bool(c.post_ready_crash))

    def _decide(self, now):
        for _step in range(3):  # an act changes what is observed: decide again, at most twice
            verdict = decide(self.observe(now), self.state, self.p)
            if verdict.act is None:
                break
            self._act(verdict, now)
        if verdict.status == "ready":
            self.state.ready_by = verdict.reason
        return verdict

    def _act(self, verdict, now):
        st, c, act = self.state, self.classifier, verdict.act
        if act == "begin_stability":
            st.ready_at, st.ready_by = now, verdict.reason
            self.events.add("stage", now - st.start, stage="stability")
        elif act == "conclude_exit":
            self._read(now, now + READ_SLICE, force=True)
            if c.status == "starting":
                c.flush(now=now)
            if c.status == "starting":
                c.process_exited(st.exited.exit_code, now=now)
            st.exit_concluded = True
        elif act == "ask_log_quiet":
            st.log_quiet_asked = st.quiet_since
            if c.log_quiet(now=now) and c.status == "crashed":
                st.log_only_crash = True

    # ---------------------------------------------------------------------------------------------- report
    def result(self, status):
        st = self.state
        st.classifier = self.classifier.to_state()
        if self.source is not None:
            self.source.save()
        report = Report(self.p, st, self.source.kind if self.source else None, self.log.tail() if self.log else [])
        out = report.result(status, self.clock() - st.start, self.classifier.result(),
                            self.source.offset if self.source is not None else None)
        out["_events"] = self.events.to_json()
        out["_state"] = st.to_json()
        return out


def run_round(params, state=None, round_seconds=None, run_command=None):
    """Convenience: one round with module options (dict). Returns the result dict (with '_state' and '_events')."""
    wp = params if isinstance(params, WaitParams) else WaitParams.from_options(params, params.get("host"))
    return WaitRound(wp, state=state, run_command=run_command).run(round_seconds)
