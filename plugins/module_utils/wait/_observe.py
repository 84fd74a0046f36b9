# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The observe step of llmops.sglang.wait_for_sglang: log text through the classifier (LogWatch), and the unit, the
process id and HTTP (ProbeWatch). Both write only into the round's WaitState and its event list; nothing here
decides the outcome (that is wait._decide) or sleeps.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import calendar
import re

from ansible_collections.llmops.sglang.plugins.module_utils.host import _procfs
from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _probe as probe
from ansible_collections.llmops.sglang.plugins.module_utils.log import _rules as rules
from ansible_collections.llmops.sglang.plugins.module_utils.wait._state import Exited, ProgressEvent, WaitError

TAIL_LINES = 30
MAX_LINE_CHARS = 1000
MAX_NEW_LINES = 200
MAX_PROBES = 10
READ_CHUNK = 256 * 1024      # bytes fed to the classifier at a time: the deadline is checked between chunks
PROGRESS_STAGES = ("load_weights", "cuda_graph")
SLOW_HTTP_PROBE = 2.0        # HTTP probe interval before the log shows the port open
UNIT_PROBE_EVERY = 2.0       # systemctl show interval while the unit's MainPID is alive (checked in /proc every sleep)

# Loading / capture progress bars of tqdm ("Loading safetensors checkpoint shards:  57% Completed | 4/7",
# "Capturing batches (bs=8 avail_mem=7.19 GB):  12%|...").
_PROGRESS_RE = re.compile(r":\s*(\d{1,3})%(?:\||\s+Completed)")
# Ranks >= 1 of a multi-node start never print the ready line; these lines mean their schedulers are up.
_SCHEDULER_UP_RE = re.compile(r"max_total_num_tokens=|(?i:capture .*graph end)")
# SGLang's own line prefix "[2026-08-01 23:37:38" (optionally "[2026-08-01 23:37:38.123 TP0]").
LOG_TIME_RE = re.compile(r"(?m)^\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


def stage_index(stage):
    """The stage's position in startup order; -1 for none (the classifier's table, which has no entry for None)."""
    return rules.STAGE_INDEX.get(stage, -1)


def log_seconds(match):
    """Seconds since the epoch (UTC-naive) of a LOG_TIME_RE match; only differences are used."""
    y, mo, d, h, mi, sec = (int(g) for g in match.groups())
    return calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0))


def display_line(line):
    """The classifier's display_line (the one ANSI and carriage-return rule), bounded for messages and progress."""
    line = rules.display_line(line)
    if line is not None and len(line) > MAX_LINE_CHARS:
        line = line[:MAX_LINE_CHARS] + "..."
    return line


class Events:
    """The progress events of one round, bounded: at most MAX_NEW_LINES log lines (the rest counted) and the last
    MAX_PROBES probe results."""

    def __init__(self):
        self.items = []
        self.lines = 0
        self.dropped = 0
        self.probes = []

    def add(self, kind, elapsed, **fields):
        self.items.append(ProgressEvent(kind=kind, elapsed=round(elapsed, 1), **fields))

    def line(self, text, elapsed):
        if self.lines < MAX_NEW_LINES:
            self.lines += 1
            self.add("line", elapsed, text=text)
        else:
            self.dropped += 1

    def probe(self, record):
        self.probes = (self.probes + [record])[-MAX_PROBES:]

    def to_json(self):
        out = [e.to_json() for e in self.items]
        if self.dropped:
            out.append(ProgressEvent(kind="dropped", count=self.dropped).to_json())
        out.extend(ProgressEvent(kind="probe", data=p).to_json() for p in self.probes)
        return out


