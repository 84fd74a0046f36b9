# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Incremental classifier for SGLang server start-up logs.

Private module_utils of llmops.sglang (runs on target hosts: Python 3.9+, standard library only).

The classifier reads the log of ONE SGLang start line by line and decides:

* the furthest start-up stage any rank reached (``STAGES``);
* whether the start is proven to have failed, and the crash class (``SIGNATURES``), the first line
  that proves it, the traceback around it and its root cause;
* whether the ready line ``The server is fired up and ready to roll!`` was printed.

The rules (stages, decisive phrases, root-cause classes, each with its prefilter gates) are data in
``log._rules``; one traceback is read by ``log._traceback.TracebackReader``. In short
(docs/log-classification.md has the long form):

1. SGLang's own fatal phrases (``... hit an exception``, ``Received sigquit from a child process``,
   ``Initialization failed.``, ``scheduler is dead`` ...) prove a crash at once.
2. An exception line at column 0 whose text names a specific accelerator failure proves a crash.
3. A bare top-level traceback is only a *candidate*: it becomes the crash at the end of input
   (``flush``), when the process exits, when a fatal phrase or exit evidence follows, or, by the stricter
   rule of ``log_quiet``, when the log goes quiet. Any later SGLang log line clears it.
4. SGLang reporting a dead child is decisive; what a shell prints when a process tree is gone
   (``Killed``, leaked semaphores, ``Segmentation fault``) is pending like a candidate traceback.

After a crash the classifier keeps reading the crash's traceback (bounded window) and refines the
signature, root cause and context; ``settled`` says when nothing more is expected.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.log._rules import (
    ARGPARSE_RULE,
    ARGS_MARKERS,
    GENERIC,
    PHRASE_RULES,
    POST_READY_RE,
    SGLANG_PREFIX_RE,
    SIGNATURES,
    STAGE_INDEX,
    STAGES,
    STRUCTURE_GATES,
    USAGE_GATE,
    PhraseRule,
    better,
    gates_after,
    literal_alternation,
    last_segment,
    max_stage,
    phrase_of,
    specific_class,
    stage_of,
    strip_ansi,
)
from ansible_collections.llmops.sglang.plugins.module_utils.log._formats import CAUSE_ONLY, fatal_line
from ansible_collections.llmops.sglang.plugins.module_utils.log._prefix import PrefixReader
from ansible_collections.llmops.sglang.plugins.module_utils.log._traceback import (
    EXC_RE,
    TracebackReader,
    clip,
    context_add,
    structure_alone,
)

# STAGES and SIGNATURES are re-exported for the wait and the tests; LogFollower moves to a log-sources module
__all__ = ("STAGES", "SIGNATURES", "LogClassifier", "classify_text", "is_exception_line")


STATE_VERSION = 3

# Lines longer than LINE_HEAD + LINE_TAIL are kept as head + marker + tail (bounded memory for endless
# progress bars); the tail starts at a carriage return where one is in reach, so the segment a terminal
# shows (and a marker glued to the end of a progress bar) is kept whole.
LINE_HEAD = 4096
LINE_TAIL = 28672
LINE_MARK = "\u2026[line truncated by llmops.sglang]\u2026"

RECENT_MAX = 5              # lines kept before an error for context
REFINE_MAX_LINES = 1000     # lines after a crash in which the root cause may still be read
CANDIDATE_TRAILER_MAX = 20  # unrecognised lines after a finished top-level traceback before it is dropped

_NOISE_RE = re.compile(
    r"^\s*$|^\s+warnings\.warn\(|^\S+\.py:\d+: \w*Warning: |resource_tracker|^Killed\s*$|^\s*(?:/\S+ )?Terminated\s*$"
    r"|^\[W\d* |^\[rank\d+\]:\[W|^Exception ignored in|^sys:1: ")
_BENIGN_TB_INTROS = ("Exception ignored in", "--- Logging error ---", "Error in atexit")
# Gates of everything that can decide while no traceback is open (phrases, traceback structure, fatal-line formats),
# searched within one line.
_CRASH_GATE_RE = re.compile(literal_alternation(set([g for rule in PHRASE_RULES for g in rule.gates]
                                                    + [g.lstrip("\n") for g in STRUCTURE_GATES])))
_GATE_CACHE = {}
_ARGS_RE = re.compile(literal_alternation(ARGS_MARKERS))
_DIGIT_RE = re.compile(r"[1-9]")   # every digit to 0: same length, same shape
_INERT_MAX = 4096


def _gate_re(stage, extra):
    """Prefilter regex for a classifier at ``stage`` (plus user crash patterns ``extra``)."""
    key = (stage, extra)
    regex = _GATE_CACHE.get(key)
    if regex is None:
        source = literal_alternation(gates_after(stage))
        if extra:
            source += "|" + "|".join("(?:%s)" % p for p in extra)
        regex = _GATE_CACHE[key] = re.compile(source)
    return regex


