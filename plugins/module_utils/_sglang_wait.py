# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One wait round of llmops.sglang.wait_for_sglang.

A round follows the log (file or journal) through the log classifier of ``_sglang_log``, probes the systemd unit,
the process id and the HTTP endpoints, and decides: ready / crashed / stalled / timeout (terminal) or starting.
All of its memory is a JSON-serialisable state dict, so the action plugin can run many short rounds (and print
progress between them) without losing or double-counting a single line.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import os
import calendar
import re
import socket
import time

from ansible_collections.llmops.sglang.plugins.module_utils import _sglang_probe as probe
from ansible_collections.llmops.sglang.plugins.module_utils._sglang_log import STAGES, LogClassifier, LogFollower, is_exception_line

STATE_VERSION = 1
TERMINAL = ("ready", "crashed", "stalled", "timeout", "error")
TAIL_LINES = 30
MAX_LINE_CHARS = 1000
MAX_NEW_LINES = 200
RANK_SETTLE_SECONDS = 10.0
INNER_POLL = 0.05
PROGRESS_STAGES = ("load_weights", "cuda_graph")
LINGER = 2.0        # seconds a round goes on after a stage change before it returns (progress output)
LINGER_LATE = 5.0   # from http_listening on: warmup and the ready line follow within seconds
HEALTH_ONLY_SECONDS = 30.0  # /health 200 with a silent log for this long is ready (server logging above info)
SLOW_HTTP_PROBE = 2.0       # HTTP probe interval before the log shows the port open
UNIT_PROBE_EVERY = 2.0      # systemctl show interval while the unit's MainPID is alive (checked in /proc every sleep)

# Loading / capture progress bars of tqdm ("Loading safetensors checkpoint shards:  57% Completed | 4/7",
# "Capturing batches (bs=8 avail_mem=7.19 GB):  12%|...").
_PROGRESS_RE = re.compile(r":\s*(\d{1,3})%(?:\||\s+Completed)")
# Ranks >= 1 of a multi-node start never print the ready line; these lines mean their schedulers are up.
_SCHEDULER_UP_RE = re.compile(r"max_total_num_tokens=|(?i:capture .*graph end)")
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

CRASH_HINTS = {
    "cuda_oom": "try a lower --mem-fraction-static or --cuda-graph-max-bs (or a smaller --max-running-requests / "
                "--chunked-prefill-size), and check with nvidia-smi that no other process holds GPU memory",
    "cuda_error": "a CUDA runtime error: check nvidia-smi and the kernel log (dmesg) for Xid errors, rerun with "
                  "CUDA_LAUNCH_BLOCKING=1 to name the failing kernel, and check the driver with llmops.sglang.nvidia_driver_match",
    "nccl_error": "check the NCCL_* environment (NCCL_DEBUG=INFO for details, NCCL_P2P_DISABLE=1, NCCL_IB_DISABLE=1, "
                  "NCCL_SOCKET_IFNAME), that kernel module and user-space driver match (llmops.sglang.nvidia_driver_match), "
                  "and the network between the nodes",
    "import_error": "the venv lacks SGLang's dependencies or has mismatched versions: reinstall sglang with its extras "
                    "in the venv the service uses and check that the unit's ExecStart points at that venv",
    "arg_error": "a server argument or the model configuration was rejected before start: fix the flag or model path "
                 "named in the error line (see the server_args dump at the top of the log)",
    "driver_mismatch": "the NVIDIA kernel module and the user-space libraries differ: run llmops.sglang.nvidia_driver_match "
                       "(fix: true) or reboot into the installed driver",
    "unsupported_arch": "the kernels were not built for this GPU architecture: use a build for this SM (for SM120 see "
                        "llmops.sglang.sglang_patch_sm120) or another --attention-backend / --moe-runner-backend",
    "device_error": "an accelerator runtime error: check nvidia-smi / dmesg for Xid errors and the driver with "
                    "llmops.sglang.nvidia_driver_match; the error context names the failing operator",
    "warmup_failed": "the HTTP server came up but the warmup request failed: read the error context; start once with "
                     "--skip-server-warmup to isolate it and check the model's chat template and config",
    "sigquit_child": "a child process (scheduler, detokenizer) died first: its traceback is in the error context "
                     "or just before the sigquit line",
    "silent_exit": "the process was killed without a traceback: check the kernel log for the OOM killer "
                   "(journalctl -k | grep -i 'killed process'), MemoryMax= and TimeoutStartSec= of the unit",
    "traceback": "read the traceback in error_context; its last line names the root cause",
    "unit_failed": "the unit stopped without a log line that explains it: check 'systemctl status' and 'journalctl -u' "
                   "for the unit (ExecStart path, User=, EnvironmentFile=)",
    "process_exited": "the process exited without a log line that explains it: check its stdout/stderr and the kernel log",
}