class LogWatch:
    """Feeds what the log source gained to the classifier; keeps the tail, the progress bar, the first timestamp and
    the scheduler-up sign of ranks >= 1; turns stage and progress changes into events."""

    def __init__(self, source, classifier, state, node_rank, events):
        self.source = source
        self.classifier = classifier
        self.state = state
        self.node_rank = node_rank
        self.events = events
        self.backlog = False

    def read(self, now, until, clock, force=False):
        """Read in chunks of READ_CHUNK until the source has nothing more or clock() reaches `until`; True when text
        was read; ``backlog`` tells whether more is waiting. A LogSourceError of the source propagates."""
        got = False
        while True:
            text, more = self.source.read(now, READ_CHUNK, force=force)
            if text:
                got = True
                self.feed(text, now)
            self.backlog = more
            if not more or clock() >= until:
                return got
            now = clock()

    def feed(self, text, now):
        st, log = self.state, self.state.log
        st.last_change = st.quiet_since = now
        log.bytes_read += len(text)
        if log.first_log_time is None:
            m = LOG_TIME_RE.search(text)
            if m:
                log.first_log_time = log_seconds(m)
        stage0 = self.classifier.stage
        events = self.classifier.feed(text, now=now)
        scan = text
        if self.classifier.stage != stage0:
            log.progress = None
            # one event per stage reached, also when one chunk spans several (a backlog, a fast start)
            reached = [e.get("stage") for e in events if e.get("type") == "stage"] or [self.classifier.stage]
            for stage in reached:
                self.events.add("stage", now - st.start, stage=stage)
            stage_lines = [e.get("line") for e in events if e.get("type") == "stage" and e.get("line")]
            if stage_lines:  # a progress bar counts from the line that began its stage
                pos = text.rfind(stage_lines[-1][-200:])
                scan = text[pos:] if pos >= 0 else text
        if self.classifier.stage in PROGRESS_STAGES:
            self._progress(scan, now)
        self._lines(text, now)

    def _progress(self, scan, now):
        log = self.state.log
        bucket0 = None if log.progress is None else min(log.progress, 100) // 25
        for m in _PROGRESS_RE.finditer(scan):
            log.progress = int(m.group(1))
        if log.progress is not None and min(log.progress, 100) // 25 != bucket0:
            self.events.add("progress", now - self.state.start, stage=self.classifier.stage, percent=log.progress)

    def _lines(self, text, now):
        log = self.state.log
        lines = (log.tail_partial + text).split("\n")
        log.tail_partial = lines.pop()[-4 * MAX_LINE_CHARS:]
        if self.node_rank >= 1 and not log.scheduler_up:
            log.scheduler_up = any("server_args=" not in ln and _SCHEDULER_UP_RE.search(ln) for ln in lines)
        log.tail = (log.tail + [display_line(ln) for ln in lines[-TAIL_LINES:]])[-TAIL_LINES:]
        elapsed = now - self.state.start
        room = max(0, MAX_NEW_LINES - self.events.lines)
        for ln in lines[:room]:
            self.events.line(display_line(ln), elapsed)
        self.events.dropped += max(0, len(lines) - room)

    def tail(self):
        tail = list(self.state.log.tail)
        if self.state.log.tail_partial:
            tail.append(display_line(self.state.log.tail_partial))
        return tail[-TAIL_LINES:]