def _tail_from_a_segment(rest):
    """The longest suffix of ``rest`` of at most LINE_TAIL characters that starts right after a carriage
    return, else its last LINE_TAIL characters. Applying it again to that suffix plus more text gives the same
    as applying it once to all of it, so a capped line is the same for any chunking."""
    if len(rest) <= LINE_TAIL:
        return rest
    split = rest.find("\r", len(rest) - LINE_TAIL - 1, len(rest) - 1)
    return rest[split + 1:] if split >= 0 else rest[-LINE_TAIL:]


def cap_line(line):
    """Bound one line: its first LINE_HEAD characters, a marker, and its tail (see _tail_from_a_segment)."""
    if len(line) <= LINE_HEAD + LINE_TAIL:
        return line
    return line[:LINE_HEAD] + LINE_MARK + _tail_from_a_segment(line[LINE_HEAD:])


def _extend_capped(capped, text):
    """cap_line(original + text) from capped == cap_line(original), without the original."""
    if len(capped) > LINE_HEAD + len(LINE_MARK) and capped.startswith(LINE_MARK, LINE_HEAD):
        return capped[:LINE_HEAD + len(LINE_MARK)] + _tail_from_a_segment(capped[LINE_HEAD + len(LINE_MARK):] + text)
    return cap_line(capped + text)


@dataclasses.dataclass
class ExitEvidence:
    """Shell-level exit evidence waiting for the end of input (or SGLang logging on, which clears it)."""

    signature: str
    line: str
    lineno: int
    context: List[str]

    def to_json(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data):
        return None if data is None else cls(**data)


@dataclasses.dataclass
class ClassifierState:
    """Everything a LogClassifier knows; JSON as it is (``to_json``/``from_json``), bounded in size."""

    crash_patterns: List[str] = dataclasses.field(default_factory=list)
    ignore_patterns: List[str] = dataclasses.field(default_factory=list)
    status: str = "starting"
    line_stage: str = "start"                 # furthest stage shown by progress lines
    frame_stage_max: Optional[str] = None     # furthest stage shown by the frames of the crash traceback
    stages: List[dict] = dataclasses.field(default_factory=list)
    signature: Optional[str] = None
    base_signature: Optional[str] = None      # class of the decisive line, before root-cause refinement
    error_line: Optional[str] = None
    error_lineno: Optional[int] = None
    context: List[str] = dataclasses.field(default_factory=list)
    root_cause: Optional[str] = None
    lineno: int = 0
    last_line: Optional[str] = None
    pending: str = ""                         # partial last line (capped)
    recent: List[str] = dataclasses.field(default_factory=list)
    candidate: Optional[TracebackReader] = None
    exit_pending: Optional[ExitEvidence] = None
    crash_tb: Optional[TracebackReader] = None
    refine_left: int = 0
    usage_open: bool = False                  # after argparse's "usage:": read every line up to one at column 0
    prefix_learned: Optional[str] = None      # a constant line prefix learned from SGLang's lines (log/_prefix)
    prefix_seen: Optional[str] = None
    leaked: bool = False
    exit_code: Optional[int] = None
    exited: bool = False
    post_ready_crash: bool = False
    post_ready_line: Optional[str] = None     # the first crash line after the ready line (capped)
    flushed: bool = False

    _NESTED = {"candidate": TracebackReader, "crash_tb": TracebackReader, "exit_pending": ExitEvidence}

    def to_json(self):
        data = dataclasses.asdict(self)
        data["version"] = STATE_VERSION
        return data

    @classmethod
    def from_json(cls, data):
        if data.get("version") != STATE_VERSION:
            raise ValueError("unsupported LogClassifier state version %r (expected %d)" % (data.get("version"), STATE_VERSION))
        values = dict((k, v) for k, v in data.items() if k != "version")
        unknown = sorted(set(values) - set(field.name for field in dataclasses.fields(cls)))
        if unknown:
            raise ValueError("unknown LogClassifier state keys %s" % ", ".join(unknown))
        for name, kind in cls._NESTED.items():
            values[name] = kind.from_json(values.get(name))
        return cls(**values)