STALL_HINTS = {
    "start": "hangs before any SGLang stage: check the model download (HF_HUB_OFFLINE, network, disk space) and the "
             "python environment",
    "init_distributed": "hangs at NCCL init: check driver match (llmops.sglang.nvidia_driver_match), NCCL_P2P_DISABLE=1, "
                        "and the firewall for --dist-init-addr (every node of a multi-node start must be started)",
    "load_weights": "hangs loading weights: check the model path and the throughput of its file system (NFS, HF download)",
    "kv_cache": "hangs allocating the KV cache: check with nvidia-smi for other processes on the GPUs",
    "cuda_graph": "hangs capturing CUDA graphs: try a lower --cuda-graph-max-bs or --disable-cuda-graph; on several GPUs "
                  "check NCCL_P2P_DISABLE=1 and the driver match",
    "http_listening": "the HTTP server is up but the warmup request never ran: check that nothing else answers on the port",
    "warmup": "hangs in the warmup request: the first generation does not finish; check SGLANG_HEALTH_CHECK_TIMEOUT and "
              "start once with --skip-server-warmup to isolate it",
    "ready": "no progress after the ready line",
}


def stage_index(stage):
    try:
        return STAGES.index(stage)
    except ValueError:
        return -1


# SGLang's own line prefix "[2026-08-01 23:37:38" (optionally "[2026-08-01 23:37:38.123 TP0]").
_LOG_TIME_RE = re.compile(r"(?m)^\[(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)")


def _log_seconds(m):
    """Seconds since the epoch (UTC-naive) of a _LOG_TIME_RE match; only differences are used."""
    y, mo, d, h, mi, sec = (int(g) for g in m.groups())
    return calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0))


def _display_line(line):
    """What a terminal shows of a raw log line: ANSI colours removed, last carriage-return segment, bounded."""
    if line is None:
        return None
    line = _ANSI_RE.sub("", line)
    if "\r" in line:
        segs = [s for s in line.split("\r") if s.strip()]
        line = segs[-1] if segs else ""
    if len(line) > MAX_LINE_CHARS:
        line = line[:MAX_LINE_CHARS] + "..."
    return line


def root_cause(context):
    """The last exception line of a traceback in `context` (list of str), or None."""
    for line in reversed(context or []):
        text = (_display_line(line) or "").strip()
        if is_exception_line(text):
            return text
    return None


def _short(text, limit=200):
    text = _display_line(text) or ""
    text = text.strip()
    return text if len(text) <= limit else text[:limit - 4] + " ..."


class WaitParams:
    """Validated options of one wait (module params minus the private ones)."""

    def __init__(self, log_path=None, log_offset=None, unit=None, pid=None, url=None, served_model_name=None,
                 api_key=None, validate_certs=True, timeout=1800, stall_timeout=900, sleep=0.25, crash_patterns=None,
                 ignore_patterns=None, node_rank=0, ready_probe="auto", host=None, **_ignored):
        self.log_path = log_path
        self.log_offset = log_offset
        self.unit = unit
        self.pid = pid
        self.url = url.rstrip("/") if url else None
        self.served_model_name = served_model_name
        self.api_key = api_key
        self.validate_certs = validate_certs
        self.timeout = float(timeout)
        self.stall_timeout = float(stall_timeout or 0)
        self.sleep = max(0.01, float(sleep))
        self.crash_patterns = list(crash_patterns or [])
        self.ignore_patterns = list(ignore_patterns or [])
        self.node_rank = int(node_rank or 0)
        self.ready_probe = ready_probe or "auto"
        self.host = host or socket.gethostname()


