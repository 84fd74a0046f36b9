# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Reader of one Python traceback in an SGLang log, for the start-up log classifier (log._classifier).

Private module_utils of llmops.sglang (runs on target hosts: Python 3.9+, standard library only).

A ``TracebackReader`` is fed the lines that belong to one traceback (header, ``File "..."`` frames, their
source lines, carets, chained-exception separators, the exception line and its message) and keeps what
the classifier decides from: the proving line, the root cause, the stage its frames show, and whether it
is an import chain or argument handling. It is a dataclass so that its state is JSON as it is.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.log._formats import (
    ACCELERATOR_LIBRARY_RE,
    CPP_TRACE_RE,
    fatal_line,
)
from ansible_collections.llmops.sglang.plugins.module_utils.log._rules import (
    GENERIC,
    SPECIFIC_ORDER,
    better,
    frame_stage,
    max_stage,
    specific_class,
)

CONTEXT_MAX = 40          # lines kept in a context: the first CONTEXT_HEAD and the latest ones
CONTEXT_HEAD = 8
CONTEXT_LINE_MAX = 1000   # characters kept per context line
EXCEPTIONS_KEPT = 5

# Traceback structure (tested on the last \r segment of a line, ANSI codes removed).
FRAME_RE = re.compile(r"^\s*File \"([^\"]*)\", line \d+(?:, in (.*?))?\s*$")
HEADER_RE = re.compile(r"Traceback \(most recent call last\):\s*$")
_CHAIN_RE = re.compile(r"^(?:The above exception was the direct cause of the following exception:"
                       r"|During handling of the above exception, another exception occurred:)\s*$")
_CARET_RE = re.compile(r"^\s*[\^~]+\s*$")
EXC_RE = re.compile(
    r"^\s*what\(\):\s+\S"   # the message of a C++ exception under "terminate called after throwing ..."
    r"|^(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Exit|Interrupt|Failure|Failed|Fault|Abort)(?::(?:\s.*)?)?\s*$"
    r"|^(?:[A-Za-z_]\w*\.)+[A-Z]\w*: .*$|^(?:AssertionError|StopIteration|KeyboardInterrupt)\s*$")
_GLUED_HEADER_RE = re.compile(r"(?:it/s|s/it|\])\]?Traceback \(most recent call last\):\s*$")
_CALL_RE = re.compile(r"(\w+)\(")
_VALIDATION_RE = re.compile(r"^\s*(?:[\w.]+\.)?(?:ValueError|TypeError|AssertionError|ArgumentError|ArgumentTypeError)\b")
_FLAG_RE = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:[-_][a-z0-9]+)+")
_EXC_MESSAGE_RE = re.compile(r"^\s*[\w.]+: (\S.{8,})$")
_SOURCE_IMPORT_RE = re.compile(r"^\s*(?:from\s+\S+\s+import\b|import\s+\S)")

# A module or shared library that cannot be loaded: Python's import errors and the dynamic loader's (dlerror) texts.
_IMPORT_EXC_RE = re.compile(r"^(?:[\w.]+\.)?(?:ImportError|ModuleNotFoundError)\b|undefined symbol|cannot open shared object file"
                            r"|^\S*python[\d.]*: (?:No module named|Error while finding module specification)"
                            r"|error while loading shared libraries|symbol lookup error|version [`'](?:GLIBC|GLIBCXX|CXXABI)_[\d.]+' not found")
# The Hugging Face Hub refusing or lacking the model (gated, token, not found, offline): the model path or its
# credentials are wrong, whatever the stage (huggingface_hub.errors, and transformers' OSError texts around them).
_HUB_EXC_RE = re.compile(
    r"GatedRepoError|RepositoryNotFoundError|RevisionNotFoundError|LocalEntryNotFoundError|OfflineModeIsEnabled|HFValidationError"
    r"|You are trying to access a gated repo|Cannot access gated repo|\b40[134] Client Error|is not a valid model identifier"
    r"|Repository Not Found|outgoing traffic has been disabled|Cannot find the requested files in the local cache"
    r"|couldn't connect to 'https://huggingface\.co'|Invalid user token|does not appear to have a file named")
# The exceptions SGLang's argument handling raises (every class server_args.py and arg_groups/ raise in a supported
# release: tests/unit/plugins/module_utils/test_sglang_release_messages.py), argparse's and the Hub's.
_ARG_EXC_RE = re.compile(
    r"^(?:[\w.]+\.)?(?:ValueError|TypeError|AssertionError|RuntimeError|AttributeError|ArgumentError|ArgumentTypeError"
    r"|KeyError|NotImplementedError"
    r"|HFValidationError|RepositoryNotFoundError|GatedRepoError|OSError|FileNotFoundError|EnvironmentError)\b"
    r"|is not a valid model identifier|Repository Not Found|does not appear to have a file named"
    r"|unrecognized arguments|--[a-z][a-z0-9-]+")
_ARG_FRAME_RE = re.compile(
    r"server_args\.py|/arg_groups/|argparse\.py|model_config\.py|/configs/|hf_transformers_utils|configuration_utils\.py"
    r"|huggingface_hub/|arg_utils\.py")