class _LineReader:
    """Line assembly and the prefilter: turns fed text into complete lines, and counts the lines that
    cannot decide anything without reading them (see log._rules for the gates)."""

    _s = None   # ClassifierState, set by LogClassifier
    _inert = None
    _gates = None
    _kind = None   # set by _line_body: the traceback role of the line (see _StartupEvidence)

    def feed(self, text, now=None):
        """Feed decoded text (may end mid-line; the partial line is kept until completed).

        Returns the list of new events (dicts with "type" "stage", "ready", "crash" or "signature";
        "signature" events report a crash class refined from the lines read after the crash).
        """
        events = []
        if now is None:
            now = time.monotonic()
        self._start(now)
        if not text:
            return events
        s = self._s
        last_nl = text.rfind("\n")
        if last_nl < 0:
            s.pending = _extend_capped(s.pending, text)
            return events
        block = text[:last_nl + 1]
        rest = text[last_nl + 1:]
        if s.pending:
            first_nl = block.find("\n")
            first = _extend_capped(s.pending, block[:first_nl])
            s.pending = ""
            self._line(first, events, now)
            block = block[first_nl + 1:]
        self._block(block, events, now)
        s.pending = cap_line(rest)
        return events

    def _reads_every_line(self):
        s = self._s
        return s.candidate is not None or s.exit_pending is not None or s.refine_left > 0 or s.usage_open

    def _block(self, block, events, now):
        """Process complete lines; lines the prefilter rejects are only counted."""
        s = self._s
        pos = 0
        end = len(block)
        while pos < end:
            if s.status != "starting" and s.refine_left <= 0:
                self._after_verdict(block, pos, events, now)
                return
            if not self._reads_every_line() and not block.startswith(USAGE_GATE[1:], pos):
                gate = self._gates.get(s.line_stage)
                if gate is None:
                    gate = self._gates[s.line_stage] = _gate_re(s.line_stage, tuple(s.crash_patterns))
                match = gate.search(block, pos)
                if match is None:
                    self._skip(block, pos, end)
                    return
                if block[match.start()] == "\n":
                    line_start = match.start() + 1
                else:
                    line_start = block.rfind("\n", 0, match.start()) + 1
                if line_start > pos:
                    self._skip(block, pos, line_start)
                    pos = line_start
            line_end = block.find("\n", pos)
            self._line(cap_line(block[pos:line_end]), events, now)
            pos = line_end + 1

    def _after_verdict(self, block, pos, events, now):
        """After the verdict only the post-ready crash check reads lines."""
        s = self._s
        end = len(block)
        while s.status == "ready" and not s.post_ready_crash:
            match = POST_READY_RE.search(block, pos)
            if match is None:
                break
            line_start = block.rfind("\n", 0, match.start()) + 1
            if line_start > pos:
                self._skip(block, pos, line_start)
                pos = line_start
            line_end = block.find("\n", pos)
            self._line(cap_line(block[pos:line_end]), events, now)
            pos = line_end + 1
        if pos < end:
            self._skip(block, pos, end)

    def _skip(self, block, start, end):
        """Count the lines in block[start:end] (ends with a newline) and remember the last ones."""
        s = self._s
        s.lineno += block.count("\n", start, end)
        tail = []
        stop = end - 1
        last_text = None
        while stop >= start and (len(tail) < RECENT_MAX or last_text is None):
            begin = max(start, block.rfind("\n", start, stop) + 1)
            line = block[begin:stop]
            if len(tail) < RECENT_MAX:
                tail.append(line)
            if last_text is None and line.strip():
                last_text = line
            stop = begin - 1
        tail.reverse()
        s.recent = (s.recent + [clip(cap_line(x)) for x in tail])[-RECENT_MAX:]
        if last_text is not None:
            s.last_line = clip(cap_line(last_text))

    def _line(self, raw, events, now):
        s = self._s
        s.lineno += 1
        if self._inert is not None and s.status == "starting" and not self._reads_every_line():
            self._quiet_line(raw, events, now)
        else:
            self._line_body(raw, s.lineno, events, now)
        s.recent.append(clip(raw))
        if len(s.recent) > RECENT_MAX:
            del s.recent[0]
        if raw.strip():
            s.last_line = clip(raw)

    def _quiet_line(self, raw, events, now):
        """A line read while nothing is open. Lines that changed nothing are remembered with every digit
        replaced by 0 (timestamps, ranks, ports, counters; lengths kept): the same line with other digits
        changes nothing either, because outside exception lines (never remembered, their root-cause classes
        name codes) and decisive phrases (which change the state, so are never remembered) no rule depends on
        a digit's value, and stages only move forward. Repeated benign lines (health checks during a hung
        warmup, warnings naming an error) then cost a dictionary lookup."""
        s = self._s
        key = _DIGIT_RE.sub("0", raw)
        if key in self._inert:
            return
        before = (s.status, s.line_stage, s.leaked, len(events), s.prefix_learned, s.prefix_seen, s.usage_open)
        self._line_body(raw, s.lineno, events, now)
        if (s.status, s.line_stage, s.leaked, len(events), s.prefix_learned, s.prefix_seen, s.usage_open) == before \
                and not self._reads_every_line() and self._kind not in ("exc", "fatal"):
            if len(self._inert) >= _INERT_MAX:
                self._inert.clear()
            self._inert.add(key)

    def _line_body(self, raw, lineno, events, now):
        """Decide on one complete line (LogClassifier: _StartupEvidence)."""
        raise NotImplementedError

    def _clean(self, raw):
        """The line as the rules read it (LogClassifier: _StartupEvidence)."""
        raise NotImplementedError

    def _start(self, now):
        if not self._s.stages:
            self._s.stages.append({"stage": "start", "time": now, "line": None, "lineno": None})


