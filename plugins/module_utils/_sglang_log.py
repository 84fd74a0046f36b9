# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Incremental classifier for SGLang server start-up logs.

Private module_utils of llmops.sglang (runs on target hosts: Python 3.9+, standard library only).

The classifier reads the log of ONE SGLang start line by line and decides:

* the furthest start-up stage any rank reached (``STAGES``);
* whether the start is proven to have failed, and the crash class (``SIGNATURES``), the first line
  that proves it, and the traceback around it;
* whether the ready line ``The server is fired up and ready to roll!`` was printed.

The crash rule, in short (docs/log-classification.md has the long form):

1. SGLang's own fatal phrases (``... hit an exception``, ``Received sigquit from a child process``,
   ``Initialization failed.``, ``scheduler is dead`` ...) prove a crash at once.
2. An exception line at column 0 whose text names a specific accelerator failure (CUDA/HIP out of
   memory, NCCL error, no kernel image, driver mismatch, CUDA/HIP/NPU runtime error) proves a crash.
3. A bare top-level ``Traceback (most recent call last):`` (or an excerpt that starts inside one)
   is only a *candidate*: it becomes the crash when the log ends (``flush``) or the process exits
   with nothing after it but blank/noise lines, or when a fatal phrase or exit evidence
   (leaked-semaphore warning, ``Killed``) follows. Any later SGLang log line or stage line clears it,
   so benign library tracebacks never count.
4. SGLang reporting a dead child (``scheduler died ... (exit code: -9)``) is decisive; what a shell or
   the resource tracker prints when a process tree is gone (leaked-semaphore warning, ``Killed``,
   ``Segmentation fault``) is pending like a candidate traceback (``silent_exit``/``process_exited``);
   ``process_exited()`` with no evidence at all is ``process_exited``.

