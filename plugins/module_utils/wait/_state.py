# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Typed state of llmops.sglang.wait_for_sglang: what one wait round hands to the next, and the progress events
the module hands to the action plugin.

Every class is a dataclass with one ``to_json`` / ``from_json`` (from the JsonRecord base): the action plugin
carries ``WaitState.to_json()`` between rounds, and nothing keeps a list of keys by hand. A state of another
version (an older collection on the controller) is not loaded; the round then starts afresh.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

STATE_VERSION = 2
TERMINAL = ("ready", "crashed", "stalled", "timeout", "error", "rebooted")


class JsonRecord:
    """to_json / from_json for a dataclass. A field whose metadata names a record class (``record``) is nested;
    keys a record does not know are ignored on load, missing ones take the field default."""

    def to_json(self):
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None and f.metadata.get("record"):
                value = value.to_json()
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data):
        if data is None:
            return None
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            record = f.metadata.get("record")
            if record is not None and value is not None:
                value = record.from_json(value)
            kwargs[f.name] = value
        return cls(**kwargs)


@dataclass
class Exited(JsonRecord):
    """The watched process or unit is gone: how it was seen, and when (monotonic seconds)."""
    by: str
    reason: str
    exit_code: Optional[int] = None
    at: Optional[float] = None

    def public(self):
        """The RV(exited) dict of the module's result."""
        return {"by": self.by, "reason": self.reason, "exit_code": self.exit_code}


@dataclass
class WaitError(JsonRecord):
    """A problem on the watcher's side that ends the wait as ``error`` (kind: unit, log, auth, model)."""
    kind: str
    error: Optional[str] = None
    unit: Optional[str] = None
    path: Optional[str] = None
    url: Optional[str] = None
    status: Optional[int] = None
    models: Optional[List[str]] = None


@dataclass
class LogState(JsonRecord):
    """Where the log is read from and what the round remembers of its text."""
    follower: Optional[Dict[str, Any]] = None      # LogFollower.to_state() of a file source
    run_offset: Optional[int] = None               # byte where this run starts in the file
    journal_invocation: Optional[str] = None
    journal_cursor: Optional[str] = None
    journal_stream_failed: Optional[str] = None    # journalctl --follow failed once: poll from then on
    reset: Optional[str] = None                    # appeared / truncated / replaced
    reads: int = 0
    bytes_read: int = 0
    tail: List[str] = field(default_factory=list)
    tail_partial: str = ""
    progress: Optional[int] = None
    scheduler_up: bool = False
    first_log_time: Optional[int] = None           # the run's first SGLang timestamp (seconds, UTC-naive)


@dataclass
class UnitWatch(JsonRecord):
    """The systemd unit as last seen, its first observation, and when to run systemctl show again."""
    props: Optional[Dict[str, Any]] = None
    baseline: Optional[Dict[str, Any]] = None
    main_pid: Optional[List[Any]] = None           # [MainPID, start ticks] seen in /proc
    next_probe: float = 0.0


@dataclass
class HttpWatch(JsonRecord):
    """The last HTTP probe results and the models /v1/models listed."""
    results: Optional[Dict[str, Any]] = None       # RV(http): url, health, v1_models
    key: Optional[List[Any]] = None                # what counts as an HTTP state change
    models: Optional[List[str]] = None
    ok_since: Optional[float] = None               # /health 200 without a break since
    next_slow: float = 0.0


@dataclass
class WaitState(JsonRecord):
    """All a wait remembers between rounds. Times are monotonic seconds of the target host."""
    start: float
    last_change: float
    quiet_since: float
    v: int = STATE_VERSION
    classifier: Optional[Dict[str, Any]] = None    # LogClassifier.to_state()
    log: LogState = field(default_factory=LogState, metadata={"record": LogState})
    unit: UnitWatch = field(default_factory=UnitWatch, metadata={"record": UnitWatch})
    http: HttpWatch = field(default_factory=HttpWatch, metadata={"record": HttpWatch})
    pid_start: Optional[int] = None
    exited: Optional[Exited] = field(default=None, metadata={"record": Exited})
    exit_concluded: bool = False                   # the classifier was told of the exit
    error: Optional[WaitError] = field(default=None, metadata={"record": WaitError})
    crash_at: Optional[float] = None               # when the log decided a crash: start of the settle
    log_quiet_asked: Optional[float] = None        # quiet_since of the quiet the classifier was last asked about
    log_only_crash: bool = False                   # crashed decided from the log alone (no process watched)
    ready_by: Optional[str] = None                 # the readiness rule that decided ready
    ready_at: Optional[float] = None               # when ready was first decided: start of the stability window
    boot_id: Optional[str] = None                  # the host's boot id when the wait began
    rebooted: Optional[List[str]] = None           # [old, new] boot id: the host rebooted during the wait

    @classmethod
    def fresh(cls, now, spent=0.0):
        """A new wait; ``spent`` seconds of it passed before this process could look (the task's start-up), so
        that ``timeout`` counts from the task's start and not from the module's."""
        return cls(start=now - max(0.0, spent), last_change=now, quiet_since=now)

    @classmethod
    def restore(cls, data, now, spent=0.0):
        """The carried state, or a fresh one (see fresh) when there is none or it is of another version. A monotonic
        clock that went back (the host rebooted between rounds) restarts the clock."""
        if not isinstance(data, dict) or data.get("v") != STATE_VERSION or "start" not in data:
            return cls.fresh(now, spent)
        state = cls.from_json(data)
        if now < state.start:
            state.start = state.last_change = state.quiet_since = now
        return state


@dataclass
class ProgressEvent(JsonRecord):
    """One thing the action plugin shows while the wait runs.

    kind: ``stage`` (a new stage was reached), ``progress`` (a progress bar crossed a quarter), ``line`` (a new log
    line, shown at -v), ``dropped`` (count lines of this round were not sent), ``probe`` (a raw probe result, -vvv).
    """
    kind: str
    elapsed: float = 0.0
    stage: Optional[str] = None
    percent: Optional[int] = None
    text: Optional[str] = None
    count: Optional[int] = None
    data: Optional[Dict[str, Any]] = None

    def to_json(self):
        return dict((k, v) for k, v in JsonRecord.to_json(self).items() if v is not None)