class WaitRound:
    """Runs one round of the wait. Construct with the carried state (or None for the first round)."""

    def __init__(self, params, state=None, run_command=None, clock=time.monotonic, sleeper=time.sleep,
                 journal_stream_factory=None):
        self.p = params
        # journal_stream_factory(invocation_id, cursor) -> probe.JournalStream: follow the journal with one
        # `journalctl -f` per round; None = run journalctl once per probe tick instead
        self.journal_stream_factory = journal_stream_factory
        self.stream = None
        self.run_command = run_command or probe.default_run_command
        self.clock = clock
        self.sleeper = sleeper
        now = clock()
        st = dict(state or {})
        if st.get("v") != STATE_VERSION or "start" not in st:
            st = {"v": STATE_VERSION, "start": now, "last_change": now, "follower": None, "classifier": None,
                  "unit_baseline": None, "unit": None, "pid_start": None, "journal_cursor": None,
                  "journal_invocation": None, "http": None, "http_key": None, "models": None, "tail": [],
                  "tail_partial": "", "progress": None, "scheduler_up": False, "exited": None, "error": None,
                  "reads": 0, "bytes_read": 0, "log_reset": None, "run_offset": None, "quiet_since": now,
                  "first_log_time": None}
        if now < st["start"]:  # monotonic clock went back: the host rebooted between rounds
            st["start"] = st["last_change"] = st["quiet_since"] = now
        self.s = st
        self.classifier = LogClassifier(self.p.crash_patterns, self.p.ignore_patterns, state=st.get("classifier"))
        self.follower = None
        if self.p.log_path:
            if st.get("follower") is not None:
                self.follower = LogFollower(self.p.log_path, state=st["follower"])
            else:
                self.follower = LogFollower(self.p.log_path, offset=self.p.log_offset)
                st["run_offset"] = self.follower.offset
        self._stat_key = None
        self.new_lines = []
        self.new_lines_dropped = 0
        self.probes = []
        self.verdict = None

    # ---------------------------------------------------------------------------------------------- log sources
    @property
    def log_source(self):
        if self.p.log_path:
            return "file"
        if self.p.unit:
            return "journal"
        return None

    def _feed(self, text, now):
        if not text:
            return
        self.s["last_change"] = now
        self.s["quiet_since"] = now
        self.s["bytes_read"] += len(text)
        if self.s.get("first_log_time") is None:
            # the run's first SGLang timestamp: stage times in the log are measured from it
            m = _LOG_TIME_RE.search(text)
            if m:
                self.s["first_log_time"] = _log_seconds(m)
        stage0 = self.classifier.stage
        events = self.classifier.feed(text, now=now)
        scan = text
        if self.classifier.stage != stage0:
            self.s["progress"] = None
            stage_lines = [e.get("line") for e in events if e.get("type") == "stage" and e.get("line")]
            if stage_lines:
                pos = text.rfind(stage_lines[-1][-200:])
                scan = text[pos:] if pos >= 0 else text
        if self.classifier.stage in PROGRESS_STAGES:
            for m in _PROGRESS_RE.finditer(scan):
                self.s["progress"] = int(m.group(1))
        buf = self.s["tail_partial"] + text
        lines = buf.split("\n")
        self.s["tail_partial"] = lines.pop()[-4 * MAX_LINE_CHARS:]
        if self.p.node_rank >= 1 and not self.s["scheduler_up"]:
            for ln in lines:
                if "server_args=" not in ln and _SCHEDULER_UP_RE.search(ln):
                    self.s["scheduler_up"] = True
                    break
        shown = [_display_line(ln) for ln in lines[-TAIL_LINES:]]
        self.s["tail"] = (self.s["tail"] + shown)[-TAIL_LINES:]
        room = MAX_NEW_LINES - len(self.new_lines)
        if room > 0:
            self.new_lines.extend(_display_line(ln) for ln in lines[:room])
        self.new_lines_dropped += max(0, len(lines) - max(room, 0))

    def _read_file(self, now, force=False):
        """Cheap os.stat size check, then read only the new bytes. Returns True when text was read."""
        try:
            st = os.stat(self.p.log_path)
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            key = None
        if not force and key == self._stat_key:
            return False
        self._stat_key = key
        got = False
        while True:
            try:
                text = self.follower.read()
            except OSError as exc:
                self.s["error"] = {"kind": "log", "path": self.p.log_path, "error": "%s" % exc}
                return got
            self.s["reads"] += 1
            if self.follower.reset_reason:
                self.s["log_reset"] = self.follower.reset_reason
                if self.follower.reset_reason in ("truncated", "replaced"):
                    self.s["run_offset"] = 0
            if not text:
                break
            got = True
            self._feed(text, now)
            if len(text) < 1024 * 1024:
                break
        return got

    @property
    def journal_streaming(self):
        return self.journal_stream_factory is not None and not self.s.get("journal_stream_failed")

    def _read_journal_stream(self, now, inv):
        if self.stream is None:
            try:
                self.stream = self.journal_stream_factory(inv, self.s.get("journal_cursor"))
            except OSError as exc:
                self.s["journal_stream_failed"] = "%s" % exc
                return False
        text, cursor, ended = self.stream.read()
        if cursor:
            self.s["journal_cursor"] = cursor
        if text:
            self.probes.append({"probe": "journal", "invocation": inv, "bytes": len(text), "stream": True})
            self._feed(text, now)
        if ended:
            failed = self.stream.failed()
            self.stream.close()
            self.stream = None
            if failed:  # e.g. a journalctl without --output-fields: poll from now on
                self.s["journal_stream_failed"] = "journalctl --follow exited with an error"
        return bool(text)

    def close(self):
        if self.stream is not None:
            self.stream.close()
            self.stream = None

    def _read_journal(self, now):
        inv = self.s.get("journal_invocation")
        if not inv:
            return False
        if self.journal_streaming:
            return self._read_journal_stream(now, inv)
        text, cursor, err = probe.read_journal(inv, self.s.get("journal_cursor"), self.run_command)
        self.s["journal_cursor"] = cursor
        self.probes.append({"probe": "journal", "invocation": inv, "bytes": len(text), "error": err})
        if text:
            self._feed(text, now)
            return True
        return False

    def read_log(self, now, force=False, tick=False):
        """Read new log text. The journal is polled (one journalctl run) only on probe ticks, or on every call when
        it is streamed."""
        if self.log_source == "file":
            return self._read_file(now, force)
        if self.log_source == "journal" and (tick or force or self.journal_streaming):
            return self._read_journal(now)
        return False

    # ---------------------------------------------------------------------------------------------- probes
    def probe_unit(self, now):
        props, err = probe.show_unit(self.p.unit, self.run_command)
        self.probes.append({"probe": "unit", "unit": self.p.unit, "properties": props, "error": err})
        if err:
            self.s["unit"] = {"error": err}
            if self.s["unit_baseline"] is None and not self.s["error"]:
                # never seen the unit: nothing about it can be watched (no D-Bus, no permission, not systemd)
                self.s["error"] = {"kind": "unit", "unit": self.p.unit, "error": err}
            return
        if props.get("LoadState") == "not-found" and self.s["unit_baseline"] is None:
            self.s["unit"] = props
            self.s["error"] = {"kind": "unit", "unit": self.p.unit,
                               "error": "systemd has no unit %s (LoadState=not-found)" % self.p.unit}
            return
        if self.s["unit"] != props:
            if self.s["unit"] is not None:
                self.s["last_change"] = now
            self.s["unit"] = props
        baseline = self.s["unit_baseline"]
        crashed, reason, code = probe.unit_verdict(props, baseline)
        if baseline is None:
            self.s["unit_baseline"] = probe.unit_baseline(props)
            if not self.s.get("journal_invocation"):
                self.s["journal_invocation"] = props.get("InvocationID") or None
        if crashed and self.s["exited"] is None:
            self.s["exited"] = {"by": "unit", "reason": "unit %s: %s" % (self.p.unit, reason), "exit_code": code}

    def probe_pid(self, now):
        exited, reason, start = probe.pid_verdict(self.p.pid, self.s["pid_start"])
        self.probes.append({"probe": "pid", "pid": self.p.pid, "exited": exited, "reason": reason})
        if self.s["pid_start"] is None and start is not None:
            self.s["pid_start"] = start
        if exited and self.s["exited"] is None:
            self.s["exited"] = {"by": "pid", "reason": reason, "exit_code": None}
            self.s["last_change"] = now

    def _http_wanted(self, now):
        if not self.p.url or self.p.node_rank >= 1:
            return False
        if self.p.ready_probe in ("health", "health_generate") or self.log_source is None:
            return True
        if self.classifier.status == "ready" or stage_index(self.classifier.stage) >= stage_index("http_listening"):
            return True
        # before the log shows HTTP listening: a slow probe (a closed port answers in microseconds), for servers whose
        # log level hides the stage lines
        if now >= self.s.get("next_slow_http", 0.0):
            self.s["next_slow_http"] = now + SLOW_HTTP_PROBE
            return True
        return False

    def probe_http(self, now):
        http = dict(self.s["http"] or {"url": self.p.url})
        path = "/health_generate" if self.p.ready_probe == "health_generate" else "/health"
        timeout = min(5.0, max(1.0, self.p.sleep * 8))
        h = probe.http_get(self.p.url, path, None, self.p.validate_certs, timeout)
        h.pop("body", None)
        http["health"] = h
        self.probes.append(dict(h, probe="http"))
        answered = h["status"] is not None
        if answered and probe.is_auth_failure(h["status"]):
            self.s["error"] = {"kind": "auth", "url": h["url"], "status": h["status"]}
        need_models = self.s["models"] is None or (
            self.p.served_model_name and self.p.served_model_name not in (self.s["models"] or []))
        if answered and need_models and not self.s["error"]:
            m = probe.http_get(self.p.url, "/v1/models", self.p.api_key, self.p.validate_certs, timeout)
            body = m.pop("body", None)
            http["v1_models"] = m
            self.probes.append(dict(m, probe="http"))
            if probe.is_auth_failure(m["status"]):
                self.s["error"] = {"kind": "auth", "url": m["url"], "status": m["status"]}
            elif m["status"] == 200:
                ids = probe.parse_models(body)
                if ids is not None:
                    self.s["models"] = ids
                    if self.p.served_model_name and self.p.served_model_name not in ids:
                        self.s["error"] = {"kind": "model", "url": m["url"], "models": ids}
        key = [h["status"], h["refused"], (http.get("v1_models") or {}).get("status")]
        if key != self.s["http_key"]:
            if self.s["http_key"] is not None:
                self.s["last_change"] = now
            self.s["http_key"] = key
        self.s["http"] = http
        if h["status"] == 200:
            if self.s.get("health_ok_since") is None:
                self.s["health_ok_since"] = now
        else:
            self.s["health_ok_since"] = None

    def _unit_due(self, now):
        """systemctl show costs a process and a D-Bus call: run it every UNIT_PROBE_EVERY seconds while the unit's
        main process is alive (a /proc check every `sleep`), and at once when that process is gone or replaced."""
        if self.s["unit_baseline"] is None or now >= self.s.get("next_unit_probe", 0.0):
            return True
        main_pid = (self.s["unit"] or {}).get("MainPID") or 0
        if main_pid <= 0:
            return True
        alive, start, _state = probe.pid_identity(main_pid)
        known = self.s.get("unit_main_pid")
        if known is None or known[0] != main_pid:
            self.s["unit_main_pid"] = [main_pid, start]
            return not alive
        return not alive or (known[1] is not None and start is not None and start != known[1])

    def probe_all(self, now):
        if self.p.unit and self._unit_due(now):
            self.probe_unit(now)
            self.s["next_unit_probe"] = now + UNIT_PROBE_EVERY
        if self.p.pid:
            self.probe_pid(now)
        if self.log_source == "journal":
            self.read_log(now, tick=True)
        if self._http_wanted(now):
            self.probe_http(now)

    # ---------------------------------------------------------------------------------------------- decisions
    def _drain(self, now):
        """Read what the log still holds, then end the input: the error line of a dying server comes last."""
        if self.log_source == "file":
            self._read_file(now, force=True)
        elif self.log_source == "journal":
            self._read_journal(now)

    def _settle_crash(self, now):
        """The log proved a crash: give the writer ~0.1-0.3 s to finish the traceback for error_context."""
        if self.log_source is None:
            return
        t_end = now + 0.3
        quiet = 0
        while self.clock() < t_end and quiet < 2:
            self.sleeper(INNER_POLL)
            if self.read_log(self.clock(), force=True):
                quiet = 0
            else:
                quiet += 1

    def _handle_exit(self, now):
        self._drain(now)
        if self.classifier.status == "starting":
            # journald and tee'd logs can lag the process exit by a few milliseconds
            self.sleeper(0.1)
            self._drain(self.clock())
        if self.classifier.status == "starting":
            self.classifier.flush(now=now)
        if self.classifier.status == "starting":
            self.classifier.process_exited(self.s["exited"].get("exit_code"), now=now)

    def _ready_now(self, now):
        c = self.classifier
        exited = self.s["exited"] is not None
        if self.p.node_rank >= 1:
            if exited:
                return False
            if c.status == "ready":
                return True
            if stage_index(c.stage) < stage_index("kv_cache"):
                return False
            return self.s["scheduler_up"] or (now - self.s["quiet_since"] >= RANK_SETTLE_SECONDS)
        model_ok = True
        if self.p.url and self.p.served_model_name:
            model_ok = self.p.served_model_name in (self.s["models"] or [])
        health = ((self.s["http"] or {}).get("health") or {}).get("status")
        if self.p.ready_probe == "log" or not self.p.url:
            return c.status == "ready" and model_ok
        if self.p.ready_probe in ("health", "health_generate"):
            return health == 200 and model_ok
        # auto: /health 200 is only proof together with the log's ready line (or when there is no log at all) ...
        if health == 200 and model_ok and (c.status == "ready" or self.log_source is None):
            return True
        # ... or when /health stayed 200 for HEALTH_ONLY_SECONDS while the log said nothing at all (a server started
        # with --log-level warning never prints the ready line; SGLang 0.5.0rc2+ answers 503 until warmup is done)
        since = self.s.get("health_ok_since")
        if health == 200 and model_ok and since is not None and not exited and c.status == "starting":
            if now - since >= HEALTH_ONLY_SECONDS and now - self.s["quiet_since"] >= HEALTH_ONLY_SECONDS:
                self.s["ready_by"] = "health_only"
                return True
        return False

    def decide(self, now):
        """Return the terminal status, or None to keep waiting."""
        if self.s["error"]:
            return "error"
        if self.classifier.status == "crashed":
            return "crashed"
        if self.s["exited"] is not None:
            self._handle_exit(now)
            return "crashed"
        if self._ready_now(now):
            return "ready"
        if self.p.stall_timeout > 0 and now - self.s["last_change"] >= self.p.stall_timeout:
            return "stalled"
        if now - self.s["start"] >= self.p.timeout:
            return "timeout"
        return None

    def _progress_bucket(self):
        pr = self.s["progress"]
        return None if pr is None else min(pr, 100) // 25

    def run(self, round_seconds=None):
        """Run the round. round_seconds None = until a terminal status (the module called without the action)."""
        try:
            return self._run(round_seconds)
        finally:
            self.close()

    def _run(self, round_seconds):
        t0 = self.clock()
        stage0 = self.classifier.stage
        bucket0 = self._progress_bucket()
        next_probe = t0
        probed_ready = False
        changed_at = None
        status = None
        while True:
            now = self.clock()
            self.read_log(now)
            ready_line = self.classifier.status == "ready"
            if now >= next_probe or (ready_line and not probed_ready):
                probed_ready = ready_line
                self.probe_all(now)
                next_probe = now + self.p.sleep
            if self.classifier.status == "crashed":
                self._settle_crash(now)
            status = self.decide(self.clock())
            if status is not None:
                break
            if round_seconds is not None:
                if now - t0 >= round_seconds:
                    break
                if changed_at is None and (self.classifier.stage != stage0 or self._progress_bucket() != bucket0):
                    changed_at = now
                # Return soon after a change so the action plugin can print it, but linger a little: the decisive line
                # (a crash right after "Capture cuda graph begin", the ready line right after warmup) often follows a
                # stage change closely, and would otherwise fall into the gap while the next round starts.
                if changed_at is not None:
                    late = stage_index(self.classifier.stage) >= stage_index("http_listening")
                    if now - changed_at >= (LINGER_LATE if late else LINGER):
                        break
            if self.log_source == "file" or (self.log_source == "journal" and self.journal_streaming):
                wait = min(INNER_POLL, self.p.sleep)
            else:
                wait = next_probe - self.clock()
            self.sleeper(max(0.005, wait))
        return self.result(status or "starting")

    # ---------------------------------------------------------------------------------------------- results
    def log_offset_end(self):
        return self.follower.offset if self.follower is not None else None

    def _log_tail(self):
        tail = list(self.s["tail"])
        if self.s["tail_partial"]:
            tail.append(_display_line(self.s["tail_partial"]))
        return tail[-TAIL_LINES:]

    def _where(self, lineno):
        if self.log_source == "file":
            w = "log %s" % self.p.log_path
            if lineno:
                off = self.s.get("run_offset") or 0
                w += ", line %d" % lineno if not off else ", line %d after byte %d" % (lineno, off)
            return w
        if self.log_source == "journal":
            w = "journal of %s, InvocationID %s" % (self.p.unit, self.s.get("journal_invocation") or "?")
            if lineno:
                w += ", line %d" % lineno
            return w
        return "no log watched"

    def _stages(self, res):
        out = []
        first = self.s.get("first_log_time")
        for st in res.get("stages") or []:
            t = st.get("time")
            m = _LOG_TIME_RE.match(st.get("line") or "")
            out.append({"stage": st.get("stage"),
                        "elapsed": round(max(0.0, t - self.s["start"]), 1) if isinstance(t, (int, float)) else None,
                        "log_elapsed": (round(max(0.0, _log_seconds(m) - first), 1)
                                        if m and first is not None else (0.0 if st.get("stage") == "start" and first is not None else None)),
                        "line": _display_line(st.get("line"))})
        return out

    def _message(self, status, res, elapsed):
        host = self.p.host
        stage = res["stage"]
        last = _short(res.get("last_line") or (self._log_tail() or [None])[-1])
        exited = self.s["exited"]
        if status == "ready":
            msg = "SGLang on %s is ready after %.1fs" % (host, elapsed)
            if self.p.node_rank >= 1:
                msg += " (node rank %d: weights and KV cache done, schedulers up, process alive)" % self.p.node_rank
            if self.s.get("ready_by") == "health_only":
                msg += (" (/health answered 200 for %ds but the log never printed the ready line: is the server started "
                        "with --log-level above info?)" % HEALTH_ONLY_SECONDS)
            if self.s["models"]:
                msg += "; serving %s" % ", ".join(self.s["models"])
            return msg
        if status == "crashed":
            sig = res["signature"]
            msg = "SGLang on %s crashed after %.1fs at stage %s: %s" % (host, elapsed, stage, sig)
            if res.get("error_line"):
                msg += ': "%s" (%s)' % (_short(res["error_line"]), self._where(res.get("error_lineno")))
            elif exited:
                msg += " (%s; %s)" % (exited["reason"], self._where(None))
            cause = root_cause(res.get("error_context"))
            if cause and cause != _short(res.get("error_line")):
                msg += '; root cause: "%s"' % _short(cause)
            if exited and res.get("error_line"):
                msg += "; %s" % exited["reason"]
            return msg + "; " + CRASH_HINTS.get(sig, CRASH_HINTS["traceback"])
        silent = ""
        if self.log_source is not None and not self.s["bytes_read"]:
            if self.log_source == "file":
                silent = ("; nothing was written to %s since the wait started (offset %s): check that the server logs "
                          "there (the unit's StandardOutput=/StandardError=) and that log_offset is where this run starts"
                          % (self.p.log_path, self.s.get("run_offset")))
            else:
                silent = ("; the journal of %s has no line for InvocationID %s: check the unit's StandardOutput= and "
                          "that the user running the task may read the journal" % (self.p.unit, self.s.get("journal_invocation")))
        if status == "stalled":
            return ("SGLang on %s stalled at stage %s after %.1fs: no new log output and no state change for %ds "
                    "(last log line: \"%s\"; %s); %s; raise stall_timeout if this stage is legitimately slow%s"
                    % (host, stage, elapsed, self.p.stall_timeout, last, self._where(None), STALL_HINTS.get(stage, ""),
                       silent))
        if status == "timeout":
            parts = ["last stage %s" % stage]
            u = self.s["unit"]
            if u and not u.get("error"):
                parts.append("unit %s is %s/%s" % (self.p.unit, u.get("ActiveState"), u.get("SubState")))
            h = (self.s["http"] or {}).get("health")
            if h:
                parts.append("%s -> %s" % (h["url"], h["status"] if h["status"] is not None else h["error"]))
            return ("SGLang on %s did not become ready within %ds: %s; last log line: \"%s\" (%s); raise timeout or read the log%s"
                    % (host, self.p.timeout, ", ".join(parts), last, self._where(None), silent))
        if status == "error":
            e = self.s["error"]
            if e["kind"] == "unit":
                return ("SGLang on %s: cannot watch unit %s: %s; check the unit name (systemctl list-units 'sglang*'), "
                        "or watch the server with pid and log_path when the host does not run systemd" % (host, e["unit"], e["error"]))
            if e["kind"] == "log":
                return ("SGLang on %s: cannot read the log %s (%s); make it readable for the user running the task "
                        "(become: true) or check log_path" % (host, e["path"], e["error"]))
            if e["kind"] == "auth":
                return ("SGLang on %s answers %s with HTTP %s: authentication problem, not waited out; pass api_key (the "
                        "server runs with --api-key) or check the key in the unit's EnvironmentFile" % (host, e["url"], e["status"]))
            return ("SGLang on %s serves %s at %s, not served_model_name %r: another server may still hold the port, or "
                    "--served-model-name differs; stop the old server or fix served_model_name"
                    % (host, ", ".join(e["models"]) or "no model", e["url"], self.p.served_model_name))
        return "SGLang on %s is still starting after %.1fs at stage %s" % (host, elapsed, stage)

    def result(self, status):
        now = self.clock()
        elapsed = round(now - self.s["start"], 1)
        res = self.classifier.result()
        self.s["classifier"] = self.classifier.to_state()
        if self.follower is not None:
            self.s["follower"] = self.follower.to_state()
        sig = res.get("signature")
        exited = self.s["exited"]
        if status == "crashed" and exited and exited["by"] == "unit" and sig in (None, "process_exited"):
            sig = "unit_failed"
        if status == "crashed" and sig is None:
            sig = "process_exited"
        if status != "crashed":
            sig = None
        res["signature"] = sig
        stage = res.get("stage") or "start"
        res["stage"] = stage
        out = {
            "status": status,
            "ready": status == "ready",
            "elapsed": elapsed,
            "stage": stage,
            "stages": self._stages(res),
            "signature": sig,
            "error_line": res.get("error_line") if status == "crashed" else None,
            "error_lineno": res.get("error_lineno") if status == "crashed" else None,
            "error_context": [_display_line(x) for x in (res.get("error_context") or [])] if status == "crashed" else [],
            "log_tail": self._log_tail(),
            "log_source": self.log_source,
            "log_reset": self.s["log_reset"],
            "unit": self.s["unit"],
            "http": self.s["http"],
            "models": self.s["models"],
            "log_offset_end": self.log_offset_end(),
            "progress": self.s["progress"],
            "exited": exited,
            "new_lines": self.new_lines,
            "new_lines_dropped": self.new_lines_dropped,
            "probes": self.probes[-10:],
        }
        out["msg"] = self._message(status, out, elapsed)
        out["_state"] = self.s
        return out


def run_round(params, state=None, round_seconds=None, run_command=None):
    """Convenience: one round with module params (dict). Returns the result dict (with '_state')."""
    wp = params if isinstance(params, WaitParams) else WaitParams(**params)
    return WaitRound(wp, state=state, run_command=run_command).run(round_seconds)