The signature is then refined from the root cause shown by the crash traceback (its exception
lines and message), e.g. ``torch.OutOfMemoryError`` turns ``traceback``/``sigquit_child`` into
``cuda_oom``; launcher-level failures before any stage are ``import_error`` or ``arg_error``.
"""

from __future__ import annotations

import codecs
import os
import re
import time

STAGES = ("start", "init_distributed", "load_weights", "kv_cache", "cuda_graph",
          "http_listening", "warmup", "ready")
SIGNATURES = ("traceback", "sigquit_child", "cuda_oom", "cuda_error", "nccl_error", "import_error",
              "arg_error", "driver_mismatch", "unsupported_arch", "device_error", "warmup_failed",
              "silent_exit", "unit_failed", "process_exited")

STATE_VERSION = 1

_STAGE_INDEX = dict((name, index) for index, name in enumerate(STAGES))

# Lines longer than this are kept as head + marker + tail (bounded memory for endless progress bars).
_LINE_HEAD = 4096
_LINE_TAIL = 28672
_LINE_MARK = "\u2026[line truncated by llmops.sglang]\u2026"
_LINE_MAX = _LINE_HEAD + len(_LINE_MARK) + _LINE_TAIL

_CONTEXT_MAX = 40          # lines kept in error_context: the first _CONTEXT_HEAD and the latest ones
_CONTEXT_HEAD = 8
_CONTEXT_LINE_MAX = 1000   # characters kept per context line
_RECENT_MAX = 5            # lines kept before an error for context
_REFINE_MAX_LINES = 1000    # lines after a crash in which the root cause may still be read
_CANDIDATE_TRAILER_MAX = 20  # unrecognised lines after a finished top-level traceback before it is dropped

# Classes that a later root cause may replace (they say "something failed" but not what).
_GENERIC = ("traceback", "sigquit_child")
# Specific root-cause classes, most specific first.
_SPECIFIC_ORDER = ("driver_mismatch", "unsupported_arch", "cuda_oom", "nccl_error", "cuda_error", "device_error")

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]")

# SGLang's own log prefix: "[2025-08-25 22:39:27] ", "[2025-08-25 22:39:27 TP3] ", "[... DP1 TP0 EP1] ",
# 0.2.x "[gpu=0] " / "[gpu_id=0] ", the tokenizer-manager style "[2025-08-25 22:39:27,123] " and the year-less "[12-16 14:27:08] ".
_SGLANG_PREFIX_RE = re.compile(r"^\[(?:(?:\d{4}-)?\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\]]*|gpu(?:_id)?=\d+[^\]]*)\] ")

_ARGS_RE = re.compile(r"server_args=|ServerArgs\(|port_args=PortArgs\(")

# Stage lines (case-sensitive, as SGLang prints them). Each pattern can only match a line that contains
# one of its stage's gates below: the gates are the cheap prefilter, the patterns the decision.
_STAGE_PATTERNS = (
    ("ready", re.compile(r"The server is fired up and ready to roll")),
    ("warmup", re.compile(
        r"\"(?:GET|POST) /(?:get_)?model_info\b|\"POST /(?:generate|encode|v1/embeddings|classify)\b"
        r"|(?:Start|End) of (?:pd |prefill |decode )?(?:disaggregation )?(?:mode )?warmup|Prefill batch[.,] "
        r"|Initialization failed\. warmup error")),
    ("http_listening", re.compile(r"Uvicorn running on")),
    ("cuda_graph", re.compile(
        r"\bCapture\b.{0,80}?\b(?:graph|Graph|GRAPH)s?\b.{0,40}?\b(?:begin|end|bs|failed)\b|\bCapturing\b")),
    ("kv_cache", re.compile(
        r"Load weight end|KV Cache is allocated|Memory pool end|max_total_num_tokens="
        r"|Running FlashInfer autotune|FlashInfer autotune completed")),
    ("load_weights", re.compile(
        r"Load weight begin|Loading (?:safetensors|pt|bin|gguf|npcache)[\w ]{0,20} checkpoint shards"
        r"|Multi-thread loading shards")),
    ("init_distributed", re.compile(
        r"Init torch distributed (?:begin|ends?)|Init parallel (?:begin|ends?)|Init nccl begin"
        r"|sglang is using nccl==|\[Gloo\] Rank \d+ is connected| NCCL INFO ")),
)
_STAGE_GATES = {
    "ready": ("The server is fired",),
    "warmup": ("GET /", "POST /", "Start of ", "End of ", "zation failed", "Prefill batch"),
    "http_listening": ("Uvicorn running on",),
    "cuda_graph": ("Captur",),
    "kv_cache": ("Load weight ", "KV Cache", "Memory pool end", "x_total_num_tokens", "FlashInfer autotune"),
    "load_weights": ("Load weight ", "kpoint shards", "Multi-thread loading"),
    "init_distributed": ("Init ", "using nccl==", "Gloo] Rank", "NCCL INFO "),
}

# Decisive phrases: (regex, signature, heads_traceback, evidence). evidence "" is SGLang's own verdict;
# "exit" is SGLang reporting that a child died (decisive); "shell" is what a shell or the multiprocessing
# resource tracker prints when the process tree is gone: decisive only if SGLang does not log on.
_CRASH_PHRASES = (
    (re.compile(r"\b\w+ hit an exception"), "traceback", True, ""),
    (re.compile(r"Received sigquit from a child proces"), "sigquit_child", False, ""),
    (re.compile(r"SIGQUIT received\b"), "sigquit_child", False, ""),
    (re.compile(r"Initialization failed\. warmup error"), "warmup_failed", True, ""),
    (re.compile(r"Initialization failed\."), "traceback", False, ""),
    (re.compile(r"scheduler died during initialization \(exit code: ?(-?\d+)"), "process_exited", False, "exit"),
    (re.compile(r"Subprocess \S+ \(pid=\d+\) crashed with exit code (-?\d+)"), "process_exited", False, "exit"),
    (re.compile(r"scheduler is dead\b"), "process_exited", False, "exit"),
    (re.compile(r"DataParallelController \d+ terminated with (-?\d+)"), "process_exited", False, "exit"),
    (re.compile(r"[Cc]apture (?:cuda |CUDA |npu |NPU |piecewise |piecewise CUDA )?[Gg]raph failed"), "traceback", False, ""),
    (re.compile(r"Not enough memory\. Please try to increase --mem-fraction-static"), "cuda_oom", False, ""),
    (re.compile(r"No supported CUDA architectures found for major versions"), "unsupported_arch", False, ""),
    (re.compile(r"FlashInfer allreduce fusion requires SM90"), "unsupported_arch", False, ""),
    (re.compile(r"Watchdog caught collective operation timeout"), "nccl_error", False, ""),
    # uvicorn cannot bind the HTTP port (e.g. [Errno 98] address already in use): the server shuts down
    (re.compile(r"ERROR:\s+\[Errno \d+\] error while attempting to bind on address"), "traceback", False, ""),
    (re.compile(r"^\[(?:\d{4}-)?\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\]]*\] Traceback \(most recent call last\)"), "traceback", True, ""),
    (re.compile(r"Exception in (?:ModelTpServer|ModelRpcServer|ControllerSingle|ControllerMulti|run_tp_server"
                r"|run_scheduler_process|DetokenizerManager|TokenizerManager)\b"), "traceback", True, ""),
    (re.compile(r"^Fatal Python error: "), "traceback", False, ""),
    (re.compile(r"terminate called after throwing an instance of"), "traceback", False, ""),
    (re.compile(r": error: (?:argument |unrecognized arguments|the following arguments are required|ambiguous option)"),
     "arg_error", False, "exit"),
    (re.compile(r"resource_tracker: There appear to be \d+ leaked"), "silent_exit", False, "shell"),
    (re.compile(r"^(?:Killed|\u5df2\u6740\u6b7b)\s*$"), "silent_exit", False, "shell"),   # "Killed" (zh_CN: \u5df2\u6740\u6b7b)
    (re.compile(r"^(?:Segmentation fault|Aborted|Bus error|Illegal instruction|Floating point exception)"
                r"(?: \(core dumped\))?\s*$"), "process_exited", False, "shell"),
)

# Root-cause classes read from exception and message lines, most specific first. cuda_error means "CUDA
# is not usable at all" (no device, driver/runtime not initialised); runtime/operator failures of any
# accelerator (CUDA, ROCm/HIP, Ascend NPU, XPU) are device_error, as in the corpus README.
_CLASS_PATTERNS = (
    ("driver_mismatch", re.compile(
        r"Driver/library version mismatch|CUDA driver version is insufficient|driver on your system is too old"
        r"|cudaErrorInsufficientDriver|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH|forward compatibility was attempted"
        r"|unsupported display driver / cuda driver combination|NVML library version mismatch"
        r"|NVML/RM version mismatch|NVMLError_LibRmVersionMismatch|cudaErrorCompatNotSupportedOnDevice"
        r"|CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE|cudaErrorSystemDriverMismatch"
        r"|PTX was compiled with an unsupported toolchain|CUDA_ERROR_UNSUPPORTED_PTX_VERSION")),
    ("unsupported_arch", re.compile(
        r"no kernel image is available|cudaErrorNoKernelImageForDevice|CUDA_ERROR_NO_BINARY_FOR_GPU|kernel image is invalid"
        r"|hipErrorNoBinaryForGpu|(?i:no binary for gpu)|invalid device function|hipErrorInvalidDeviceFunction"
        r"|is not compatible with the current PyTorch installation|not supported (?:in|on) this (?:architecture|GPU|device)"
        r"|(?i:unsupported (?:gpu |cuda )?arch)|No supported CUDA architectures found|requires SM ?\d+"
        r"|sm_?\d+a? is not (?:supported|compatible)|fp8e4nv not supported|not supported for the current GPU"
        r"|Minimum capability: \d+|only supports? (?:Ampere|Hopper|Blackwell|Ada|sm_?\d+)"
        r"|compute capability (?:of )?[\d.]+ .{0,60}not supported")),
    ("cuda_oom", re.compile(
        r"(?i:out of memory)|OutOfMemoryError|cudaErrorMemoryAllocation|hipErrorOutOfMemory|CUBLAS_STATUS_ALLOC_FAILED"
        r"|ACL_ERROR_RT_MEMORY_ALLOCATION|Not enough memory\. Please try to increase")),
    ("nccl_error", re.compile(
        r"NCCL error|nccl\w*Error\b|ncclSystemError|ncclInternalError|ncclInvalidUsage|ncclRemoteError"
        r"|ncclInvalidArgument|DistBackendError|ProcessGroupNCCL.{0,80}(?i:timed? ?out|watchdog)|HCCL error"
        r"|Hccl\w* failed|RCCL error|connectFullMesh failed|gloo/transport/|ProcessGroupGloo|ncclUniqueId|DistNetworkError"
        r"|Watchdog caught collective operation timeout|c10::DistBackendError|DistStoreError")),
    ("cuda_error", re.compile(
        r"no CUDA-capable device is detected|CUDA-capable device\(s\) (?:is|are)|cudaErrorNoDevice|cudaErrorDevicesUnavailable"
        r"|No CUDA GPUs are available|Unexpected error from cudaGetDeviceCount|CUDA driver initialization failed"
        r"|CUDA_ERROR_NOT_INITIALIZED|CUDA_ERROR_NO_DEVICE|Found no NVIDIA driver|Torch not compiled with CUDA enabled"
        r"|CUDA initialization: |cudaErrorInitializationError|system not yet initialized|invalid device ordinal")),
    ("device_error", re.compile(
        r"CUDA error|cudaError\w+|CUDA_ERROR_\w+|CUBLAS_STATUS_\w+|CUDNN_STATUS_\w+|cuDNN error|Triton Error \[(?:CUDA|HIP)\]"
        r"|AcceleratorError|CUDA driver error|device-side assert|illegal memory access|misaligned address"
        r"|HIP error|hipError\w+|ROCm error|NPU function error|NPU error|ACL error|aclnn\w* failed"
        r"|PTA call acl api failed|\bE[A-Z]?\d{4}: |\bERR\d{5}\b|XPU error|MUSA error")),
)

_IMPORT_EXC_RE = re.compile(r"^(?:[\w.]+\.)?(?:ImportError|ModuleNotFoundError)\b|undefined symbol|cannot open shared object file")
_ARG_EXC_RE = re.compile(
    r"^(?:[\w.]+\.)?(?:ValueError|TypeError|AssertionError|ArgumentError|ArgumentTypeError|KeyError|NotImplementedError"
    r"|HFValidationError|RepositoryNotFoundError|GatedRepoError|OSError|FileNotFoundError|EnvironmentError)\b"
    r"|is not a valid model identifier|Repository Not Found|does not appear to have a file named"
    r"|unrecognized arguments|--[a-z][a-z0-9-]+")
_ARG_FRAME_RE = re.compile(
    r"server_args\.py|/arg_groups/|argparse\.py|model_config\.py|/configs/|hf_transformers_utils|configuration_utils\.py"
    r"|huggingface_hub/|arg_utils\.py")

# Traceback structure (tested on the last \r segment of a line, ANSI codes removed).
_FRAME_RE = re.compile(r"^\s*File \"([^\"]*)\", line \d+(?:, in (.*?))?\s*$")
_HEADER_RE = re.compile(r"Traceback \(most recent call last\):\s*$")
_CHAIN_RE = re.compile(r"^(?:The above exception was the direct cause of the following exception:"
                       r"|During handling of the above exception, another exception occurred:)\s*$")
_CARET_RE = re.compile(r"^\s*[\^~]+\s*$")
_EXC_RE = re.compile(
    r"^\s*what\(\):\s+\S"   # the message of a C++ exception under "terminate called after throwing ..."
    r"|^(?:[A-Za-z_]\w*\.)*\w*(?:Error|Exception|Exit|Interrupt|Failure|Failed|Fault|Abort)(?::(?:\s.*)?)?\s*$"
    r"|^(?:[A-Za-z_]\w*\.)+[A-Z]\w*: .*$|^(?:AssertionError|StopIteration|KeyboardInterrupt)\s*$")
_NOISE_RE = re.compile(
    r"^\s*$|^\s+warnings\.warn\(|^\S+\.py:\d+: \w*Warning: |resource_tracker|^Killed\s*$|^\s*(?:/\S+ )?Terminated\s*$"
    r"|^\[W\d* |^\[rank\d+\]:\[W|^Exception ignored in|^sys:1: |^\s*$")
_BENIGN_TB_INTROS = ("Exception ignored in", "--- Logging error ---", "Error in atexit")
_CALL_RE = re.compile(r"(\w+)\(")
_GLUED_HEADER_RE = re.compile(r"(?:it/s|s/it|\])\]?Traceback \(most recent call last\):\s*$")
_SOURCE_IMPORT_RE = re.compile(r"^\s*(?:from\s+\S+\s+import\b|import\s+\S)")

_FRAME_SKIP_RE = re.compile(r"server_args\.py|launch_server\.py|/arg_groups/|/configs/")
_FRAME_STAGE = (
    ("warmup", re.compile(r"^(?:_wait_and_warmup|_execute_server_warmup)$"), None),
    ("cuda_graph", re.compile(r"cuda_graph|^_?capture\w*$|^init_\w*graphs?$|graph_runner"),
     re.compile(r"graph_runner|cuda_graph|npu_graph")),
    ("kv_cache", re.compile(r"^(?:init_memory_pool\w*|profile_max_num_token|init_attention_backend|_get_attention_backend\w*"
                            r"|kernel_warmup|\w*flashinfer_autotune\w*)$"),
     re.compile(r"/mem_cache/")),
    ("load_weights", re.compile(r"^(?:load_model|load_weights\w*|\w*weight_loader\w*|create_weights|load_weights_and_postprocess"
                                r"|download_model|_load_\w*weights?\w*)$"), re.compile(r"/model_loader/")),
    ("init_distributed", re.compile(r"^(?:init_torch_distributed|init_distributed_environment|initialize_model_parallel"
                                    r"|init_model_parallel_group|init_process_group|ncclCommInitRank|init_parallel\w*)$"),
     re.compile(r"pynccl|/device_communicators/|parallel_state\.py")),
)

# Cheap prefilter. While no traceback is open, a line that contains none of these literal gates (plus the
# gates of the stages not reached yet) can only be counted: it cannot decide anything. Gates start with
# rare characters where possible, which is what keeps Python's regex search fast.
_CRASH_GATES = (
    "Error", "xception", "Abort", "Traceback", "File \"", "quit from a child", "QUIT", "zation failed", "xit code",
    "uler is dead", "ParallelController", "Fatal Python", "wing an instance of", "\nusage: ", "There appear to be",
    "Watchdog caught", "ERROR:    [Errno", "what():", "Ignore import error", "Killed", "\u5df2\u6740\u6b7b", "Segmentation fault", "Bus error", "Illegal instruction",
)
_CRASH_GATE_RE = re.compile("|".join(re.escape(g) for g in _CRASH_GATES))
_USAGE_RE = re.compile(r"^usage: ")
_GATE_CACHE = {}


def _gate_re(stage, extra):
    """Prefilter regex for a classifier at ``stage`` (plus user crash patterns ``extra``)."""
    key = (stage, extra)
    regex = _GATE_CACHE.get(key)
    if regex is None:
        gates = list(_CRASH_GATES)
        for name in STAGES[_STAGE_INDEX[stage] + 1:]:
            gates.extend(_STAGE_GATES[name])
        source = "|".join(re.escape(g) for g in gates)
        if extra:
            source += "|" + "|".join("(?:%s)" % p for p in extra)
        regex = _GATE_CACHE[key] = re.compile(source)
    return regex


# After the ready line only a real exception counts as a (runtime) crash; "SIGQUIT received" alone is also
# what a normal SIGTERM shutdown prints (0.5.16: "Subprocess detokenizer ... crashed with exit code -15").
_POST_READY_RE = re.compile(r"hit an exception|Received sigquit from a child")


def _cap_line(line):
    """Bound one line: keep its first and last characters (same result for any chunking)."""
    if len(line) > _LINE_MAX:
        return line[:_LINE_HEAD] + _LINE_MARK + line[-_LINE_TAIL:]
    return line


def _clip(line):
    if len(line) > _CONTEXT_LINE_MAX:
        return line[:_CONTEXT_LINE_MAX // 2] + "\u2026" + line[-(_CONTEXT_LINE_MAX // 2):]
    return line


def _strip_ansi(text):
    if "\x1b" in text:
        return _ANSI_RE.sub("", text)
    return text


def _last_segment(text):
    """What a terminal shows of a line with carriage returns: its last non-empty segment."""
    if "\r" not in text:
        return text
    for part in reversed(text.split("\r")):
        if part.strip():
            return part
    return ""


def _specific_class(text):
    for name, regex in _CLASS_PATTERNS:
        if regex.search(text):
            return name
    return None


def _better(current, new):
    """Return the more specific of two specific classes (None allowed)."""
    if current is None:
        return new
    if new is None:
        return current
    return new if _SPECIFIC_ORDER.index(new) < _SPECIFIC_ORDER.index(current) else current


def _frame_stage(path, func, calls_only=False):
    """Start-up stage shown by one SGLang frame (file path and function or called name), else None."""
    if "sglang" not in path.lower() or _FRAME_SKIP_RE.search(path):
        return None
    for stage, func_re, path_re in _FRAME_STAGE:
        if func and func_re.search(func):
            return stage
        if not calls_only and path_re is not None and path_re.search(path):
            return stage
    return None


def _max_stage(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a if _STAGE_INDEX[a] >= _STAGE_INDEX[b] else b


def _context_add(context, line):
    """Append to a bounded context list: keep its first _CONTEXT_HEAD lines and the latest ones."""
    if len(context) >= _CONTEXT_MAX:
        del context[_CONTEXT_HEAD]
    context.append(_clip(line))


def _new_tb(kind, line, lineno, before):
    """State of a traceback being read.

    kind is 'top' (``Traceback (most recent call last):`` at column 0), 'headless' (the text starts
    inside a traceback) or 'crash' (the traceback read after a decisive line, for the root cause).
    """
    return {
        "kind": kind,
        "line": line,            # proving line: the header; for headless ones the exception line
        "lineno": lineno,
        "context": [_clip(x) for x in before],
        "started": True,         # crash window only: False while waiting for the failing rank's traceback
        "done": False,           # an exception line was seen
        "after": 0,              # unrecognised lines after the exception line
        "prev_frame": False,     # previous line was a File "..." frame, so this one is its source line
        "last_func": None,
        "last_path": "",
        "import_chain": False,   # innermost frame is a module-level import statement
        "exc": [],               # exception lines (first 5)
        "specific": None,        # most specific accelerator class named by exception/message lines
        "import_exc": False,
        "arg_frames": False,     # frames in argument/config handling (server_args.py, configs/, argparse ...)
        "arg_exc": False,        # exception type typical of argument/config validation
        "frame_stage": None,
        "benign": False,         # printed by Python's unraisable/logging/atexit hooks: read, never adopted
        "intro": None,           # "thread" (threading.excepthook) or "ignore_import" (message of a warning)
        "cause": None,           # root-cause line: the most specific exception / what(): line
        "cause_class": None,
    }


class LogClassifier:
    """Incremental, line-by-line classifier of ONE SGLang run's startup log."""

    def __init__(self, crash_patterns=(), ignore_patterns=(), state=None):
        if state is not None and not crash_patterns and not ignore_patterns:
            crash_patterns = state.get("crash_patterns") or ()
            ignore_patterns = state.get("ignore_patterns") or ()
        self._crash_sources = [str(p) for p in (crash_patterns or ())]
        self._ignore_sources = [str(p) for p in (ignore_patterns or ())]
        self._crash_res = [re.compile(p) for p in self._crash_sources]
        self._ignore_res = [re.compile(p) for p in self._ignore_sources]
        self._extra = tuple(self._crash_sources)
        self._gates = {}
        self._status = "starting"
        self._line_stage = "start"
        self._frame_stage_max = None
        self._stages = []
        self._signature = None
        self._base_signature = None
        self._error_line = None
        self._error_lineno = None
        self._context = []
        self._lineno = 0
        self._last_line = None
        self._pending = ""
        self._recent = []
        self._candidate = None
        self._exit_pending = None
        self._crash_tb = None
        self._refine_left = 0
        self._slow_left = 0
        self._leaked = False
        self._exit_code = None
        self._exited = False
        self._post_ready_crash = False
        self._flushed = False
        self._root_cause = None
        if state is not None:
            self._load_state(state)

    # ------------------------------------------------------------------ state
    _STATE_KEYS = (
        "_status", "_line_stage", "_frame_stage_max", "_stages", "_signature", "_base_signature", "_error_line",
        "_error_lineno", "_context", "_lineno", "_last_line", "_pending", "_recent", "_candidate", "_exit_pending", "_crash_tb",
        "_refine_left", "_slow_left", "_leaked", "_exit_code", "_exited", "_post_ready_crash", "_flushed",
        "_root_cause",
    )

    def to_state(self):
        """JSON-serialisable dict (bounded size); ``LogClassifier(state=c.to_state())`` continues exactly."""
        state = {"version": STATE_VERSION, "crash_patterns": list(self._crash_sources),
                 "ignore_patterns": list(self._ignore_sources)}
        for key in self._STATE_KEYS:
            state[key[1:]] = _copy_json(getattr(self, key))
        return state

    def _load_state(self, state):
        if state.get("version") != STATE_VERSION:
            raise ValueError("unsupported LogClassifier state version %r (expected %d)" % (state.get("version"), STATE_VERSION))
        for key in self._STATE_KEYS:
            if key[1:] in state:
                setattr(self, key, _copy_json(state[key[1:]]))

    # ------------------------------------------------------------------ public API
    @property
    def status(self):
        """"starting", "ready" or "crashed"."""
        return self._status

    @property
    def stage(self):
        """The furthest stage reached (str)."""
        return self._effective_stage()

    def feed(self, text, now=None):
        """Feed decoded text (may end mid-line; the partial line is kept until completed).

        Returns the list of new events (dicts with "type" "stage", "ready", "crash" or "signature";
        "signature" events report a crash class refined from the traceback read after the crash).
        """
        events = []
        if now is None:
            now = time.monotonic()
        self._start(now)
        if not text:
            return events
        last_nl = text.rfind("\n")
        if last_nl < 0:
            self._pending = _cap_line(self._pending + text)
            return events
        block = text[:last_nl + 1]
        rest = text[last_nl + 1:]
        if self._pending:
            first_nl = block.find("\n")
            first = _cap_line(self._pending + block[:first_nl])
            self._pending = ""
            self._line(first, events, now)
            block = block[first_nl + 1:]
        self._block(block, events, now)
        self._pending = _cap_line(rest)
        return events

    def flush(self, now=None):
        """End of input that will never be completed (process exited / static file).

        The pending partial line counts as a complete line, and a top-level traceback that nothing
        followed is decided to be the crash. Returns events.
        """
        events = []
        if now is None:
            now = time.monotonic()
        self._start(now)
        if self._pending:
            line = self._pending
            self._pending = ""
            self._line(line, events, now)
        self._flushed = True
        self._refine_left = 0
        self._decide_at_rest(events, quiet=False)
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
        if self._status == "starting":
            self._decide_at_rest([], quiet=True)
        return self._status == "crashed"

    @property
    def settled(self):
        """True when no line still to come is expected to refine the verdict: no traceback is open, or the
        crash's traceback closed with its exception line (or its refinement window ended)."""
        if self._status == "crashed":
            tb = self._crash_tb
            if self._refine_left <= 0 or tb is None:
                return True
            return bool(tb["started"] and tb["done"]) or (not tb["started"] and not tb.get("awaits"))
        tb = self._candidate
        return self._status == "ready" or tb is None or bool(tb["done"])

    def _log_proves_exit(self, tb):
        """A candidate traceback that, with the log quiet, proves the interpreter is exiting."""
        if tb["benign"] or tb["line"] is None or tb["intro"] is not None:
            return False
        if not tb["done"]:
            return self._effective_stage() == "start"
        return tb["kind"] == "top"

    def _decide_at_rest(self, events, quiet):
        """End of input (``quiet`` False: nothing will follow) or a quiet log (``quiet`` True): pending exit
        evidence and candidate tracebacks become the crash by the rules of flush()/log_quiet()."""
        if self._status == "starting" and self._exit_pending is not None:
            pending = self._exit_pending
            self._exit_pending = None
            if self._candidate is not None:
                self._fold_frames(self._candidate)
                self._candidate = None
            self._crash(pending["signature"], pending["line"], pending["lineno"], events, heads_tb=False)
            self._context = pending["context"]
        elif self._status == "starting" and self._candidate is not None:
            tb = self._candidate
            if quiet:
                if self._log_proves_exit(tb):
                    self._adopt_candidate(None, None, None, events, heads_tb=False)
            elif tb["benign"] or tb["line"] is None:
                # benign hook output, or bare frames (a stack print) with no exception line: proves nothing
                self._candidate = None
            else:
                self._adopt_candidate(None, None, None, events, heads_tb=False)

    def process_exited(self, exit_code=None, now=None):
        """The server process (or unit) exited during start-up: decide the crash from the evidence.

        Feed everything the log holds first. A pending traceback gives its class; with no evidence the
        signature is "silent_exit" when the leaked-semaphore warning was seen, else "process_exited".
        """
        if now is None:
            now = time.monotonic()
        events = self.flush(now)
        self._exited = True
        if exit_code is not None:
            self._exit_code = exit_code
        if self._status == "starting":
            self._crash("silent_exit" if self._leaked else "process_exited", None, None, events, heads_tb=False)
        return events

    def result(self):
        """The verdict so far (see the module docstring and docs/log-classification.md)."""
        return {
            "status": self._status,
            "stage": self._effective_stage(),
            "stages": _copy_json(self._stages),
            "signature": self._signature,
            "error_line": self._error_line,
            "error_lineno": self._error_lineno,
            "error_context": list(self._context),
            "lines_seen": self._lineno,
            "last_line": self._last_line,
            "exit_code": self._exit_code,
            "post_ready_crash": self._post_ready_crash,
            "root_cause": self._root_cause,
        }

    # ------------------------------------------------------------------ reading lines
    def _start(self, now):
        if not self._stages:
            self._stages.append({"stage": "start", "time": now, "line": None, "lineno": None})

    def _block(self, block, events, now):
        """Process complete lines; lines the prefilter rejects are only counted."""
        pos = 0
        end = len(block)
        while pos < end:
            if self._status != "starting" and self._refine_left <= 0:
                if self._status == "ready" and not self._post_ready_crash:
                    match = _POST_READY_RE.search(block, pos)
                    if match is not None:
                        line_start = block.rfind("\n", 0, match.start()) + 1
                        if line_start > pos:
                            self._skip(block, pos, line_start)
                            pos = line_start
                        line_end = block.find("\n", pos)
                        self._line(_cap_line(block[pos:line_end]), events, now)
                        pos = line_end + 1
                        continue
                self._skip(block, pos, end)
                return
            if self._candidate is None and self._exit_pending is None and self._refine_left <= 0 and self._slow_left <= 0 \
                    and not block.startswith("usage: ", pos):
                gate = self._gates.get(self._line_stage)
                if gate is None:
                    gate = self._gates[self._line_stage] = _gate_re(self._line_stage, self._extra)
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
            self._line(_cap_line(block[pos:line_end]), events, now)
            pos = line_end + 1

    def _skip(self, block, start, end):
        """Count the lines in block[start:end] (ends with a newline) and remember the last ones."""
        self._lineno += block.count("\n", start, end)
        tail = []
        stop = end - 1
        last_text = None
        while stop >= start and (len(tail) < _RECENT_MAX or last_text is None):
            begin = block.rfind("\n", start, stop) + 1
            if begin < start:
                begin = start
            line = block[begin:stop]
            if len(tail) < _RECENT_MAX:
                tail.append(line)
            if last_text is None and line.strip():
                last_text = line
            stop = begin - 1
        tail.reverse()
        self._recent = (self._recent + [_clip(_cap_line(x)) for x in tail])[-_RECENT_MAX:]
        if last_text is not None:
            self._last_line = _clip(_cap_line(last_text))

    def _line(self, raw, events, now):
        self._lineno += 1
        if self._slow_left > 0:
            self._slow_left -= 1
        self._line_body(raw, self._lineno, events, now)
        self._recent.append(_clip(raw))
        if len(self._recent) > _RECENT_MAX:
            del self._recent[0]
        if raw.strip():
            self._last_line = _clip(raw)

    def _line_body(self, raw, lineno, events, now):
        clean = _strip_ansi(raw)
        if self._ignore_res and any(r.search(clean) for r in self._ignore_res):
            return
        if self._status == "ready":
            if not self._post_ready_crash and _POST_READY_RE.search(clean) and not _ARGS_RE.search(clean):
                self._post_ready_crash = True
            return
        if "server_args=" in clean or "ServerArgs(" in clean or "port_args=PortArgs(" in clean:
            # The args dump holds user values and field names such as custom_sigquit_handler,
            # crash_dump_folder, skip_server_warmup ...: never evidence. A new dump means a new run.
            self._candidate = None
            self._exit_pending = None
            self._refine_left = 0
            return
        seg = _last_segment(clean)
        if self._status == "crashed":
            self._refine(raw, clean, seg, lineno, events, now)
            return

        tb = self._candidate
        gated = _CRASH_GATE_RE.search(clean) is not None or seg.startswith("usage: ")
        kind = self._structure(tb, seg) if (gated or tb is not None) else None
        if tb is not None and kind in ("frame", "source", "caret", "chain"):
            self._tb_line(tb, raw, seg, lineno)
            return
        phrase = self._crash_phrase(clean, seg) if (gated or self._crash_res or self._slow_left > 0) else None
        stage = self._stage_of(clean)
        if phrase is not None:
            signature, heads_tb, evidence = phrase
            exit_evidence = bool(evidence)
            if stage is not None and stage != "ready":
                self._set_stage(stage, raw, lineno, events, now)
            if signature == "silent_exit":
                self._leaked = True
            if evidence == "shell" and (tb is None or tb["line"] is None or tb["benign"]):
                # the process tree is gone, unless SGLang logs on (another process's "Killed", a compile
                # worker's resource tracker): decided at the end of input / process exit
                if self._exit_pending is None:
                    context = [_clip(x) for x in self._recent]
                    _context_add(context, raw)
                    self._exit_pending = {"signature": signature, "line": raw, "lineno": lineno, "context": context}
                return
            self._exit_pending = None
            if tb is not None and kind == "exc":
                # e.g. "Exception: Capture cuda graph failed: CUDA out of memory ..." ends the traceback
                self._tb_line(tb, raw, seg, lineno)
            if tb is not None and tb["line"] is not None and not tb["benign"]:
                base = None if (exit_evidence or signature in _GENERIC) else signature
                if exit_evidence and kind == "exc":
                    # the launcher's own traceback reporting that a child died (exit code): the death is the cause
                    base = signature
                self._adopt_candidate(base, raw, lineno, events, heads_tb=heads_tb)
                return
            if tb is not None:
                if not tb["benign"]:
                    self._fold_frames(tb)
                self._candidate = None
            specific = _specific_class(clean)
            if signature in _GENERIC and specific is not None:
                signature = specific
            self._crash(signature, raw, lineno, events, heads_tb=heads_tb)
            return
        if stage == "ready":
            self._set_stage("ready", raw, lineno, events, now)
            self._status = "ready"
            self._candidate = None
            events.append({"type": "ready", "line": _clip(raw), "lineno": lineno, "time": now})
            return
        if stage is not None:
            self._set_stage(stage, raw, lineno, events, now)
        if self._exit_pending is not None and (stage is not None or _SGLANG_PREFIX_RE.match(seg) is not None):
            self._exit_pending = None   # SGLang went on logging: that was not this server's exit
        if gated and _USAGE_RE.match(seg):
            # argparse prints "usage: ..." and then the "prog: error: ..." line: read the next lines one by one
            self._slow_left = 3
        prefixed = _SGLANG_PREFIX_RE.match(seg) is not None

        if tb is not None:
            if kind == "header":
                if tb["done"] and tb["after"] > 0:
                    self._start_candidate(raw, lineno)
                else:
                    self._tb_line(tb, raw, seg, lineno)
                return
            if kind == "exc":
                self._tb_line(tb, raw, seg, lineno)
                if tb["specific"] is not None and not tb["benign"]:
                    self._adopt_candidate(None, None, None, events, heads_tb=False)
                return
            if prefixed or stage is not None:
                self._candidate = None   # SGLang went on logging: that traceback was not fatal
                return
            if tb["done"]:
                if _NOISE_RE.search(seg):
                    _context_add(tb["context"], raw)
                    return
                tb["after"] += 1
                if tb["after"] > _CANDIDATE_TRAILER_MAX:
                    self._candidate = None
                    return
            self._tb_line(tb, raw, seg, lineno)
            if tb["specific"] is not None and tb["done"] and not tb["benign"]:
                self._adopt_candidate(None, None, None, events, heads_tb=False)
            return

        if kind == "header":
            self._start_candidate(raw, lineno)
        elif kind == "frame":
            self._candidate = _new_tb("headless", None, None, self._recent)
            self._tb_line(self._candidate, raw, seg, lineno)
        elif kind == "exc" and _specific_class(seg) is not None:
            # a lone exception line (excerpt without frames) that names a specific accelerator failure
            self._candidate = _new_tb("headless", None, None, self._recent)
            self._tb_line(self._candidate, raw, seg, lineno)
            self._adopt_candidate(None, None, None, events, heads_tb=False)

    def _start_candidate(self, raw, lineno):
        """A top-level ``Traceback (most recent call last):`` header starts a candidate."""
        previous = next((x for x in reversed(self._recent) if x.strip()), "")
        self._candidate = _new_tb("top", raw, lineno, self._recent)
        self._candidate["context"].append(_clip(raw))
        # printed by Python's unraisable-exception, logging-error or atexit hooks: never what stops a start
        self._candidate["benign"] = _strip_ansi(previous).startswith(_BENIGN_TB_INTROS)
        # Python's threading.excepthook prints "Exception in thread NAME:" first: a thread died, not the server
        if _strip_ansi(previous).startswith("Exception in thread"):
            self._candidate["intro"] = "thread"
        for line in reversed(self._recent):
            if _SGLANG_PREFIX_RE.match(_strip_ansi(line)):
                # SGLang's "Ignore import error when loading X: <message>" whose message holds a traceback
                if "Ignore import error" in line:
                    self._candidate["intro"] = "ignore_import"
                break

    def _crash_phrase(self, clean, seg):
        """(signature, heads_traceback, evidence) of a decisive line, else None."""
        for regex, signature, heads_tb, exit_evidence in _CRASH_PHRASES:
            match = regex.search(seg)
            if match is None and seg is not clean:
                match = regex.search(clean)
            if match is not None:
                if signature == "process_exited" and match.groups() and match.group(1) is not None:
                    if match.group(1).lstrip("-").isdigit() and int(match.group(1)) in (-9, 137):
                        signature = "silent_exit"
                return signature, heads_tb, exit_evidence
        if self._crash_res and any(r.search(clean) for r in self._crash_res):
            return _specific_class(clean) or "traceback", False, ""
        return None

    def _stage_of(self, clean):
        """The highest stage not reached yet that this line shows, else None."""
        for stage, regex in _STAGE_PATTERNS:
            if _STAGE_INDEX[stage] <= _STAGE_INDEX[self._line_stage]:
                return None
            if regex.search(clean):
                return stage
        return None

    @staticmethod
    def _structure(tb, seg):
        """Traceback role of a line: frame, source, caret, chain, header, exc or None."""
        if _FRAME_RE.match(seg):
            return "frame"
        if tb is not None:
            if tb["prev_frame"] and not _EXC_RE.match(seg):
                return "source"
            if _CARET_RE.match(seg):
                return "caret"
            if _CHAIN_RE.match(seg):
                return "chain"
        if _HEADER_RE.search(seg):
            stripped = seg.lstrip()
            if stripped.startswith("Traceback") or _GLUED_HEADER_RE.search(seg):
                return "header"
            return None
        if _EXC_RE.match(seg):
            return "exc"
        return None

    def _tb_line(self, tb, raw, seg, lineno):
        """Record one line that belongs to traceback ``tb``."""
        if tb["context"] is not None:   # None once the crash window writes the classifier's own error_context
            _context_add(tb["context"], raw)
        frame = _FRAME_RE.match(seg)
        if frame:
            tb["prev_frame"] = True
            path, func = frame.group(1), frame.group(2) or ""
            tb["last_func"] = func
            tb["last_path"] = path
            tb["import_chain"] = False
            if _ARG_FRAME_RE.search(path):
                tb["arg_frames"] = True
            stage = _frame_stage(path, func)
            if stage is not None:
                tb["frame_stage"] = _max_stage(tb["frame_stage"], stage)
            return
        was_frame = tb["prev_frame"]
        tb["prev_frame"] = False
        if was_frame and not _EXC_RE.match(seg):
            tb["import_chain"] = tb["last_func"] == "<module>" and _SOURCE_IMPORT_RE.match(seg) is not None
            # the call a frame was making also shows how far start-up got (excerpts cut mid-traceback)
            for called in _CALL_RE.findall(seg):
                stage = _frame_stage(tb["last_path"], called, calls_only=True)
                if stage is not None:
                    tb["frame_stage"] = _max_stage(tb["frame_stage"], stage)
            return
        if _CARET_RE.match(seg):
            return
        if _CHAIN_RE.match(seg) or (_HEADER_RE.search(seg) and seg.lstrip().startswith("Traceback")):
            tb["done"] = False
            tb["after"] = 0
            return
        if _EXC_RE.match(seg):
            if tb["line"] is None:
                tb["line"] = raw
                tb["lineno"] = lineno
            tb["done"] = True
            tb["after"] = 0
            if len(tb["exc"]) < 5:
                tb["exc"].append(_clip(seg))
            cause_class = _specific_class(seg)
            if tb["cause"] is None or (cause_class is not None and _better(tb["cause_class"], cause_class) != tb["cause_class"]):
                tb["cause"] = _clip(seg.strip())
                tb["cause_class"] = cause_class
            if _IMPORT_EXC_RE.search(seg):
                tb["import_exc"] = True
            if _ARG_EXC_RE.search(seg):
                tb["arg_exc"] = True
        tb["specific"] = _better(tb["specific"], _specific_class(seg))

    # ------------------------------------------------------------------ decisions
    def _effective_stage(self):
        """Furthest stage: progress lines of any rank, or the frames of the crash traceback if further
        (an excerpt may start inside the traceback, or the failing rank got further than its last line)."""
        if self._status == "ready":
            return "ready"
        return _max_stage(self._line_stage, self._frame_stage_max)

    def _set_stage(self, stage, line, lineno, events, now):
        if _STAGE_INDEX[stage] <= _STAGE_INDEX[self._line_stage]:
            return
        before = self._effective_stage()
        self._line_stage = stage
        self._stage_event(before, line, lineno, events, now)

    def _fold_frames(self, tb):
        """Stage from the frames of a crash traceback."""
        if tb is not None and tb["frame_stage"]:
            before = self._effective_stage()
            self._frame_stage_max = _max_stage(self._frame_stage_max, tb["frame_stage"])
            return before
        return None

    def _stage_event(self, before, line, lineno, events, now):
        after = self._effective_stage()
        if before is None or after == before:
            return
        if any(s["stage"] == after for s in self._stages):
            return
        entry = {"stage": after, "time": now, "line": None if line is None else _clip(line), "lineno": lineno}
        self._stages.append(entry)
        events.append({"type": "stage", "stage": after, "line": entry["line"], "lineno": lineno, "time": now})

    def _adopt_candidate(self, base, raw, lineno, events, heads_tb):
        """The candidate traceback is part of the crash: its proving line is the error line."""
        tb = self._candidate
        self._candidate = None
        now = self._stages[-1]["time"] if self._stages else 0.0
        before = self._fold_frames(tb)
        self._stage_event(before, tb["line"], tb["lineno"], events, now)
        self._status = "crashed"
        self._error_line = tb["line"]
        self._error_lineno = tb["lineno"]
        self._context = list(tb["context"])
        tb["context"] = None
        if raw is not None:
            self._add_context(raw)
        self._signature = self._decide(base or "traceback", tb)
        self._base_signature = self._signature
        self._root_cause = tb["cause"]
        events.append({"type": "crash", "signature": self._signature, "line": _clip(tb["line"]), "lineno": tb["lineno"]})
        if self._flushed:
            self._refine_left = 0
        elif raw is not None and heads_tb:
            self._crash_tb = _new_tb("crash", raw, lineno, ())
            self._crash_tb["context"] = None
            self._refine_left = _REFINE_MAX_LINES
        else:
            self._crash_tb = tb
            tb["started"] = True
            self._refine_left = _REFINE_MAX_LINES

    def _decide(self, base, tb):
        """Signature from the base class and the root cause that traceback ``tb`` shows."""
        if tb is None:
            return base
        if base in _SPECIFIC_ORDER and tb["specific"] is not None:
            # e.g. "Unexpected error from cudaGetDeviceCount()" continued by "Error 804: forward compatibility ..."
            return _better(base, tb["specific"])
        if base not in _GENERIC:
            return base
        if tb["specific"] is not None:
            return tb["specific"]
        if self._effective_stage() != "start":
            return base
        if tb["import_exc"] or (not tb["exc"] and tb["import_chain"]):
            return "import_error"
        if tb["arg_frames"] or (tb["kind"] == "top" and tb["arg_exc"]):
            return "arg_error"
        return base

    def _add_context(self, line):
        _context_add(self._context, line)

    def _crash(self, signature, raw, lineno, events, heads_tb):
        self._status = "crashed"
        self._base_signature = signature
        self._signature = signature
        self._error_line = raw
        self._error_lineno = lineno
        self._context = list(self._recent)
        if raw is not None:
            self._add_context(raw)
        events.append({"type": "crash", "signature": signature, "line": None if raw is None else _clip(raw),
                       "lineno": lineno})
        if raw is not None and not self._flushed:
            self._crash_tb = _new_tb("crash", raw, lineno, ())
            self._crash_tb["context"] = None
            self._crash_tb["started"] = heads_tb
            # a sigquit is logged before the failing rank's traceback, "terminate called ..." before its what()
            self._crash_tb["awaits"] = signature == "sigquit_child" or "terminate called" in raw
            self._refine_left = _REFINE_MAX_LINES
        else:
            self._refine_left = 0

    def _refine(self, raw, clean, seg, lineno, events, now):
        """After the crash: read the traceback that belongs to it for the root cause (bounded window)."""
        if self._refine_left <= 0 or self._crash_tb is None:
            self._refine_left = 0
            return
        self._refine_left -= 1
        tb = self._crash_tb
        kind = self._structure(tb, seg)
        prefixed = _SGLANG_PREFIX_RE.match(seg) is not None
        if not tb["started"]:
            # e.g. "Received sigquit" was logged first: wait for the failing rank's traceback
            phrase = self._crash_phrase(clean, seg) if kind is None else None
            if kind in ("header", "frame") or (phrase is not None and phrase[1]) \
                    or (kind == "exc" and seg.lstrip().startswith("what():")):
                tb["started"] = True
                self._add_context(raw)
                if kind in ("frame", "exc"):
                    self._tb_line(tb, raw, seg, lineno)
                    self._note_cause(tb, raw, lineno, events)
                return
            stage = self._stage_of(clean)
            if stage is not None and stage != "ready":
                self._set_stage(stage, raw, lineno, events, now)
            return
        if kind is None and prefixed:
            if tb["done"]:
                self._refine_left = 0
            return   # another rank's line in the middle of the traceback
        if tb["done"] and kind not in ("chain", "header"):
            # the exception message may go on for a few lines; a blank line or a long tail ends it
            if not seg.strip():
                tb["gap"] = True
                return
            tb["after"] += 1
            if tb.get("gap") or tb["after"] > _CANDIDATE_TRAILER_MAX:
                self._refine_left = 0
                return
        else:
            tb["gap"] = False
        self._add_context(raw)
        self._tb_line(tb, raw, seg, lineno)
        if tb["done"] and kind is None:
            tb["specific"] = _better(tb["specific"], _specific_class(clean))
        before = self._fold_frames(tb)
        self._stage_event(before, raw, lineno, events, now)
        self._note_cause(tb, raw, lineno, events)

    def _note_cause(self, tb, raw, lineno, events):
        """Refine the signature and the root cause from what the crash traceback has shown so far."""
        if tb["cause"] is not None:
            self._root_cause = tb["cause"]
        new_sig = self._decide(self._base_signature, tb)
        if new_sig != self._signature:
            self._signature = new_sig
            events.append({"type": "signature", "signature": new_sig, "line": _clip(raw), "lineno": lineno})