# Frames of Python running a module (python -m) or importing one: runpy, importlib's bootstrap, import_module.
_IMPORT_MACHINERY_RE = re.compile(r"^<frozen (?:runpy|importlib\._bootstrap(?:_external)?)>$|/runpy\.py$|/importlib/")


@functools.lru_cache(maxsize=2048)   # the same files repeat in every rank's traceback
def _path_facts(path):
    """(runs or imports a module, handles arguments/configuration) for a frame's file path."""
    return _IMPORT_MACHINERY_RE.search(path) is not None, _ARG_FRAME_RE.search(path) is not None


def clip(line):
    """A line bounded for contexts and events: head and tail kept."""
    if len(line) > CONTEXT_LINE_MAX:
        return line[:CONTEXT_LINE_MAX // 2] + "\u2026" + line[-(CONTEXT_LINE_MAX // 2):]
    return line


def context_add(context, line):
    """Append to a bounded context list: keep its first CONTEXT_HEAD lines and the latest ones."""
    if len(context) >= CONTEXT_MAX:
        del context[CONTEXT_HEAD]
    context.append(clip(line))


def is_header(seg):
    """A traceback header at column 0 (also glued after a progress bar)."""
    return bool(HEADER_RE.search(seg)) and (seg.lstrip().startswith("Traceback") or _GLUED_HEADER_RE.search(seg) is not None)


@dataclasses.dataclass
class TracebackReader:
    """What one traceback has shown so far.

    kind is 'top' (``Traceback (most recent call last):`` at column 0), 'headless' (the text starts inside
    a traceback) or 'crash' (the traceback read after a decisive line, for the root cause).
    """

    kind: str = "top"
    line: Optional[str] = None        # proving line: the header; for headless ones the exception line
    lineno: Optional[int] = None
    context: Optional[List[str]] = dataclasses.field(default_factory=list)   # None once the crash owns it
    started: bool = True              # crash window only: False while waiting for the failing rank's traceback
    awaits: bool = False              # crash window only: the decisive line announced a root cause to come
    done: bool = False                # an exception line was seen
    after: int = 0                    # unrecognised lines after the exception line
    gap: bool = False                 # a blank line followed the exception line
    prev_frame: bool = False          # previous line was a File "..." frame, so this one is its source line
    last_func: Optional[str] = None
    last_path: str = ""
    import_chain: bool = False        # innermost frame is a module-level import statement
    last_frame_args: bool = False     # innermost frame is in argument handling (server_args.py, arg_groups/ ...)
    last_arg_exc: bool = False        # the last exception line is an argument-validation class, or names a --flag
    last_validation: bool = False     # ... and is a pure validation class (ValueError ...) or names a --flag
    frames: int = 0
    import_frames_only: bool = True   # every frame so far runs or imports a module (<module>, runpy, importlib)
    module_frames: int = 0
    first_module_import: Optional[bool] = None   # the source line of the first <module> frame is an import
    exc: List[str] = dataclasses.field(default_factory=list)   # exception lines (first EXCEPTIONS_KEPT)
    specific: Optional[str] = None    # most specific accelerator class named by exception/message lines
    import_exc: bool = False
    arg_frames: bool = False          # frames in argument/config handling (server_args.py, configs/, argparse ...)
    arg_exc: bool = False             # exception type typical of argument/config validation
    frame_stage: Optional[str] = None
    benign: bool = False              # printed by Python's unraisable/logging/atexit hooks: read, never adopted
    intro: Optional[str] = None       # "thread" (threading.excepthook), "ignore_import" (inside a warning), "logged" or
    # "cause_only" (a NCCL WARN line): never proved by a quiet log alone
    logged_by: Optional[str] = None   # the SGLang line before the header: a handler that logs an exception it caught
    cause: Optional[str] = None       # root-cause line: the most specific exception / what() line
    cause_class: Optional[str] = None
    last_import: bool = False         # the last exception line names a module or library that cannot load
    last_hub: bool = False            # the last exception line is the Hugging Face Hub refusing the model
    cpp_accel: bool = False           # a C++ exception report (c10/glog) raised inside an accelerator library

    def to_json(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data):
        if data is None:
            return None
        names = set(field.name for field in dataclasses.fields(cls))
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError("unknown TracebackReader state keys %s" % ", ".join(unknown))
        return cls(**data)

    @classmethod
    def begin(cls, kind, line, lineno, before):
        return cls(kind=kind, line=line, lineno=lineno, context=[clip(x) for x in before])

    # ------------------------------------------------------------------ reading
    def structure(self, seg):
        """Traceback role of a line: frame, source, caret, chain, header, exc or None."""
        if FRAME_RE.match(seg):
            return "frame"
        if self.prev_frame and not EXC_RE.match(seg):
            return "source"
        if _CARET_RE.match(seg):
            return "caret"
        if _CHAIN_RE.match(seg):
            return "chain"
        if CPP_TRACE_RE.match(seg):
            return "cframe"
        return structure_alone(seg)

    def read(self, raw, seg, lineno):
        """Record one line that belongs to this traceback."""
        if self.context is not None:
            context_add(self.context, raw)
        frame = FRAME_RE.match(seg)
        if frame:
            self._frame(frame.group(1), frame.group(2) or "")
            return
        was_frame = self.prev_frame
        self.prev_frame = False
        if was_frame and not EXC_RE.match(seg):
            self._source(seg)
            return
        if _CARET_RE.match(seg):
            return
        if CPP_TRACE_RE.match(seg):
            self.cpp_accel = self.cpp_accel or ACCELERATOR_LIBRARY_RE.search(seg) is not None
            return
        if _CHAIN_RE.match(seg) or (HEADER_RE.search(seg) and seg.lstrip().startswith("Traceback")):
            self.done = False
            self.after = 0
            return
        if EXC_RE.match(seg) or fatal_line(seg) is not None:
            self._exception(raw, seg, lineno)
        self.specific = better(self.specific, specific_class(seg))

    def _frame(self, path, func):
        self.prev_frame = True
        self.last_func = func
        self.last_path = path
        self.import_chain = False
        self.frames += 1
        machinery, argument_handling = _path_facts(path)
        if func == "<module>":
            self.module_frames += 1
        elif not (machinery or func == "import_module"):
            self.import_frames_only = False
        if argument_handling:
            self.arg_frames = True
        self.last_frame_args = argument_handling
        self.frame_stage = max_stage(self.frame_stage, frame_stage(path, func))

    def _source(self, seg):
        """The source line shown under a frame."""
        importing = _SOURCE_IMPORT_RE.match(seg) is not None
        self.import_chain = self.last_func == "<module>" and importing
        if self.last_func == "<module>" and self.first_module_import is None:
            self.first_module_import = importing
        # the call a frame was making also shows how far start-up got (excerpts cut mid-traceback)
        for called in _CALL_RE.findall(seg):
            self.frame_stage = max_stage(self.frame_stage, frame_stage(self.last_path, called, calls_only=True))

    def _exception(self, raw, seg, lineno):
        if self.line is None:
            self.line = raw
            self.lineno = lineno
        self.done = True
        self.after = 0
        if len(self.exc) < EXCEPTIONS_KEPT:
            self.exc.append(clip(seg))
        cause_class = specific_class(seg)
        if self.cause is None or (cause_class is not None and better(self.cause_class, cause_class) != self.cause_class):
            self.cause = clip(seg.strip())
            self.cause_class = cause_class
        self.last_import = _IMPORT_EXC_RE.search(seg) is not None
        self.last_hub = _HUB_EXC_RE.search(seg) is not None
        if self.last_import:
            self.import_exc = True
        message = _EXC_MESSAGE_RE.match(seg)
        if self.logged_by and message and message.group(1)[:200] in self.logged_by:
            # logger.exception("...: %s", e) printed the message first: a handler caught it (e.g. a request's error)
            self.intro = "logged"
        self.last_arg_exc = _ARG_EXC_RE.search(seg) is not None
        self.last_validation = _VALIDATION_RE.match(seg) is not None or _FLAG_RE.search(seg) is not None
        if self.last_arg_exc:
            self.arg_exc = True

    # ------------------------------------------------------------------ what it shows
    def imports_only(self):
        """Raised while Python imported modules: every frame runs or imports a module (launch_server importing
        its own modules), whatever the exception's class."""
        if not self.import_frames_only or self.module_frames == 0:
            return False
        return bool(self.first_module_import) or self.module_frames >= 2

    def signature(self, base, stage):
        """Signature from the base class and the root cause this traceback shows, at start-up stage ``stage``."""
        if base in SPECIFIC_ORDER and self.specific is not None:
            # e.g. "Unexpected error from cudaGetDeviceCount()" continued by "Error 804: forward compatibility ..."
            return better(base, self.specific)
        if base not in GENERIC:
            return base
        if stage == "start" and self.last_arg_exc and (self.last_frame_args if self.frames else self.last_validation):
            # raised by the argument handling to reject the arguments, also when its message names the GPU it needs
            # ("--enable-x requires SM100 GPUs"): the arguments are wrong for this host
            return "arg_error"
        if self.specific is not None:
            return self.specific
        # whatever the stage: the model cannot be had, a module or library cannot load, a C++ operator of the
        # accelerator failed
        if self.last_hub:
            return "arg_error"
        if self.last_import:
            return "import_error"
        if self.cpp_accel:
            return "device_error"
        if stage != "start":
            return base
        if self.import_exc or self.imports_only() or (not self.exc and self.import_chain):
            return "import_error"
        # argument handling in the frames, or an exception of argument validation raised by the launcher (a top-level
        # traceback, or its exception line alone)
        if self.arg_frames or (self.arg_exc and (self.kind == "top" or (self.kind == "headless" and self.frames == 0))):
            return "arg_error"
        return base


def structure_alone(seg):
    """Role of a line read with no traceback open: frame, header, exc or None."""
    if FRAME_RE.match(seg):
        return "frame"
    if HEADER_RE.search(seg):
        return "header" if is_header(seg) else None
    if EXC_RE.match(seg):
        return "exc"
    if fatal_line(seg) is not None:
        return "fatal"
    return None