class ProbeWatch:
    """The systemd unit, the process id and the HTTP endpoints, probed on the round's ticks."""

    def __init__(self, params, state, run_command, events):
        self.p = params
        self.state = state
        self.run_command = run_command
        self.events = events

    def probe_all(self, now, log_status, log_stage, log_watched):
        if (self.p.unit or self.p.pid) and not self.probe_boot():
            return  # a new boot: the unit and the process are not the ones this wait began with
        gone = self.state.exited is not None  # nothing more to learn from a process or unit that is gone
        if self.p.unit and not gone and self._unit_due(now):
            self.probe_unit(now)
            self.state.unit.next_probe = now + UNIT_PROBE_EVERY
        if self.p.pid and not gone:
            self.probe_pid(now)
        if self._http_wanted(now, log_status, log_stage, log_watched):
            self.probe_http(now)

    def _changed(self, now):
        self.state.last_change = now

    def probe_boot(self):
        """Note the boot id when the wait begins; False (and the old and new id) once the host rebooted since."""
        st, now_id = self.state, _procfs.boot_id()
        if st.boot_id is None:
            st.boot_id = now_id
        elif now_id and st.boot_id and now_id != st.boot_id and st.rebooted is None:
            st.rebooted = [st.boot_id, now_id]
        return st.rebooted is None

    def probe_unit(self, now):
        st, unit = self.state, self.state.unit
        props, err = probe.show_unit(self.p.unit, self.run_command)
        self.events.probe({"probe": "unit", "unit": self.p.unit, "properties": props, "error": err})
        if err:
            unit.props = {"error": err}
            if unit.baseline is None and st.error is None:
                # never seen the unit: nothing about it can be watched (no D-Bus, no permission, not systemd)
                st.error = WaitError(kind="unit", unit=self.p.unit, error=err)
            return
        if props.get("LoadState") == "not-found" and unit.baseline is None:
            unit.props = props
            st.error = WaitError(kind="unit", unit=self.p.unit,
                                 error="systemd has no unit %s (LoadState=not-found)" % self.p.unit)
            return
        if unit.props != props:
            if unit.props is not None:
                self._changed(now)
            unit.props = props
        crashed, reason, code = probe.unit_verdict(props, unit.baseline)
        if unit.baseline is None:
            unit.baseline = probe.unit_baseline(props)
            if not st.log.journal_invocation:
                st.log.journal_invocation = props.get("InvocationID") or None
        if crashed and st.exited is None:
            st.exited = Exited(by="unit", reason="unit %s: %s" % (self.p.unit, reason), exit_code=code, at=now)

    def _unit_due(self, now):
        """systemctl show costs a process and a D-Bus call: run it every UNIT_PROBE_EVERY seconds while the unit's
        main process is alive (a /proc check every `sleep`), and at once when that process is gone or replaced."""
        unit = self.state.unit
        if unit.baseline is None or now >= unit.next_probe:
            return True
        main_pid = (unit.props or {}).get("MainPID") or 0
        if main_pid <= 0:
            return True
        alive, start, _state = probe.pid_identity(main_pid)
        if unit.main_pid is None or unit.main_pid[0] != main_pid:
            unit.main_pid = [main_pid, start]
            return not alive
        known_start = unit.main_pid[1]
        return not alive or (known_start is not None and start is not None and start != known_start)

    def probe_pid(self, now):
        st = self.state
        exited, reason, start = probe.pid_verdict(self.p.pid, st.pid_start)
        self.events.probe({"probe": "pid", "pid": self.p.pid, "exited": exited, "reason": reason})
        if st.pid_start is None and start is not None:
            st.pid_start = start
        if exited and st.exited is None:
            st.exited = Exited(by="pid", reason=reason, exit_code=None, at=now)
            self._changed(now)

    def _http_wanted(self, now, log_status, log_stage, log_watched):
        if not self.p.url or self.p.node_rank >= 1:
            return False
        if self.p.ready_probe in ("health", "health_generate") or not log_watched:
            return True
        if log_status == "ready" or stage_index(log_stage) >= stage_index("http_listening"):
            return True
        # before the log shows HTTP listening: a slow probe (a closed port answers in microseconds), for servers whose
        # log level hides the stage lines
        if now >= self.state.http.next_slow:
            self.state.http.next_slow = now + SLOW_HTTP_PROBE
            return True
        return False

    def probe_http(self, now):
        st, watch = self.state, self.state.http
        results = dict(watch.results or {"url": self.p.url})
        path = "/health_generate" if self.p.ready_probe == "health_generate" else "/health"
        timeout = min(5.0, max(1.0, self.p.sleep * 8))
        h = probe.http_get(self.p.url, path, None, self.p.validate_certs, timeout)
        h.pop("body", None)
        results["health"] = h
        self.events.probe(dict(h, probe="http"))
        answered = h["status"] is not None
        if answered and probe.is_auth_failure(h["status"]):
            st.error = WaitError(kind="auth", url=h["url"], status=h["status"])
        name = self.p.served_model_name
        if answered and st.error is None and (watch.models is None or (name and name not in watch.models)):
            results["v1_models"] = self._probe_models(timeout)
        key = [h["status"], h["refused"], (results.get("v1_models") or {}).get("status")]
        if key != watch.key:
            if watch.key is not None:
                self._changed(now)
            watch.key = key
        watch.results = results
        if h["status"] != 200:
            watch.ok_since = None
        elif watch.ok_since is None:
            watch.ok_since = now

    def _probe_models(self, timeout):
        st = self.state
        m = probe.http_get(self.p.url, "/v1/models", self.p.api_key, self.p.validate_certs, timeout)
        body = m.pop("body", None)
        self.events.probe(dict(m, probe="http"))
        if probe.is_auth_failure(m["status"]):
            st.error = WaitError(kind="auth", url=m["url"], status=m["status"])
        elif m["status"] == 200:
            ids = probe.parse_models(body)
            if ids is not None:
                st.http.models = ids
                if self.p.served_model_name and self.p.served_model_name not in ids:
                    st.error = WaitError(kind="model", url=m["url"], models=ids)
        return m
