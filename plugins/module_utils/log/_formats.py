# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The error formats of the programs an SGLang start runs on, as data, each from where it comes from.

Private module_utils of llmops.sglang (runs on target hosts: Python 3.9+, standard library only).

* CUDA: the ``cudaError_t`` table (code, name, ``cudaGetErrorString`` text) of the CUDA 12.9 runtime library
  (libcudart.so.12 from the ``nvidia-cuda-runtime-cu12`` wheel, read with ctypes; see docs/log-classification.md),
  which torch prints as ``CUDA error: <text>``, FlashInfer as ``CUDA Error: <text> (<code>) <file>: line <n> ...``,
  sgl-kernel and others by the ``cudaError*`` name; the driver API's ``CUDA_ERROR_*`` names and HIP's ``hip*``
  spellings map onto the same classes.
* NCCL: the ``ncclResult_t`` names and ``ncclGetErrorString`` texts (NCCL's src/init.cc), and its
  ``host:pid:tid [dev] file:line NCCL WARN <message>`` debug lines (src/debug.cc).
* Lines that only come out of a process that is failing, each a *fatal line* (``FATAL_LINE_RULES``): the dynamic
  loader's errors, c10/glog ``E``/``F`` lines, FlashInfer's ``CUDA Error:`` line.

Python's own traceback and exception-line formats are read by log/_traceback.
"""

from __future__ import annotations

import re
from collections import namedtuple

# (code, cudaGetErrorName, cudaGetErrorString) for every cudaError_t of the CUDA 12.9 runtime (libcudart.so.12.9.79).
CUDA_RUNTIME_ERRORS = (
    (1, "cudaErrorInvalidValue", "invalid argument"),
    (2, "cudaErrorMemoryAllocation", "out of memory"),
    (3, "cudaErrorInitializationError", "initialization error"),
    (4, "cudaErrorCudartUnloading", "driver shutting down"),
    (5, "cudaErrorProfilerDisabled", "profiler disabled while using external profiling tool"),
    (6, "cudaErrorProfilerNotInitialized", "profiler not initialized: call cudaProfilerInitialize()"),
    (7, "cudaErrorProfilerAlreadyStarted", "profiler already started"),
    (8, "cudaErrorProfilerAlreadyStopped", "profiler already stopped"),
    (9, "cudaErrorInvalidConfiguration", "invalid configuration argument"),
    (12, "cudaErrorInvalidPitchValue", "invalid pitch argument"),
    (13, "cudaErrorInvalidSymbol", "invalid device symbol"),
    (16, "cudaErrorInvalidHostPointer", "invalid host pointer"),
    (17, "cudaErrorInvalidDevicePointer", "invalid device pointer"),
    (18, "cudaErrorInvalidTexture", "invalid texture reference"),
    (19, "cudaErrorInvalidTextureBinding", "texture is not bound to a pointer"),
    (20, "cudaErrorInvalidChannelDescriptor", "invalid channel descriptor"),
    (21, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"),
    (22, "cudaErrorAddressOfConstant", "invalid address of constant"),
    (23, "cudaErrorTextureFetchFailed", "fetch from texture failed"),
    (24, "cudaErrorTextureNotBound", "cannot fetch from a texture that is not bound"),
    (25, "cudaErrorSynchronizationError", "incorrect use of __syncthreads()"),
    (26, "cudaErrorInvalidFilterSetting", "linear filtering not supported for non-float type"),
    (27, "cudaErrorInvalidNormSetting", "read as normalized float not supported for data type"),
    (28, "cudaErrorMixedDeviceExecution", "device emulation mode and device execution mode cannot be mixed"),
    (31, "cudaErrorNotYetImplemented", "feature not yet implemented"),
    (32, "cudaErrorMemoryValueTooLarge", "memory size or pointer value too large to fit in 32 bit"),
    (34, "cudaErrorStubLibrary", "CUDA driver is a stub library"),
    (35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"),
    (36, "cudaErrorCallRequiresNewerDriver", "API call is not supported in the installed CUDA driver"),
    (37, "cudaErrorInvalidSurface", "invalid surface reference"),
    (43, "cudaErrorDuplicateVariableName", "duplicate global variable looked up by string name"),
    (44, "cudaErrorDuplicateTextureName", "duplicate texture looked up by string name"),
    (45, "cudaErrorDuplicateSurfaceName", "duplicate surface looked up by string name"),
    (46, "cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable"),
    (49, "cudaErrorIncompatibleDriverContext", "incompatible driver context"),
    (52, "cudaErrorMissingConfiguration", "__global__ function call is not configured"),
    (53, "cudaErrorPriorLaunchFailure", "unspecified launch failure in prior launch"),
    (65, "cudaErrorLaunchMaxDepthExceeded", "launch would exceed maximum depth of nested launches"),
    (66, "cudaErrorLaunchFileScopedTex", "launch failed because kernel uses unsupported, file-scoped textures (texture objects are supported)"),
    (67, "cudaErrorLaunchFileScopedSurf", "launch failed because kernel uses unsupported, file-scoped surfaces (surface objects are supported)"),
    (68, "cudaErrorSyncDepthExceeded", "cudaDeviceSynchronize failed because caller's grid depth exceeds cudaLimitDevRuntimeSyncDepth"),
    (69, "cudaErrorLaunchPendingCountExceeded", "launch failed because launch would exceed cudaLimitDevRuntimePendingLaunchCount"),
    (98, "cudaErrorInvalidDeviceFunction", "invalid device function"),
    (100, "cudaErrorNoDevice", "no CUDA-capable device is detected"),
    (101, "cudaErrorInvalidDevice", "invalid device ordinal"),
    (102, "cudaErrorDeviceNotLicensed", "device doesn't have valid Grid license"),
    (103, "cudaErrorSoftwareValidityNotEstablished", "integrity checks failed"),
    (127, "cudaErrorStartupFailure", "startup failure in cuda runtime"),
    (200, "cudaErrorInvalidKernelImage", "device kernel image is invalid"),
    (201, "cudaErrorDeviceUninitialized", "invalid device context"),
    (205, "cudaErrorMapBufferObjectFailed", "mapping of buffer object failed"),
    (206, "cudaErrorUnmapBufferObjectFailed", "unmapping of buffer object failed"),
    (207, "cudaErrorArrayIsMapped", "array is mapped"),
    (208, "cudaErrorAlreadyMapped", "resource already mapped"),
    (209, "cudaErrorNoKernelImageForDevice", "no kernel image is available for execution on the device"),
    (210, "cudaErrorAlreadyAcquired", "resource already acquired"),
    (211, "cudaErrorNotMapped", "resource not mapped"),
    (212, "cudaErrorNotMappedAsArray", "resource not mapped as array"),
    (213, "cudaErrorNotMappedAsPointer", "resource not mapped as pointer"),
    (214, "cudaErrorECCUncorrectable", "uncorrectable ECC error encountered"),
    (215, "cudaErrorUnsupportedLimit", "limit is not supported on this architecture"),
    (216, "cudaErrorDeviceAlreadyInUse", "exclusive-thread device already in use by a different thread"),
    (217, "cudaErrorPeerAccessUnsupported", "peer access is not supported between these two devices"),
    (218, "cudaErrorInvalidPtx", "a PTX JIT compilation failed"),
    (219, "cudaErrorInvalidGraphicsContext", "invalid OpenGL or DirectX context"),
    (220, "cudaErrorNvlinkUncorrectable", "uncorrectable NVLink error detected during the execution"),
    (221, "cudaErrorJitCompilerNotFound", "PTX JIT compiler library not found"),
    (222, "cudaErrorUnsupportedPtxVersion", "the provided PTX was compiled with an unsupported toolchain."),
    (223, "cudaErrorJitCompilationDisabled", "PTX JIT compilation was disabled"),
    (224, "cudaErrorUnsupportedExecAffinity", "the provided execution affinity is not supported"),
    (225, "cudaErrorUnsupportedDevSideSync", "the provided PTX contains unsupported call to cudaDeviceSynchronize"),
    (226, "cudaErrorContained", "Invalid access of peer GPU memory over nvlink or a hardware error"),
    (300, "cudaErrorInvalidSource", "device kernel image is invalid"),
    (301, "cudaErrorFileNotFound", "file not found"),
    (302, "cudaErrorSharedObjectSymbolNotFound", "shared object symbol not found"),
    (303, "cudaErrorSharedObjectInitFailed", "shared object initialization failed"),
    (304, "cudaErrorOperatingSystem", "OS call failed or operation not supported on this OS"),
    (400, "cudaErrorInvalidResourceHandle", "invalid resource handle"),
    (401, "cudaErrorIllegalState", "the operation cannot be performed in the present state"),
    (402, "cudaErrorLossyQuery", "attempted introspection would be semantically lossy"),
    (500, "cudaErrorSymbolNotFound", "named symbol not found"),
    (600, "cudaErrorNotReady", "device not ready"),
    (700, "cudaErrorIllegalAddress", "an illegal memory access was encountered"),
    (701, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"),
    (702, "cudaErrorLaunchTimeout", "the launch timed out and was terminated"),
    (703, "cudaErrorLaunchIncompatibleTexturing", "launch uses incompatible texturing mode"),
    (704, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"),
    (705, "cudaErrorPeerAccessNotEnabled", "peer access has not been enabled"),
    (708, "cudaErrorSetOnActiveProcess", "cannot set while device is active in this process"),
    (709, "cudaErrorContextIsDestroyed", "context is destroyed"),
    (710, "cudaErrorAssert", "device-side assert triggered"),
    (711, "cudaErrorTooManyPeers", "peer mapping resources exhausted"),
    (712, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped"),
    (713, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region"),
    (714, "cudaErrorHardwareStackError", "hardware stack error"),
    (715, "cudaErrorIllegalInstruction", "an illegal instruction was encountered"),
    (716, "cudaErrorMisalignedAddress", "misaligned address"),
    (717, "cudaErrorInvalidAddressSpace", "operation not supported on global/shared address space"),
    (718, "cudaErrorInvalidPc", "invalid program counter"),
    (719, "cudaErrorLaunchFailure", "unspecified launch failure"),
    (720, "cudaErrorCooperativeLaunchTooLarge", "too many blocks in cooperative launch"),
    (721, "cudaErrorTensorMemoryLeak", "tensor memory not completely freed"),
    (800, "cudaErrorNotPermitted", "operation not permitted"),
    (801, "cudaErrorNotSupported", "operation not supported"),
    (802, "cudaErrorSystemNotReady", "system not yet initialized"),
    (803, "cudaErrorSystemDriverMismatch", "system has unsupported display driver / cuda driver combination"),
    (804, "cudaErrorCompatNotSupportedOnDevice", "forward compatibility was attempted on non supported HW"),
    (805, "cudaErrorMpsConnectionFailed", "MPS client failed to connect to the MPS control daemon or the MPS server"),
    (806, "cudaErrorMpsRpcFailure", "the remote procedural call between the MPS server and the MPS client failed"),
    (807, "cudaErrorMpsServerNotReady", "MPS server is not ready to accept new MPS client requests"),
    (808, "cudaErrorMpsMaxClientsReached", "the hardware resources required to create MPS client have been exhausted"),
    (809, "cudaErrorMpsMaxConnectionsReached", "the hardware resources required to support device connections have been exhausted"),
    (810, "cudaErrorMpsClientTerminated", "the MPS client has been terminated by the server"),
    (811, "cudaErrorCdpNotSupported", "is using CUDA Dynamic Parallelism, but the current configuration, like MPS, does not support it"),
    (812, "cudaErrorCdpVersionMismatch", "unsupported interaction between different versions of CUDA Dynamic Parallelism"),
    (900, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"),
    (901, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"),
    (902, "cudaErrorStreamCaptureMerge", "operation would result in a merge of separate capture sequences"),
    (903, "cudaErrorStreamCaptureUnmatched", "capture was not ended in the same stream as it began"),
    (904, "cudaErrorStreamCaptureUnjoined", "capturing stream has unjoined work"),
    (905, "cudaErrorStreamCaptureIsolation", "dependency created on uncaptured work in another stream"),
    (906, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream"),
    (907, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream"),
    (908, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread"),
    (909, "cudaErrorTimeout", "wait operation timed out"),
    (910, "cudaErrorGraphExecUpdateFailure", "the graph update was not performed because it included changes which violated "
                                             "constraints specific to instantiated graph update"),
    (911, "cudaErrorExternalDevice", "an async error has occured in external entity outside of CUDA"),
    (912, "cudaErrorInvalidClusterSize", "a kernel launch error has occurred due to cluster misconfiguration"),
    (913, "cudaErrorFunctionNotLoaded", "the function handle is not loaded when calling an API that requires a loaded function"),
    (914, "cudaErrorInvalidResourceType", "one or more resources passed in are not valid resource types for the operation"),
    (915, "cudaErrorInvalidResourceConfiguration", "one or more resources are insufficient or non-applicable for the operation"),
    (999, "cudaErrorUnknown", "unknown error"),
)

# The class of each cudaError_t that is not a plain runtime/operator failure (device_error). cuda_error: CUDA is not
# usable at all (no device, not initialised, busy, MPS down); driver_mismatch: driver and runtime/PTX do not fit.
CUDA_CODE_CLASSES = {
    "cuda_oom": (2,),
    "unsupported_arch": (98, 200, 209, 300),
    "driver_mismatch": (35, 36, 222, 803, 804),
    "cuda_error": (3, 34, 46, 100, 101, 102, 127, 802, 805, 806, 807, 808, 809, 810),
}
# The driver API's CUresult names of the same failures (cuGetErrorName), for "CUDA_ERROR_*" spellings.
CUDA_DRIVER_NAME_CLASSES = {
    "CUDA_ERROR_OUT_OF_MEMORY": "cuda_oom",
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "unsupported_arch", "CUDA_ERROR_INVALID_IMAGE": "unsupported_arch",
    "CUDA_ERROR_INVALID_SOURCE": "unsupported_arch",
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": "driver_mismatch", "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": "driver_mismatch",
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": "driver_mismatch",
    "CUDA_ERROR_NO_DEVICE": "cuda_error", "CUDA_ERROR_NOT_INITIALIZED": "cuda_error", "CUDA_ERROR_INVALID_DEVICE": "cuda_error",
    "CUDA_ERROR_SYSTEM_NOT_READY": "cuda_error", "CUDA_ERROR_STUB_LIBRARY": "cuda_error",
    "CUDA_ERROR_DEVICE_UNAVAILABLE": "cuda_error", "CUDA_ERROR_DEVICE_NOT_LICENSED": "cuda_error",
}

# (code, name, ncclGetErrorString) of every ncclResult_t but ncclSuccess (older releases print the texts without
# their "(run with NCCL_DEBUG=... for details)" hint).
NCCL_RESULTS = (
    (1, "ncclUnhandledCudaError", "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"),
    (2, "ncclSystemError", "unhandled system error (run with NCCL_DEBUG=INFO for details)"),
    (3, "ncclInternalError", "internal error - please report this issue to the NCCL developers"),
    (4, "ncclInvalidArgument", "invalid argument (run with NCCL_DEBUG=WARN for details)"),
    (5, "ncclInvalidUsage", "invalid usage (run with NCCL_DEBUG=WARN for details)"),
    (6, "ncclRemoteError", "remote process exited or there was a network error"),
    (7, "ncclInProgress", "NCCL operation in progress"),
)

_CUDA_CLASS_BY_CODE = dict((code, name) for name, codes in CUDA_CODE_CLASSES.items() for code in codes)
_CUDA_CODE_BY_NAME = dict((name, code) for code, name, _text in CUDA_RUNTIME_ERRORS)
_CUDA_CODES_BY_TEXT = {}
for _code, _name, _text in CUDA_RUNTIME_ERRORS:
    _CUDA_CODES_BY_TEXT.setdefault(_text.rstrip("."), _code)   # 200 and 300 share their text (same class)

# Where a CUDA/HIP error text is printed: torch's "CUDA error: <text>", FlashInfer's "CUDA Error: <text> (<code>)",
# the driver API's "CUDA driver error: <text>", Triton's "Triton Error [CUDA]: <text>", HIP's "HIP error: <text>",
# torch's cudaGetDeviceCount warning "Error <code>: <text>", NCCL's "Cuda failure '<text>'" / "Cuda failure <code> '<text>'".
_CUDA_TEXT_RE = re.compile(
    r"(?:CUDA (?:error|Error|ERROR)|CUDA driver error|Triton Error \[(?:CUDA|HIP)\]|HIP error|hipError\w*|Error (\d+)"
    r"|Cuda failure(?: (\d+))?)[:]? ['\"]?(" + "|".join(sorted((re.escape(t) for t in _CUDA_CODES_BY_TEXT), key=len, reverse=True))
    + r")")
_CUDA_NAME_RE = re.compile(r"\b(cudaError[A-Z]\w+|CUDA_ERROR_[A-Z_]+)\b")
_FLASHINFER_CODE_RE = re.compile(r"CUDA Error: .*? \((\d+)\)")
# NCCL's own texts; of the ones without their hint only those that name NCCL's failure ("invalid argument" alone is
# also CUDA's cudaErrorInvalidValue).
NCCL_TEXT_RE = re.compile("|".join(
    [re.escape(text) for _code, _name, text in NCCL_RESULTS[:-1]]
    + [re.escape(text.split(" (run with", maxsplit=1)[0]) for _code, _name, text in NCCL_RESULTS if text.startswith("unhandled ")]))


def cuda_class(text):
    """The class (cuda_oom, unsupported_arch, driver_mismatch, cuda_error, device_error) of the CUDA/HIP runtime
    error a line names by code, by name or by its cudaGetErrorString text after one of the prefixes that print it;
    None when it names none."""
    code = None
    match = _FLASHINFER_CODE_RE.search(text)
    if match is not None:
        code = int(match.group(1))
    if code is None:
        match = _CUDA_TEXT_RE.search(text)
        if match is not None:
            number = match.group(1) or match.group(2)
            code = int(number) if number and int(number) in _CUDA_CLASS_BY_CODE else _CUDA_CODES_BY_TEXT[match.group(3).rstrip(".")]
    if code is None:
        match = _CUDA_NAME_RE.search(text)
        if match is None:
            return None
        name = match.group(1)
        if name in CUDA_DRIVER_NAME_CLASSES:
            return CUDA_DRIVER_NAME_CLASSES[name]
        code = _CUDA_CODE_BY_NAME.get(name)
    return _CUDA_CLASS_BY_CODE.get(code, "device_error")


# A fatal line: printed only by a process that is failing. It is pending like a candidate traceback: the crash at the
# process's exit, at the end of input, or after a quiet log, unless SGLang logs on (argparse's error, after which the
# program exits at once, is one of the decisive phrases of _sglang_rules). Its class comes from the root-cause rules
# over its text (a loader error is import_error, a CUDA text names its cudaError_t's class).
FatalLineRule = namedtuple("FatalLineRule", "name pattern gates")

# The c10/glog line of an ERROR or FATAL message: "[E1224 01:14:28.932556327 file.cpp:444] msg" (torch's c10
# logging), "E1224 01:14:28.932556 12345 file.cc:444] msg" (glog, abseil), also glued after a progress bar.
_GLOG = r"\[?[EF][01]\d[0-3]\d [\d:.]+(?: +\d+)? [^\s\]]+:\d+\] "
GLOG_ERROR_RE = re.compile(r"(?:^|it/s\]|s/it\])(?:\[(?:rank|default)\d+\]:)?" + _GLOG)
# NCCL's debug line of a warning: "host:pid:tid [dev] file:line NCCL WARN message" (src/debug.cc). NCCL warns and may
# retry, so it names the cause of a failure other lines or the exit prove, and is never proved by a quiet log alone.
NCCL_WARN_RE = re.compile(r"^\S+:\d+:\d+ \[\d+\] (?:\S+:\d+ )?NCCL WARN ")
CAUSE_ONLY = ("nccl_warn",)

FATAL_LINE_RULES = (
    # the dynamic loader, at exec or lazy binding: the process cannot run
    FatalLineRule("loader", re.compile(r"error while loading shared libraries: |: symbol lookup error: "
                                       r"|: version [`'](?:GLIBC|GLIBCXX|CXXABI)_[\d.]+' not found \(required by "),
                  ("while loading shared", "undefined symbol", "GLIBC", "CXXABI")),
    # gated by torch's bracketed form (the unbracketed glog/abseil one is read where a line is read anyway: inside a
    # candidate or a crash's traceback); an F line aborts the process, whose end then decides
    FatalLineRule("glog", GLOG_ERROR_RE, ("E0", "E1")),
    # FlashInfer's FLASHINFER_CUDA_CALL: "CUDA Error: <cudaGetErrorString> (<code>) <file>: line <n> at function <call>"
    FatalLineRule("flashinfer_cuda", re.compile(r"^CUDA Error: .+ \(\d+\) "), ("CUDA Error: ",)),
    # a CUDA/HIP runtime error printed on its own line (a C++ extension's check, torch's message without its class)
    FatalLineRule("cuda_error_line", re.compile(r"^(?:CUDA|HIP) (?:error|Error|ERROR)(?: \d+)?: \S"),
                  ("CUDA error", "CUDA ERROR", "IP error", "IP Error")),
    # the interpreter's own -m launcher: "python3: No module named sglang.launch_server", "python3: Error while finding
    # module specification for 'sglang.launch_server' (ModuleNotFoundError: No module named 'sglang')"
    FatalLineRule("runpy", re.compile(r"^\S*python[\d.]*: (?:No module named |Error while finding module specification )"),
                  ("No module named sglang", "Error while finding")),   # not SGLang's "No module named 'x'" warnings
    FatalLineRule("nccl_warn", NCCL_WARN_RE, ("NCCL WARN",)),
)
# Gates start with characters that are rare in logs and that other gates start with already (not "e", ":", "|" or
# "["): the prefilter's combined search is only as fast as the first characters of its gates are few and rare
# (docs/log-classification.md, Throughput).
FATAL_LINE_GATES = tuple(gate for rule in FATAL_LINE_RULES for gate in rule.gates)

# The lines of a C++ exception report that follow a glog/c10 error line: c10::Error's "Exception raised from F at
# file:line (most recent call first):" and its "frame #N: ..." backtrace.
CPP_TRACE_RE = re.compile(r"^(?:Exception raised from \S+ at \S+ \(most recent call first\):|frame #\d+: )")
# An accelerator library in a C++ backtrace: an error raised there is the accelerator's runtime or operator failing.
ACCELERATOR_LIBRARY_RE = re.compile(r"lib(?:cuda|cudart|c10_cuda|torch_cuda|nvrtc|cublas\w*|cudnn\w*|amdhip64|hiprtc|rocblas"
                                    r"|torch_npu|op_plugin\w*|ascendcl|atb\w*|hccl|acl\w*)[.\w]*\.so|/op_plugin/|atb::")


_ANY_FATAL_RE = re.compile("|".join("(?:%s)" % rule.pattern.pattern for rule in FATAL_LINE_RULES))


def fatal_line(seg):
    """The FatalLineRule a line (ANSI removed, prefix stripped, last carriage-return segment) matches, else None. The
    gates are the prefilter's: a line is tested here whenever it is read (its gates only decide which lines are)."""
    if _ANY_FATAL_RE.search(seg) is None:   # one search for the common case, a line of no such format
        return None
    for rule in FATAL_LINE_RULES:
        if rule.pattern.search(seg):
            return rule
    return None
