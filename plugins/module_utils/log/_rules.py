# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The rules of the SGLang start-up log classifier, as data in one place.

Private module_utils of llmops.sglang (runs on target hosts: Python 3.9+, standard library only).

Every rule that reads a line carries its own prefilter *gates*: literal substrings that any line the
rule can match contains (chosen to start with characters that are rare in logs, which is what keeps
the combined search fast). The classifier skips, without reading them, lines that hold no gate of a rule
that could still decide something, so a phrase and its gate are written next to each other and a unit
test checks every rule's pattern against its gates. docs/log-classification.md explains the rules.
"""

from __future__ import annotations

import functools
import re
from collections import namedtuple

from ansible_collections.llmops.sglang.plugins.module_utils.log._formats import FATAL_LINE_GATES, NCCL_TEXT_RE, cuda_class

STAGES = ("start", "init_distributed", "load_weights", "kv_cache", "cuda_graph",
          "http_listening", "warmup", "ready")
SIGNATURES = ("traceback", "sigquit_child", "cuda_oom", "cuda_error", "nccl_error", "import_error",
              "arg_error", "driver_mismatch", "unsupported_arch", "device_error", "warmup_failed",
              "silent_exit", "unit_failed", "process_exited")
STAGE_INDEX = dict((name, index) for index, name in enumerate(STAGES))

# Classes that a later root cause may replace (they say "something failed" but not what).
GENERIC = ("traceback", "sigquit_child")
# Specific root-cause classes, most specific first.
SPECIFIC_ORDER = ("driver_mismatch", "unsupported_arch", "cuda_oom", "nccl_error", "cuda_error", "device_error")

# A stage line: the furthest stage wins, so the rules are listed from the last stage down.
StageRule = namedtuple("StageRule", "stage pattern gates after")
# A decisive phrase. then: "traceback" (the line heads the crash traceback), "cause" (the root cause follows
# on later lines: the failing rank's traceback after a sigquit, what() after a C++ terminate) or "".
# evidence: "" is SGLang's own verdict; "exit" is SGLang reporting that a child died (decisive); "shell" is
# what a shell or the multiprocessing resource tracker prints when a process tree is gone (decisive only
# if SGLang does not log on). exit_group: the regex group holding an exit code (-9/137: silent_exit).
PhraseRule = namedtuple("PhraseRule", "pattern signature then evidence gates exit_group")


def _stage(stage, pattern, gates, after="start"):
    return StageRule(stage, re.compile(pattern), tuple(gates), after)


def _phrase(pattern, signature, gates, then="", evidence="", exit_group=0):
    return PhraseRule(re.compile(pattern), signature, then, evidence, tuple(gates), exit_group)


STAGE_RULES = (
    _stage("ready", r"The server is fired up and ready to roll", ["The server is fired"]),
    _stage("warmup",
           r"\"(?:GET|POST) /(?:get_)?model_info\b|\"POST /(?:generate|encode|v1/embeddings|classify)\b"
           r"|(?:Start|End) of (?:pd |prefill |decode )?(?:disaggregation )?(?:mode )?warmup|Prefill batch[.,] "
           r"|Initialization failed\. warmup error",
           ["GET /", "POST /", "Start of ", "End of ", "zation failed", "Prefill batch"]),
    _stage("http_listening", r"Uvicorn running on", ["Uvicorn running on"]),
    _stage("cuda_graph", r"\bCapture\b.{0,80}?\b(?:graph|Graph|GRAPH)s?\b.{0,40}?\b(?:begin|end|bs|failed)\b|\bCapturing\b",
           ["Captur"]),
    # tqdm's first render of a bar whose title is set inside its loop: SGLang's capture loop sets "Capturing batches
    # (bs=...)" per batch size, so its first line has no title; weight loading always prints its title first
    _stage("cuda_graph", r"^\s*0%\|\s*\| 0/\d+ \[00:00<\?, \?it/s\]", ["<?, ?it/s]"], after="load_weights"),
    _stage("kv_cache", r"Load weight end|KV Cache is allocated|Memory pool end|max_total_num_tokens="
                       r"|Running FlashInfer autotune|FlashInfer autotune completed",
           ["Load weight ", "KV Cache", "Memory pool end", "x_total_num_tokens", "FlashInfer autotune"]),
    _stage("load_weights", r"Load weight begin|Loading (?:safetensors|pt|bin|gguf|npcache)[\w ]{0,20} checkpoint shards"
                           r"|Multi-thread loading shards",
           ["Load weight ", "kpoint shards", "Multi-thread loading"]),
    _stage("init_distributed", r"Init torch distributed (?:begin|ends?)|Init parallel (?:begin|ends?)|Init nccl begin"
                               r"|sglang is using nccl==|\[Gloo\] Rank \d+ is connected| NCCL INFO ",
           ["Init ", "using nccl==", "Gloo] Rank", "NCCL INFO "]),
)

_TS = r"(?:\d{4}-)?\d\d-\d\d[ T]\d\d:\d\d:\d\d"
ARGPARSE_ERROR = r"^(?![\w.]*(?:Error|Exception|Warning):)[\w./-]+(?: -m [\w.]+| [\w.-]+)?: error: \S"
PHRASE_RULES = (
    _phrase(r"\b\w+ hit an exception", "traceback", ["xception"], then="traceback"),
    _phrase(r"Received sigquit from a child proces", "sigquit_child", ["quit from a child"], then="cause"),
    _phrase(r"SIGQUIT received\b", "sigquit_child", ["QUIT"], then="cause"),
    _phrase(r"Initialization failed\. warmup error", "warmup_failed", ["zation failed"], then="traceback"),
    _phrase(r"Initialization failed\.", "traceback", ["zation failed"]),
    _phrase(r"scheduler died during initialization \(exit code: ?(-?\d+)", "process_exited", ["xit code"],
            evidence="exit", exit_group=1),
    _phrase(r"Subprocess \S+ \(pid=\d+\) crashed with exit code (-?\d+)", "process_exited", ["xit code"],
            evidence="exit", exit_group=1),
    _phrase(r"scheduler is dead\b", "process_exited", ["uler is dead"], evidence="exit"),
    _phrase(r"DataParallelController \d+ terminated with (-?\d+)", "process_exited", ["ParallelController"],
            evidence="exit", exit_group=1),
    # raised as an exception ("Exception: Capture cuda graph failed: ..."), so its gates are the exception's
    _phrase(r"[Cc]apture (?:cuda |CUDA |npu |NPU |piecewise |piecewise CUDA )?[Gg]raph failed", "traceback",
            ["xception", "Error"]),
    # these three are raised as exceptions (RuntimeError/ValueError): their gates are the exception's
    _phrase(r"Not enough memory\. Please try to increase --mem-fraction-static", "cuda_oom", ["Error", "xception"]),
    _phrase(r"No supported CUDA architectures found for major versions", "unsupported_arch", ["Error", "xception"]),
    _phrase(r"FlashInfer allreduce fusion requires SM90", "unsupported_arch", ["Error", "xception"]),
    _phrase(r"Watchdog caught collective operation timeout", "nccl_error", ["Watchdog caught"]),
    # uvicorn cannot bind the HTTP port (e.g. [Errno 98] address already in use): the server shuts down
    _phrase(r"ERROR:\s+\[Errno \d+\] error while attempting to bind on address", "traceback", ["Errno"]),
    _phrase(r"^\[" + _TS + r"[^\]]*\] Traceback \(most recent call last\)", "traceback", ["Traceback"], then="traceback"),
    _phrase(r"Exception in (?:ModelTpServer|ModelRpcServer|ControllerSingle|ControllerMulti|run_tp_server"
            r"|run_scheduler_process|DetokenizerManager|TokenizerManager)\b", "traceback", ["xception"], then="traceback"),
    _phrase(r"^Fatal Python error: ", "traceback", ["Fatal Python error"]),
    _phrase(r"terminate called after throwing an instance of", "traceback", ["wing an instance"], then="cause"),
    # argparse.ArgumentParser.error(): "usage: ..." (often many indented lines), then "prog: error: message" at
    # column 0 and exit status 2 (prog: the script, "python -m module", or a sub-command; never an exception's class).
    # Read after its usage line (USAGE_GATE), and by the gates of argparse's most frequent messages without it.
    _phrase(ARGPARSE_ERROR, "arg_error", ["unrecognized arguments", "uired: ", "uous option", "xpected one argument",
                                          "xpected at "], evidence="exit"),
    # SGLang's own messages logged right before it ends its process tree (mined from every supported release by
    # tests/unit/plugins/module_utils/test_sglang_release_messages.py)
    _phrase(r"Received SIGQUIT from scheduler process", "sigquit_child", ["QUIT from scheduler"], then="cause"),
    # the scheduler's watchdog ends the process tree unless it is the soft one (0.5.x: "..., self.soft=True)")
    _phrase(r"[Ww]atchdog timeout \(self\.watchdog_timeout=[^,)]*(?:, self\.soft=(?!True)[^)]*)?\)", "traceback",
            ["watchdog_timeout="]),
    _phrase(r"\[ZBAL\] zbal (?:lazy )?init failed", "device_error", ["zbal"]),
    _phrase(r"Found rank divergence for \d+ event", "traceback", ["Found rank divergence"]),
    _phrase(r"cluster readiness barrier failed; exiting without serving", "traceback", ["weight_cache] cluster readiness"]),
    _phrase(r"Weight cache daemon \(pid=\d+\) died while this engine holds", "process_exited", ["Weight cache daemon"],
            evidence="exit"),
    _phrase(r"PPConsensusStore background thread crashed", "traceback", ["ConsensusStore background"]),
    _phrase(r"resource_tracker: There appear to be \d+ leaked", "silent_exit", ["There appear to be"], evidence="shell"),
    _phrase(r"^(?:Killed|\u5df2\u6740\u6b7b)\s*$", "silent_exit", ["Killed", "\u5df2\u6740\u6b7b"],   # zh_CN "Killed"
            evidence="shell"),
    _phrase(r"^(?:Segmentation fault|Aborted|Bus error|Illegal instruction|Floating point exception)(?: \(core dumped\))?\s*$",
            "process_exited", ["Segmentation fault", "Abort", "Bus error", "Illegal instruction", "xception"],
            evidence="shell"),
)

# Gates of the traceback structure, of exception lines and of the fatal-line formats (log/_formats).
# Exception classes whose names end otherwise: Triton's OutOfResources, torch._dynamo's BackendCompilerFailed.
STRUCTURE_GATES = ("Error", "xception", "Abort", "Traceback", "File \"", "utOfResources", "CompilerFailed") + FATAL_LINE_GATES
# argparse's usage line: the lines after it are read in full up to the first one at column 0 (its error line).
USAGE_GATE = "\nusage: "

# Root-cause classes read from exception and message lines, most specific first. cuda_error means "CUDA
# is not usable at all" (no device, driver/runtime not initialised); runtime/operator failures of any
# accelerator (CUDA, ROCm/HIP, Ascend NPU, XPU) are device_error.
CLASS_RULES = (
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
        r"|is not compatible with the current PyTorch installation|(?<!limit is )not supported (?:in|on) this (?:architecture|GPU|device)"
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
        r"|Watchdog caught collective operation timeout|c10::DistBackendError|DistStoreError|NCCL WARN "
        r"|" + NCCL_TEXT_RE.pattern)),
    ("cuda_error", re.compile(
        r"no CUDA-capable device is detected|CUDA-capable device\(s\) (?:is|are)|cudaErrorNoDevice|cudaErrorDevicesUnavailable"
        r"|No CUDA GPUs are available|Unexpected error from cudaGetDeviceCount|CUDA driver initialization failed"
        r"|CUDA_ERROR_NOT_INITIALIZED|CUDA_ERROR_NO_DEVICE|Found no NVIDIA driver|Torch not compiled with CUDA enabled"
        r"|CUDA initialization: |cudaErrorInitializationError|system not yet initialized|invalid device ordinal")),
    ("device_error", re.compile(
        r"CUDA error|cudaError\w+|CUDA_ERROR_\w+|CUBLAS_STATUS_\w+|CUDNN_STATUS_\w+|cuDNN error|Triton Error \[(?:CUDA|HIP)\]"
        r"|AcceleratorError|CUDA driver error|device-side assert|illegal memory access|misaligned address"
        r"|HIP error|hipError\w+|ROCm error|NPU function error|NPU error|ACL error|aclnn\w* failed"
        r"|PTA call acl api failed|\bE[A-Z]?\d{4}: |\bERR\d{5}\b|XPU error|MUSA error"
        # Triton: a kernel whose launch needs more shared memory or registers than this GPU has
        r"|OutOfResources: out of resource|out of resource: shared memory")),
)

# Stage shown by a frame of a crash traceback: (stage, function-name regex, file-path regex or None).
# warmup: the warmup request itself, and the scheduler's batch loop, which only runs requests, and before
# the ready line the only request is the warmup request (0.1/0.2: exposed_step/forward_step/forward_fill_batch).
FRAME_STAGE_RULES = (
    ("warmup", re.compile(r"^(?:_wait_and_warmup|_execute_server_warmup|event_loop_\w+|exposed_step|forward_step"
                          r"|forward_fill_batch|run_batch)$"), None),
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
_FRAME_SKIP_RE = re.compile(r"server_args\.py|launch_server\.py|/arg_groups/|/configs/")

# SGLang's own log prefix: "[2025-08-25 22:39:27] ", "[2025-08-25 22:39:27 TP3] ", "[... DP1 TP0 EP1] ",
# 0.2.x "[gpu=0] " / "[gpu_id=0] ", "[2025-08-25 22:39:27,123] " and the year-less "[12-16 14:27:08] ".
SGLANG_PREFIX_RE = re.compile(r"^\[(?:" + _TS + r"[^\]]*|gpu(?:_id)?=\d+[^\]]*)\] ")
# The args dump holds user values and field names such as custom_sigquit_handler: never evidence.
ARGS_MARKERS = ("server_args=", "ServerArgs(", "port_args=PortArgs(")
# After the ready line only a real exception counts as a (runtime) crash; "SIGQUIT received" alone is also
# what a normal SIGTERM shutdown prints (0.5.16: "Subprocess detokenizer ... crashed with exit code -15").
POST_READY_RE = re.compile(r"hit an exception|Received sigquit from a child")

# One ANSI rule for every reader of SGLang logs (colours, cursor movement, charset selection).
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]")


def strip_ansi(text):
    """The text without ANSI escape sequences."""
    if "\x1b" in text:
        return ANSI_RE.sub("", text)
    return text


def last_segment(text):
    """What a terminal shows of a line with carriage returns: its last non-empty segment."""
    if "\r" not in text:
        return text
    for part in reversed(text.split("\r")):
        if part.strip():
            return part
    return ""


def display_line(line):
    """What a terminal shows of a raw log line: ANSI removed, last carriage-return segment (None stays None)."""
    if line is None:
        return None
    return last_segment(strip_ansi(line))


def stage_index(stage):
    return STAGE_INDEX[stage]


def max_stage(a, b):
    """The further of two stages (None allowed)."""
    if a is None:
        return b
    if b is None:
        return a
    return a if STAGE_INDEX[a] >= STAGE_INDEX[b] else b


def specific_class(text):
    """The most specific root-cause class the text names (CLASS_RULES, and the CUDA/HIP runtime error it names by
    code, name or text: log/_formats.cuda_class), else None."""
    found = None
    for name, regex in CLASS_RULES:
        if regex.search(text):
            found = name
            break
    if "rror" in text or "RROR" in text or "failure" in text:
        found = better(found, cuda_class(text))
    return found


def better(current, new):
    """The more specific of two specific classes (None allowed)."""
    if current is None:
        return new
    if new is None:
        return current
    return new if SPECIFIC_ORDER.index(new) < SPECIFIC_ORDER.index(current) else current


@functools.lru_cache(maxsize=2048)   # the same frames repeat in every rank's traceback
def frame_stage(path, func, calls_only=False):
    """Start-up stage shown by one SGLang frame (file path and function or called name), else None."""
    if "sglang" not in path.lower() or _FRAME_SKIP_RE.search(path):
        return None
    for stage, func_re, path_re in FRAME_STAGE_RULES:
        if func and func_re.search(func):
            return stage
        if not calls_only and path_re is not None and path_re.search(path):
            return stage
    return None


def _has_gate(text, gates):
    if not gates:
        return True
    for gate in gates:
        if gate in text:
            return True
    return False


def stage_of(clean, reached):
    """The highest stage after ``reached`` that this line shows, else None."""
    for rule in STAGE_RULES:
        if STAGE_INDEX[rule.stage] <= STAGE_INDEX[reached]:
            return None
        if STAGE_INDEX[rule.after] <= STAGE_INDEX[reached] and _has_gate(clean, rule.gates) and rule.pattern.search(clean):
            return rule.stage
    return None


def phrase_of(clean, seg):
    """(PhraseRule, signature) of the first decisive phrase in a line, else None. A phrase is read on the
    last carriage-return segment first, then on the whole line (a marker glued after a progress bar)."""
    gated = _PHRASE_GATE_RE.search(clean) is not None   # one search before one per rule
    for rule in PHRASE_RULES:
        if rule.gates and not (gated and _has_gate(clean, rule.gates)):
            continue   # the gate is part of the rule: a line without it cannot match
        match = rule.pattern.search(seg)
        if match is None and seg is not clean:
            match = rule.pattern.search(clean)
        if match is not None:
            signature = rule.signature
            if rule.exit_group and match.group(rule.exit_group) is not None:
                if int(match.group(rule.exit_group)) in (-9, 137):
                    signature = "silent_exit"   # SIGKILL: killed from outside, usually the OOM killer
            return rule, signature
    return None


def literal_alternation(words):
    """Regex source matching any of ``words``, factored into a trie (``E(?:rror|xit)`` rather than
    ``Error|Exit``): Python's ``re`` tries each alternative at each position, so sharing prefixes makes the
    gate search on a backlog about a quarter faster (benchmarks/classifier_throughput.py). Same language."""
    trie = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _trie_source(trie)


def _trie_source(node):
    branches = [re.escape(char) + _trie_source(child) for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    source = branches[0] if len(branches) == 1 else "(?:%s)" % "|".join(branches)
    return "(?:%s)?" % source if "" in node else source


_PHRASE_GATE_RE = re.compile(literal_alternation(g for rule in PHRASE_RULES for g in rule.gates))
# The argparse rule, tried on the line after a usage line whatever its message (its gates name only the frequent ones).
ARGPARSE_RULE = next(rule for rule in PHRASE_RULES if rule.pattern.pattern == ARGPARSE_ERROR)


def gates_after(stage):
    """Prefilter gates while the furthest stage is ``stage`` and nothing is open: every crash phrase, the
    traceback structure, and the stage lines not reached yet."""
    gates = []
    for rule in PHRASE_RULES:
        gates.extend(rule.gates)
    gates.extend(STRUCTURE_GATES)
    gates.append(USAGE_GATE)
    for rule in STAGE_RULES:
        if STAGE_INDEX[rule.stage] > STAGE_INDEX[stage]:
            gates.extend(rule.gates)
    return tuple(sorted(set(gates)))