def _copy_json(value):
    if isinstance(value, dict):
        return dict((k, _copy_json(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_copy_json(v) for v in value]
    return value


class LogFollower:
    """Reads what a (possibly not yet existing, rotated, truncated, or appended) log file gained.

    Stateless between reads (the file is opened, read from the offset and closed each time), so a
    follower restored from ``to_state()`` in a later module run continues exactly. Detects:

    * the file appearing after the follower was created ("appeared": read from byte 0);
    * a new file at the path, e.g. logrotate's create mode or a new run ("replaced": new inode, byte 0);
    * truncation, e.g. logrotate's copytruncate ("truncated": the file is shorter than the offset, or
      the bytes just before the offset changed, which catches a truncated file that already grew again).

    Other OS errors (permissions) propagate to the caller.
    """

    _TAIL = 64  # bytes before the offset remembered to recognise the same file content

    def __init__(self, path, offset=None, state=None):
        self._path = path
        self._reset_reason = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        if state is not None:
            self._offset = int(state["offset"])
            self._ino = state.get("ino")
            self._dev = state.get("dev")
            self._tail = bytes.fromhex(state.get("tail") or "")
            pending = bytes.fromhex(state.get("pending") or "")
            if pending:
                self._decoder.setstate((pending, 0))
            return
        self._ino = None
        self._dev = None
        self._tail = b""
        self._offset = 0
        try:
            handle = open(path, "rb")
        except FileNotFoundError:
            return
        with handle:
            info = os.fstat(handle.fileno())
            self._ino, self._dev = info.st_ino, info.st_dev
            self._offset = info.st_size if offset is None else max(0, int(offset))
            if 0 < self._offset <= info.st_size:
                start = max(0, self._offset - self._TAIL)
                handle.seek(start)
                self._tail = handle.read(self._offset - start)

    @property
    def path(self):
        """The followed file's path."""
        return self._path

    @property
    def offset(self):
        """Byte offset up to which the file has been read (int)."""
        return self._offset

    @property
    def reset_reason(self):
        """None, or "appeared", "replaced" or "truncated" when the last read started over at byte 0."""
        return self._reset_reason

    def to_state(self):
        """JSON-serialisable dict; ``LogFollower(path, state=...)`` continues exactly."""
        pending = self._decoder.getstate()[0]
        return {"offset": self._offset, "ino": self._ino, "dev": self._dev, "tail": self._tail.hex(),
                "pending": pending.hex()}

    def _restart(self, reason, info):
        self._reset_reason = reason
        self._ino, self._dev = info.st_ino, info.st_dev
        self._offset = 0
        self._tail = b""
        self._decoder.reset()

    def read(self, max_bytes=8 * 1024 * 1024):
        """Return the text (UTF-8, errors replaced) appended since the last read; '' if nothing.

        Reads only new bytes (seek), at most ``max_bytes`` per call; a multi-byte character split by
        the read boundary is completed on the next call.
        """
        self._reset_reason = None
        try:
            handle = open(self._path, "rb")
        except FileNotFoundError:
            return ""   # not created yet, or rotated away and not recreated yet
        with handle:
            info = os.fstat(handle.fileno())
            if self._ino is None:
                self._restart("appeared", info)
            elif (info.st_ino, info.st_dev) != (self._ino, self._dev):
                self._restart("replaced", info)
            elif info.st_size < self._offset:
                self._restart("truncated", info)
            elif self._tail:
                handle.seek(self._offset - len(self._tail))
                if handle.read(len(self._tail)) != self._tail:
                    self._restart("truncated", info)
            if info.st_size <= self._offset:
                return ""
            handle.seek(self._offset)
            data = handle.read(max(1, int(max_bytes)))
        self._offset += len(data)
        self._tail = (self._tail + data)[-self._TAIL:]
        return self._decoder.decode(data)


def is_exception_line(line):
    """True for the exception line that ends a Python traceback ("torch.OutOfMemoryError: CUDA out of memory ...",
    "ModuleNotFoundError: No module named 'numpy'"), also behind SGLang's "[time TPn] " prefix."""
    return bool(_EXC_RE.match(_SGLANG_PREFIX_RE.sub("", line, count=1)))


def classify_text(text, crash_patterns=(), ignore_patterns=(), exited=None):
    """Feed a whole text, flush, and if ``exited`` is not None call ``process_exited(exited)``.
    Returns ``result()``."""
    classifier = LogClassifier(crash_patterns=crash_patterns, ignore_patterns=ignore_patterns)
    classifier.feed(text, now=0.0)
    classifier.flush(now=0.0)
    if exited is not None:
        classifier.process_exited(exited, now=0.0)
    return classifier.result()