class _CrashWindow:
    """Deciding a crash and reading on after it: the traceback that belongs to the crash is read for its
    root cause within a bounded window (REFINE_MAX_LINES lines), refining signature, root cause, stage and
    error_context as its lines arrive."""

    _s = None   # ClassifierState, set by LogClassifier

    def _effective_stage(self):
        """Furthest stage: progress lines of any rank, or the frames of the crash traceback if further
        (an excerpt may start inside the traceback, or the failing rank got further than its last line).
        A crash once the HTTP server is up and before the ready line is in the warmup request: that is the
        only request the server runs then."""
        s = self._s
        if s.status == "ready":
            return "ready"
        stage = max_stage(s.line_stage, s.frame_stage_max)
        if stage == "http_listening" and s.status == "crashed":
            return "warmup"
        return stage

    def _set_stage(self, stage, line, lineno, events, now):
        s = self._s
        if STAGE_INDEX[stage] <= STAGE_INDEX[s.line_stage]:
            return
        before = self._effective_stage()
        s.line_stage = stage
        self._stage_event(before, line, lineno, events, now)

    def _fold_frames(self, tb):
        """Stage from the frames of a crash traceback; returns the stage before, or None if unchanged."""
        if tb is not None and tb.frame_stage:
            before = self._effective_stage()
            self._s.frame_stage_max = max_stage(self._s.frame_stage_max, tb.frame_stage)
            return before
        return None

    def _stage_event(self, before, line, lineno, events, now):
        s = self._s
        after = self._effective_stage()
        if before is None or after == before:
            return
        if any(entry["stage"] == after for entry in s.stages):
            return
        entry = {"stage": after, "time": now, "line": None if line is None else clip(line), "lineno": lineno}
        s.stages.append(entry)
        events.append({"type": "stage", "stage": after, "line": entry["line"], "lineno": lineno, "time": now})

    def _signature_of(self, base, tb):
        return base if tb is None else tb.signature(base, self._effective_stage())

    def _crash(self, signature, raw, lineno, events, now, then=""):
        """The crash is decided by line ``raw`` (None: by the process exit alone)."""
        s = self._s
        before = self._effective_stage()
        s.status = "crashed"
        s.base_signature = s.signature = signature
        s.error_line, s.error_lineno = raw, lineno
        s.context = list(s.recent)
        if raw is not None:
            context_add(s.context, raw)
        self._stage_event(before, raw, lineno, events, now)
        events.append({"type": "crash", "signature": signature, "line": None if raw is None else clip(raw),
                       "lineno": lineno})
        if raw is not None and not s.flushed:
            # the traceback the decisive line heads, or (sigquit, C++ terminate) the root cause still to come
            s.crash_tb = TracebackReader(kind="crash", line=raw, lineno=lineno, context=None,
                                         started=then == "traceback", awaits=then == "cause")
            s.refine_left = REFINE_MAX_LINES
        else:
            s.refine_left = 0

    def _adopt_candidate(self, base, raw, lineno, events, now, heads_tb=False):
        """The candidate traceback is part of the crash: its proving line is the error line."""
        s = self._s
        tb = s.candidate
        s.candidate = None
        stage_time = s.stages[-1]["time"] if s.stages else 0.0
        before = self._fold_frames(tb)
        self._stage_event(before, tb.line, tb.lineno, events, stage_time)
        before = self._effective_stage()
        s.status = "crashed"
        self._stage_event(before, tb.line, tb.lineno, events, stage_time)
        s.error_line, s.error_lineno = tb.line, tb.lineno
        s.context = list(tb.context)
        tb.context = None
        if raw is not None:
            context_add(s.context, raw)
        s.base_signature = s.signature = self._signature_of(base or "traceback", tb)
        s.root_cause = tb.cause
        events.append({"type": "crash", "signature": s.signature, "line": clip(tb.line), "lineno": tb.lineno})
        if s.flushed:
            s.refine_left = 0
        elif raw is not None and heads_tb:
            s.crash_tb = TracebackReader(kind="crash", line=raw, lineno=lineno, context=None)
            s.refine_left = REFINE_MAX_LINES
        else:
            s.crash_tb = tb
            tb.started = True
            s.refine_left = REFINE_MAX_LINES

    def _refine(self, raw, clean, seg, lineno, events, now):
        """After the crash: read the traceback that belongs to it for the root cause (bounded window)."""
        s = self._s
        tb = s.crash_tb
        if s.refine_left <= 0 or tb is None:
            s.refine_left = 0
            return
        s.refine_left -= 1
        kind = tb.structure(seg)
        if not tb.started:
            self._await_cause(tb, kind, raw, clean, seg, lineno, events, now)
            return
        if tb.done and tb.frames == 0 and kind is None and _heads_traceback(clean, seg):
            # the crash was proved by an exception line alone; the handler's report of the same failure that follows
            # ("Exception in ControllerSingle:", "Scheduler hit an exception: ...") shows its frames and stage
            tb.done, tb.after, tb.gap = False, 0, False
            context_add(s.context, raw)
            return
        if kind is None and SGLANG_PREFIX_RE.match(seg) is not None:
            if tb.done:
                s.refine_left = 0
            return   # another rank's line in the middle of the traceback
        if tb.done and kind not in ("chain", "header"):
            # the exception message may go on for a few lines; a blank line or a long tail ends it
            if not seg.strip():
                tb.gap = True
                return
            tb.after += 1
            if tb.gap or tb.after > CANDIDATE_TRAILER_MAX:
                s.refine_left = 0
                return
        else:
            tb.gap = False
        context_add(s.context, raw)
        tb.read(raw, seg, lineno)
        if tb.done and kind is None:
            tb.specific = better(tb.specific, specific_class(clean))
        before = self._fold_frames(tb)
        self._stage_event(before, raw, lineno, events, now)
        self._note_cause(tb, raw, lineno, events)

    def _await_cause(self, tb, kind, raw, clean, seg, lineno, events, now):
        """A sigquit or C++ terminate decided the crash: wait for the failing rank's traceback or what() line."""
        phrase = phrase_of(clean, seg) if kind is None else None
        # the failing rank's traceback, a C++ what() line, or an exception line that names the cause on its own
        if kind in ("header", "frame") or (phrase is not None and phrase[0].then == "traceback") \
                or (kind in ("exc", "fatal") and (seg.lstrip().startswith("what():") or specific_class(seg) is not None)):
            tb.started = True
            context_add(self._s.context, raw)
            if kind in ("frame", "exc", "fatal"):
                tb.read(raw, seg, lineno)
                self._note_cause(tb, raw, lineno, events)
            return
        stage = stage_of(clean, self._s.line_stage)
        if stage is not None and stage != "ready":
            self._set_stage(stage, raw, lineno, events, now)

    def _note_cause(self, tb, raw, lineno, events):
        """Refine the signature and the root cause from what the crash traceback has shown so far."""
        s = self._s
        if tb.cause is not None:
            s.root_cause = tb.cause
        new_sig = self._signature_of(s.base_signature, tb)
        if new_sig != s.signature:
            s.signature = new_sig
            events.append({"type": "signature", "signature": new_sig, "line": clip(raw), "lineno": lineno})


