# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Generated start-up logs, one per error format the classifier reads (docs/log-classification.md, *Formats*).

Each case is a realistic surrounding log (the real lines of a recorded 0.5.16 start, tests/fixtures/sglang-logs/
gb10-dflash-spec-decoding-ready, cut where the start has reached the case's stage; nothing for failures before SGLang
prints anything), then the format's lines as the program that prints them writes them, then silence (the log alone)
or the process's exit. The expected result is the format's: crashed, the stage the surrounding log reached, the class
the format names, and the format's first line as the first error line.

Further cases put a tool's prefix (docker compose, kubectl --prefix, journalctl -o short, a process manager) before
every line of recorded corpus cases: the expected result is the recorded one, the error line with its prefix.

``write_cases(directory)`` writes them in the corpus layout (``<case>/server.log``, ``<case>/expected.json``), so the
live replay (tests/integration/test_wait_for_sglang_live_replay.py) runs them the way it runs the recorded cases.
"""

from __future__ import annotations

import json
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "fixtures" / "sglang-logs"
SURROUNDING = "gb10-dflash-spec-decoding-ready"
# Line numbers (1-based) of the first line of each stage in SURROUNDING; a case at stage X keeps the lines before the
# first line of the stage after X.
STAGE_STARTS = {"init_distributed": 34, "load_weights": 36, "kv_cache": 155, "cuda_graph": 179, "http_listening": 345,
                "warmup": 346, "ready": 349}
_NEXT = {"start": "init_distributed", "init_distributed": "load_weights", "load_weights": "kv_cache",
         "kv_cache": "cuda_graph", "cuda_graph": "http_listening", "http_listening": "warmup", "warmup": "ready"}

_SITE = "/usr/local/lib/python3.12/dist-packages"
_USAGE = ("usage: launch_server.py [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH]\n"
          "                        [--host HOST] [--port PORT] [--tp-size TP_SIZE]\n"
          "                        [--reasoning-parser {deepseek-r1,qwen3,kimi_k2,glm45}]\n")
_C10_FRAMES = (
    "Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:42 (most recent call first):\n"
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f3c2a1b9e28 in " + _SITE + "/torch/lib/libc10.so)\n"
    "frame #1: c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) + 0x3c4 (0x7f3c2a26a8f4 in "
    + _SITE + "/torch/lib/libc10_cuda.so)\n"
    "frame #2: <unknown function> + 0x1d6a3 (0x7f3c2a2386a3 in " + _SITE + "/torch/lib/libc10_cuda.so)\n")

# name: (stage, signature, lines of the format, index of the first error line within them)
FORMATS = {
    "argparse-unrecognized-argument": ("start", "arg_error", _USAGE
                                       + "launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2\n", 3),
    "lone-importerror-undefined-symbol": ("start", "import_error",
                                          "ImportError: " + _SITE + "/sgl_kernel/common_ops.abi3.so: undefined symbol: "
                                          "_ZN3c104cuda9SetDeviceEa\n", 0),
    "loader-cannot-open-shared-object": ("start", "import_error",
                                         "/usr/bin/python3: error while loading shared libraries: libpython3.12.so.1.0: "
                                         "cannot open shared object file: No such file or directory\n", 0),
    "hub-gated-repo-headless": ("start", "arg_error",
                                "requests.exceptions.HTTPError: 401 Client Error: Unauthorized for url: "
                                "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json\n"
                                "\n"
                                "The above exception was the direct cause of the following exception:\n"
                                "\n"
                                "Traceback (most recent call last):\n"
                                '  File "' + _SITE + '/huggingface_hub/utils/_http.py", line 409, in hf_raise_for_status\n'
                                "    raise _format(GatedRepoError, message, response) from e\n"
                                "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-6745)\n"
                                "\n"
                                "The above exception was the direct cause of the following exception:\n"
                                "\n"
                                "OSError: You are trying to access a gated repo.\n"
                                "Make sure to have access to it at https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct.\n",
                                0),
    "driver-forward-compat-error-804": ("start", "driver_mismatch",
                                        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
                                        "functions before calling NumCudaDevices() that might have already set an error? "
                                        "Error 804: forward compatibility was attempted on non supported HW\n", 0),
    "cuda-devices-busy": ("init_distributed", "cuda_error",
                          "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable\n"
                          "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                          "below might be incorrect.\n", 0),
    "nccl-unhandled-system-error": ("init_distributed", "nccl_error",
                                    "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
                                    "NCCLUtils.cpp:77, unhandled system error (run with NCCL_DEBUG=INFO for details), "
                                    "NCCL version 2.27.3\n", 0),
    "c10-glog-error-in-cuda-library": ("load_weights", "device_error",
                                       "[rank0]:[E1202 03:12:44.118204331 CUDAGuardImpl.h:119] an async error was reported\n"
                                       + _C10_FRAMES, 0),
    "hip-invalid-device-function": ("load_weights", "unsupported_arch", "RuntimeError: HIP error: invalid device function\n"
                                    "HIP kernel errors might be asynchronously reported at some other API call.\n", 0),
    "npu-out-of-memory": ("kv_cache", "cuda_oom", "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB "
                          "(NPU 3; 60.96 GiB total capacity; 57.10 GiB already allocated)\n", 0),
    "flashinfer-cuda-error-per-rank": ("cuda_graph", "unsupported_arch",
                                       "".join("CUDA Error: no kernel image is available for execution on the device (209) "
                                               "/workspace/include/flashinfer/attention/handler.cuh: line 170 at function "
                                               "cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, "
                                               "smem_size)\n" for _rank in range(4)), 0),
    "torch-cuda-error-illegal-address": ("cuda_graph", "device_error",
                                         "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
                                         "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/"
                                         "cuda-runtime-api/group__CUDART__TYPES.html for more information.\n", 0),
    "triton-out-of-resources": ("cuda_graph", "device_error",
                                "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 147456, "
                                "Hardware limit: 101376. Reducing block sizes or `num_stages` may help.\n", 0),
    "inductor-wrapping-triton-no-kernel-image": ("cuda_graph", "unsupported_arch",
                                                 "torch._inductor.exc.InductorError: RuntimeError: Triton Error [CUDA]: "
                                                 "no kernel image is available for execution on the device\n", 0),
    "cpp-terminate-what": ("cuda_graph", "device_error",
                           "terminate called after throwing an instance of 'c10::Error'\n"
                           "  what():  CUDA error: unspecified launch failure\n" + _C10_FRAMES, 0),
    "runpy-no-module": ("start", "import_error", "/usr/bin/python3: No module named sglang.launch_server\n", 0),
    "cuda-error-line-alone": ("kv_cache", "unsupported_arch",
                              "CUDA error: no kernel image is available for execution on the device\n", 0),
    "sglang-scheduler-watchdog-timeout": ("cuda_graph", "traceback",
                                          "[2026-03-29 10:41:07 TP0] Scheduler watchdog timeout "
                                          "(self.watchdog_timeout=300, self.soft=False)\n", 0),
}

# Prefixes of the tools in between, each before every line of recorded cases (name: prefix, cases).
PREFIXES = {
    "compose": ("sglang-server-1  | ", ("gpt-oss-oom-sigquit-before-traceback", "rocm-tp2-multimodal-ready-no-cuda-graph")),
    "kubectl": ("[pod/sglang-7d9f8c6b5-x2lkq/sglang] ",
                ("nccl-unhandled-system-error-unindented-traceback", "bad-model-path-oserror-no-timestamps")),
    "journal": ("Dec 02 03:14:15 gpu-node-07 python3[48211]: ",
                ("rtx3090-oom-attention-workspace-at-graph-stage", "tp2-stuck-in-cuda-graph-capture")),
    "compose-timestamps": ("sglang-server-1  | 2026-12-02T03:14:15.123456789Z ", ("v02-controller-rmsnorm-no-kernel-image",)),
    "pm2": ("0|sglang   | ", ("import-chain-traceback-before-any-log",)),
    # a prefix no rule knows: learned from SGLang's own lines behind it
    "unknown-manager": ("gpu07 sglang/main ", ("ascend-eagle3-draft-graph-capture-device-error",
                                               "gb10-dflash-spec-decoding-ready")),
}


def surrounding(stage):
    """The recorded lines of SURROUNDING before the first line of the stage after ``stage`` (bytes)."""
    if stage == "start":
        return b""
    lines = (CORPUS / SURROUNDING / "server.log").read_bytes().splitlines(True)
    return b"".join(lines[:STAGE_STARTS[_NEXT[stage]] - 1])


def format_case(name):
    """(server.log bytes, expected dict) of one generated format case."""
    stage, signature, text, first = FORMATS[name]
    data = surrounding(stage) + text.encode()
    expected = {"outcome": "crashed", "stage": stage, "signature": signature,
                "first_error_line": text.split("\n")[first], "generated": "format",
                "notes": "generated by tests/sglang_format_cases.py: %s after a recorded start that reached %s" % (name, stage)}
    return data, expected


def prefixed_case(tool, case):
    """(server.log bytes, expected dict) of a recorded case with a tool's prefix before every line."""
    prefix = PREFIXES[tool][0].encode()
    data = b"".join(prefix + line for line in (CORPUS / case / "server.log").read_bytes().splitlines(True))
    expected = json.loads((CORPUS / case / "expected.json").read_text())
    if expected["first_error_line"] is not None:
        expected["first_error_line"] = PREFIXES[tool][0] + expected["first_error_line"]
    expected["generated"] = "prefix"
    return data, expected


def case_names():
    names = ["format-%s" % name for name in FORMATS]
    names += ["prefix-%s--%s" % (tool, case) for tool, (_prefix, cases) in PREFIXES.items() for case in cases]
    return names


def build(name):
    if name.startswith("format-"):
        return format_case(name[len("format-"):])
    tool, case = name[len("prefix-"):].split("--", 1)
    return prefixed_case(tool, case)


def write_cases(directory):
    """Write every generated case as <directory>/<name>/{server.log,expected.json}; returns the names."""
    names = case_names()
    for name in names:
        data, expected = build(name)
        case_dir = Path(directory) / name
        case_dir.mkdir(parents=True, exist_ok=True)
        (case_dir / "server.log").write_bytes(data)
        (case_dir / "expected.json").write_text(json.dumps(expected, indent=1))
    return names