class _StartupEvidence(_CrashWindow):
    """One line while the start is undecided: stage lines, decisive phrases, pending exit evidence and
    candidate tracebacks (and, once crashed, the crash window of _CrashWindow)."""

    _s = None   # ClassifierState, set by LogClassifier
    _crash_res = ()
    _ignore_res = ()
    _prefix = None   # PrefixReader, its state kept in ClassifierState.prefix_learned/prefix_seen
    _kind = None     # traceback role of the last line read while starting (exception lines are never remembered)

    def _clean(self, raw):
        """The line as the rules read it: ANSI codes and the prefixes of the tools in between removed."""
        reader = self._prefix
        clean = reader.strip(strip_ansi(raw))
        if reader.learned is None:
            reader.learn(clean)
            self._s.prefix_learned, self._s.prefix_seen = reader.learned, reader.seen
        return clean

    def _line_body(self, raw, lineno, events, now):
        s = self._s
        self._kind = None
        clean = self._clean(raw)
        if self._ignore_res and any(r.search(clean) for r in self._ignore_res):
            return
        if s.status == "ready":
            if not s.post_ready_crash and POST_READY_RE.search(clean) and not _ARGS_RE.search(clean):
                s.post_ready_crash = True
                s.post_ready_line = clip(raw)
            return
        if _ARGS_RE.search(clean):
            # The args dump holds user values and field names such as custom_sigquit_handler,
            # crash_dump_folder, skip_server_warmup ...: never evidence. A new dump means a new run.
            s.candidate = None
            s.exit_pending = None
            s.refine_left = 0
            return
        seg = last_segment(clean)
        if s.status == "crashed":
            self._refine(raw, clean, seg, lineno, events, now)
        else:
            self._starting_line(raw, clean, seg, lineno, events, now)

    def _starting_line(self, raw, clean, seg, lineno, events, now):
        s = self._s
        tb = s.candidate
        gated = _CRASH_GATE_RE.search(clean) is not None or seg.startswith("usage: ")
        kind = None
        if gated or tb is not None:
            kind = structure_alone(seg) if tb is None else tb.structure(seg)
        self._kind = kind
        if tb is not None and kind in ("frame", "source", "caret", "chain", "cframe"):
            tb.read(raw, seg, lineno)
            return
        phrase = self._phrase(clean, seg) if (gated or self._crash_res or s.usage_open) else None
        if s.usage_open and seg[:1] not in (" ", "\t", ""):
            s.usage_open = False   # usage's continuation lines are indented: this is the line after it
        stage = stage_of(clean, s.line_stage)
        if phrase is not None:
            self._on_phrase(phrase, tb, kind, stage, raw, clean, seg, lineno, events, now)
            return
        if stage == "ready":
            self._set_stage("ready", raw, lineno, events, now)
            s.status = "ready"
            s.candidate = None
            events.append({"type": "ready", "line": clip(raw), "lineno": lineno, "time": now})
            return
        if stage is not None:
            self._set_stage(stage, raw, lineno, events, now)
        prefixed = SGLANG_PREFIX_RE.match(seg) is not None
        if s.exit_pending is not None and (stage is not None or prefixed):
            s.exit_pending = None   # SGLang went on logging: that was not this server's exit
        if seg.startswith("usage: "):
            s.usage_open = True   # argparse prints "usage: ..." (wrapped, indented), then "prog: error: ..."
        if tb is not None:
            self._candidate_line(tb, kind, prefixed or stage is not None, raw, seg, lineno)
        elif kind == "header":
            self._start_candidate(raw, lineno)
        elif kind == "frame":
            s.candidate = TracebackReader.begin("headless", None, None, s.recent)
            s.candidate.read(raw, seg, lineno)
        elif kind in ("exc", "fatal"):
            # a lone exception line (the top of its traceback not captured, or Python printing only the line), or a
            # fatal line of another program (log/_formats): pending like a candidate traceback
            s.candidate = TracebackReader.begin("headless" if kind == "exc" else "line", None, None, s.recent)
            s.candidate.read(raw, seg, lineno)
            if kind == "fatal" and fatal_line(seg).name in CAUSE_ONLY:
                s.candidate.intro = "cause_only"   # the exit or a later fatal phrase decides, never a quiet log

    def _phrase(self, clean, seg):
        """(PhraseRule, signature) of a decisive line, built-in phrases first, then the user's crash_patterns."""
        found = phrase_of(clean, seg)
        if found is None and self._s.usage_open and ARGPARSE_RULE.pattern.search(seg):
            found = (ARGPARSE_RULE, ARGPARSE_RULE.signature)
        if found is None and self._crash_res and any(r.search(clean) for r in self._crash_res):
            found = (_USER_PHRASE, specific_class(clean) or "traceback")
        return found

    def _on_phrase(self, phrase, tb, kind, stage, raw, clean, seg, lineno, events, now):
        """A decisive phrase: the crash, pending exit evidence, or the end of the candidate traceback."""
        s = self._s
        rule, signature = phrase
        if stage is not None and stage != "ready":
            self._set_stage(stage, raw, lineno, events, now)
        if signature == "silent_exit":
            s.leaked = True
        if rule.evidence == "shell" and (tb is None or tb.line is None or tb.benign):
            # the process tree is gone, unless SGLang logs on (another process's "Killed", a compile
            # worker's resource tracker): decided at the end of input / process exit / a quiet log
            if s.exit_pending is None:
                context = [clip(x) for x in s.recent]
                context_add(context, raw)
                s.exit_pending = ExitEvidence(signature, raw, lineno, context)
            return
        s.exit_pending = None
        if tb is not None and kind in ("exc", "fatal"):
            # e.g. "Exception: Capture cuda graph failed: CUDA out of memory ..." ends the traceback
            tb.read(raw, seg, lineno)
        if tb is not None and tb.line is not None and not tb.benign:
            base = None if (rule.evidence or signature in GENERIC) else signature
            if rule.evidence and kind == "exc":
                # the launcher's own traceback reporting that a child died (exit code): the death is the cause
                base = signature
            self._adopt_candidate(base, raw, lineno, events, now, heads_tb=rule.then == "traceback")
            return
        if tb is not None:
            if not tb.benign:
                self._fold_frames(tb)
            s.candidate = None
        specific = specific_class(clean)
        if signature in GENERIC and specific is not None:
            signature = specific
        self._crash(signature, raw, lineno, events, now, then=rule.then)
        if s.crash_tb is not None and (kind == "exc" or seg.lstrip().startswith("what():")):
            s.root_cause = clip(seg.strip())

    def _candidate_line(self, tb, kind, sglang_logs_on, raw, seg, lineno):
        """A line while a candidate traceback is open (frames and source lines were read already)."""
        s = self._s
        if kind == "header":
            if tb.done and tb.after > 0:
                self._start_candidate(raw, lineno)
            else:
                tb.read(raw, seg, lineno)
            return
        if kind in ("exc", "fatal"):
            tb.read(raw, seg, lineno)
            return
        if sglang_logs_on:
            s.candidate = None   # SGLang went on logging: that traceback was not fatal
            return
        if tb.done:
            if _NOISE_RE.search(seg):
                context_add(tb.context, raw)
                return
            tb.after += 1
            if tb.after > CANDIDATE_TRAILER_MAX:
                s.candidate = None
                return
        tb.read(raw, seg, lineno)

    def _start_candidate(self, raw, lineno):
        """A top-level ``Traceback (most recent call last):`` header starts a candidate."""
        s = self._s
        previous = strip_ansi(next((x for x in reversed(s.recent) if x.strip()), ""))
        tb = s.candidate = TracebackReader.begin("top", raw, lineno, s.recent)
        tb.context.append(clip(raw))
        # printed by Python's unraisable-exception, logging-error or atexit hooks: never what stops a start
        tb.benign = previous.startswith(_BENIGN_TB_INTROS)
        # threading.excepthook prints "Exception in thread NAME:" first: a thread died, the server may go on
        if previous.startswith("Exception in thread"):
            tb.intro = "thread"
        for line in reversed(s.recent):
            clean = self._prefix.strip(strip_ansi(line))
            if SGLANG_PREFIX_RE.match(clean):
                # SGLang's "Ignore import error when loading X: <message>" whose message holds a traceback
                if "Ignore import error" in line:
                    tb.intro = "ignore_import"
                tb.logged_by = clip(clean)
                break


class LogClassifier(_StartupEvidence, _LineReader):
    """Incremental, line-by-line classifier of ONE SGLang run's startup log."""

    def __init__(self, crash_patterns=(), ignore_patterns=(), state=None):
        if state is not None:
            self._s = ClassifierState.from_json(state)
            if crash_patterns or ignore_patterns:
                self._s.crash_patterns = [str(p) for p in crash_patterns or ()]
                self._s.ignore_patterns = [str(p) for p in ignore_patterns or ()]
        else:
            self._s = ClassifierState(crash_patterns=[str(p) for p in crash_patterns or ()],
                                      ignore_patterns=[str(p) for p in ignore_patterns or ()])
        self._crash_res = [re.compile(p) for p in self._s.crash_patterns]
        self._ignore_res = [re.compile(p) for p in self._s.ignore_patterns]
        self._gates = {}
        self._prefix = PrefixReader(self._s.prefix_learned, self._s.prefix_seen)
        # lines that changed nothing (see _quiet_line); user patterns may depend on any digit: no memory then
        self._inert = None if (self._crash_res or self._ignore_res) else set()

    def to_state(self):
        """JSON-serialisable dict (bounded size); ``LogClassifier(state=c.to_state())`` continues exactly."""
        return self._s.to_json()

    # ------------------------------------------------------------------ public API
    @property
    def status(self):
        """"starting", "ready" or "crashed"."""
        return self._s.status

    @property
    def stage(self):
        """The furthest stage reached (str)."""
        return self._effective_stage()

    @property
    def post_ready_crash(self):
        """A crash line (an exception, a child's sigquit) came after the ready line."""
        return self._s.post_ready_crash

    @property
    def settled(self):
        """True when no line still to come is expected to refine the verdict: no traceback is open, or the
        crash's traceback closed with its exception line (or its refinement window ended)."""
        s = self._s
        if s.status == "crashed":
            tb = s.crash_tb
            if s.refine_left <= 0 or tb is None:
                return True
            return tb.done if tb.started else not tb.awaits
        return s.status == "ready" or s.candidate is None or s.candidate.done

    def flush(self, now=None):
        """End of input that will never be completed (process exited / static file).

        The pending partial line counts as a complete line, and a top-level traceback that nothing
        followed is decided to be the crash. Returns events.
        """
        events = []
        if now is None:
            now = time.monotonic()
        self._start(now)
        s = self._s
        if s.pending:
            line = s.pending
            s.pending = ""
            self._line(line, events, now)
        s.flushed = True
        s.refine_left = 0
        self._decide_at_rest(events, now, quiet=False)
        return events

    def log_quiet(self, now=None):
        """The log went quiet (no new line for a few seconds) and no process is watched: decide from the log alone.

        A crash only when the log proves the interpreter is exiting: a top-level traceback closed by its
        exception line (not one printed by a thread, whose death the server survives, nor inside an
        ``Ignore import error`` warning), a traceback still open while the stage is ``start`` (nothing else
        runs then), or a shell's exit evidence (``Killed``, leaked-semaphore warning) SGLang did not log past.
        Unlike ``flush()``, the partial last line stays pending and the log may go on. Returns True when crashed.
        """
        if now is None:
            now = time.monotonic()
        self._start(now)
        if self._s.status == "starting":
            self._decide_at_rest([], now, quiet=True)
        return self._s.status == "crashed"

    def process_exited(self, exit_code=None, now=None):
        """The server process (or unit) exited during start-up: decide the crash from the evidence.

        Feed everything the log holds first. A pending traceback gives its class; with no evidence the
        signature is "silent_exit" when the leaked-semaphore warning was seen, else "process_exited".
        """
        if now is None:
            now = time.monotonic()
        events = self.flush(now)
        s = self._s
        s.exited = True
        if exit_code is not None:
            s.exit_code = exit_code
        if s.status == "starting":
            self._crash("silent_exit" if s.leaked else "process_exited", None, None, events, now)
        return events

    def result(self):
        """The verdict so far (see the module docstring and docs/log-classification.md)."""
        s = self._s
        return {
            "status": s.status,
            "stage": self._effective_stage(),
            "stages": [dict(entry) for entry in s.stages],
            "signature": s.signature,
            "error_line": s.error_line,
            "error_lineno": s.error_lineno,
            "error_context": list(s.context),
            "root_cause": s.root_cause,
            "lines_seen": s.lineno,
            "last_line": s.last_line,
            "exit_code": s.exit_code,
            "post_ready_crash": s.post_ready_crash,
            "post_ready_line": s.post_ready_line,
        }

    # ------------------------------------------------------------------ decisions at rest
    def _log_proves_exit(self, tb):
        """A candidate that, with the log quiet, proves the start failed: a fatal line that no later line contradicted
        (a traceback closed by its exception line, a lone exception line, another program's fatal line), or a
        traceback still open while the stage is ``start`` (only the launcher runs then). Not the output of Python's
        hooks, a thread's death (the server goes on), a traceback inside SGLang's ``Ignore import error`` warning or
        one a handler logged (its message printed first), nor bare frames (a stack print) with no proving line."""
        if tb.benign or tb.line is None or tb.intro is not None:
            return False
        return tb.done or self._effective_stage() == "start"

    def _decide_at_rest(self, events, now, quiet):
        """End of input (``quiet`` False: nothing will follow) or a quiet log (``quiet`` True): pending exit
        evidence and candidate tracebacks become the crash by the rules of flush()/log_quiet()."""
        s = self._s
        if s.status != "starting":
            return
        if s.exit_pending is not None:
            pending = s.exit_pending
            s.exit_pending = None
            if s.candidate is not None:
                self._fold_frames(s.candidate)
                s.candidate = None
            self._crash(pending.signature, pending.line, pending.lineno, events, now)
            s.context = pending.context
        elif s.candidate is not None:
            tb = s.candidate
            if quiet:
                if self._log_proves_exit(tb):
                    self._adopt_candidate(None, None, None, events, now)
            elif tb.benign or tb.line is None:
                # benign hook output, or bare frames (a stack print) with no exception line: proves nothing
                s.candidate = None
            else:
                self._adopt_candidate(None, None, None, events, now)


_USER_PHRASE = PhraseRule(None, "traceback", "", "", (), 0)


def _heads_traceback(clean, seg):
    """The line is a decisive phrase that heads a traceback (``Scheduler hit an exception: Traceback ...``)."""
    found = phrase_of(clean, seg)
    return found is not None and found[0].then == "traceback"


def is_exception_line(line):
    """True for the line that ends a Python traceback ("torch.OutOfMemoryError: CUDA out of memory ...",
    "ModuleNotFoundError: No module named 'numpy'") or a C++ exception's "what():" line, also behind SGLang's
    "[time TPn] " prefix and the prefixes of the tools in between (log/_prefix)."""
    return bool(EXC_RE.match(SGLANG_PREFIX_RE.sub("", PrefixReader().strip(line), count=1)))


def classify_text(text, crash_patterns=(), ignore_patterns=(), exited=None):
    """Feed a whole text, flush, and if ``exited`` is not None call ``process_exited(exited)``.
    Returns ``result()``."""
    classifier = LogClassifier(crash_patterns=crash_patterns, ignore_patterns=ignore_patterns)
    classifier.feed(text, now=0.0)
    classifier.flush(now=0.0)
    if exited is not None:
        classifier.process_exited(exited, now=0.0)
    return classifier.result()
