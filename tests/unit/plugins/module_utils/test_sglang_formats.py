# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The error formats the classifier reads at their source: the CUDA runtime's cudaError_t table in every spelling that
prints it, NCCL's ncclResult_t texts, the fatal lines of other programs, the prefixes of the tools between SGLang and
its log, and the decision on a fatal line followed by silence or by the process's exit (every generated case of
tests/sglang_format_cases.py, in-process; the live replay runs them through the real module)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))
import sglang_format_cases  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.plugins.module_utils.log import _formats as formats  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils.log._classifier import LogClassifier, classify_text, is_exception_line  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils.log._prefix import PrefixReader  # noqa: E402
from ansible_collections.llmops.sglang.plugins.module_utils.log._rules import specific_class  # noqa: E402


def table_class(code):
    for name, codes in formats.CUDA_CODE_CLASSES.items():
        if code in codes:
            return name
    return "device_error"


# ------------------------------------------------------------------------------------------------ CUDA and NCCL
@pytest.mark.parametrize("code, name, text", formats.CUDA_RUNTIME_ERRORS, ids=[e[1] for e in formats.CUDA_RUNTIME_ERRORS])
def test_every_cuda_runtime_error_in_every_spelling_names_its_class(code, name, text):
    want = table_class(code)
    spellings = [
        "RuntimeError: CUDA error: %s" % text,                                                     # torch
        "CUDA Error: %s (%d) /opt/flashinfer/include/handler.cuh: line 170 at function f(x)" % (text, code),   # FlashInfer
        "RuntimeError: Triton Error [CUDA]: %s" % text,                                            # Triton
        "torch.AcceleratorError: CUDA error: %s\nSearch for `%s' in the CUDA docs" % (text, name),
        "RuntimeError: sgl-kernel failed: %s" % name,                                              # by name
    ]
    for line in spellings:
        assert formats.cuda_class(line) == want, line
        assert specific_class(line) == want, line


def test_cuda_texts_without_a_cuda_prefix_name_nothing():
    """"invalid argument" or "out of memory" alone is no CUDA error; the table is read after its printers' prefixes."""
    assert formats.cuda_class("ValueError: invalid argument for --tp-size") is None
    assert formats.cuda_class("NCCL error: invalid argument (run with NCCL_DEBUG=WARN for details)") is None


@pytest.mark.parametrize("code, name, text", formats.NCCL_RESULTS, ids=[e[1] for e in formats.NCCL_RESULTS])
def test_every_nccl_result_names_nccl_error(code, name, text):
    if name == "ncclInProgress":
        return   # not an error
    assert code > 0
    for line in ("RuntimeError: NCCL error: %s" % text, "torch.distributed.DistBackendError: NCCL error in: "
                 "../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, %s, NCCL version 2.21.5" % text,
                 "RuntimeError: NCCL communicator failed: %s" % name):
        assert specific_class(line) == "nccl_error", line


NCCL_WARN = "node-d0:175:180 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion with error 12, opcode 1\n"
INIT = "[2031-02-03 04:05:06 TP0] Init torch distributed begin.\n"


def test_nccl_warn_names_the_cause_of_an_exit_but_a_quiet_log_alone_proves_nothing():
    """NCCL warns and may retry: with the log alone, a WARN then silence is a hang (stalled), not a crash; the process's
    exit, or SGLang's fatal phrase after it, makes it the first error line of an nccl_error."""
    assert specific_class(NCCL_WARN) == "nccl_error"
    quiet = LogClassifier()
    quiet.feed(INIT + NCCL_WARN, now=0.0)
    assert quiet.log_quiet(now=0.0) is False
    quiet.process_exited(1, now=0.0)
    res = quiet.result()
    assert (res["status"], res["stage"], res["signature"], res["error_lineno"]) == ("crashed", "init_distributed", "nccl_error", 2)
    phrase = "[2031-02-03 04:05:09 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    res = classify_text(INIT + NCCL_WARN + "node-d0:175:180 [0] NCCL INFO transport/net.cc:829 -> 2\n" + phrase)
    assert (res["status"], res["signature"], res["error_lineno"]) == ("crashed", "nccl_error", 2)
    # SGLang logging on: the warning was not the end
    assert classify_text(INIT + NCCL_WARN + "[2031-02-03 04:05:19 TP0] Init torch distributed ends.\n")["status"] == "starting"


# ------------------------------------------------------------------------------------------------ fatal lines
@pytest.mark.parametrize("line, rule", [
    ("launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2", None),   # a phrase, see below
    ("/usr/bin/python3: error while loading shared libraries: libcudart.so.12: cannot open shared object file: "
     "No such file or directory", "loader"),
    ("python3: symbol lookup error: /opt/venv/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister", "loader"),
    ("/usr/bin/python3: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found (required by /opt/x.so)", "loader"),
    ("[E1224 01:14:28.932556327 compiler_depend.ts:444] ReshapeAndCacheOperation setup failed!", "glog"),
    ("[rank3]:[F1224 01:14:28.932556327 ProcessGroupNCCL.cpp:1612] [PG 0 Rank 3] Watchdog caught", "glog"),
    ("E0000 00:00:1743742851.490303  583398 pjrt_stream_executor_client.cc:3072] Execution of replica 0 failed", "glog"),
    ("Capturing batches (bs=30):   0%|          | 0/8 [00:00<?, ?it/s][rank15]:[E1224 01:14:28.9 x.cpp:4] failed", "glog"),
    ("CUDA Error: out of memory (2) /workspace/include/flashinfer/allocator.h: line 43 at function cudaMalloc", "flashinfer_cuda"),
    ("CUDA error: an illegal memory access was encountered", "cuda_error_line"),
    ("HIP error: invalid device function", "cuda_error_line"),
    ("/usr/bin/python3: No module named sglang.launch_server", "runpy"),
    ("/opt/venv/bin/python3.12: Error while finding module specification for 'sglang.launch_server' "
     "(ModuleNotFoundError: No module named 'sglang')", "runpy"),
    ("node-d0:175:180 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion with error 12", "nccl_warn"),
    ("gpu01:4123:4190 [3] NCCL WARN Cuda failure 'out of memory'", "nccl_warn"),
])
def test_fatal_line_formats(line, rule):
    found = formats.fatal_line(line)
    assert (found.name if found else None) == rule


@pytest.mark.parametrize("line", [
    "[W1224 01:14:28.932556327 ProcessGroupNCCL.cpp:1123] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is the default now",
    "[2025-12-24 01:14:28 TP0] Load weight begin. avail mem=61.20 GB",
    "Loading safetensors checkpoint shards:  12% Completed | 1/8 [00:00<00:06,  1.09it/s]",
    "NCCL version 2.27.3+cuda12.9",
])
def test_lines_of_a_healthy_start_are_no_fatal_lines(line):
    assert formats.fatal_line(line) is None


@pytest.mark.parametrize("line", [
    "launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2",
    "launch_server.py: error: argument --tp-size: invalid int value: 'two'",
    "python3 -m sglang.launch_server: error: the following arguments are required: --model-path",
    "sglang serve: error: ambiguous option: --mem could match --mem-fraction-static, --mem-frac",
])
def test_argparse_error_is_terminal_at_once(line):
    """argparse exits 2 right after its error line: crashed at once, with no quiet and no exit needed."""
    classifier = LogClassifier()
    classifier.feed("usage: launch_server.py [-h] --model-path MODEL_PATH\n" + line + "\n", now=0.0)
    res = classifier.result()
    assert (res["status"], res["stage"], res["signature"], res["error_line"]) == ("crashed", "start", "arg_error", line)


def test_argparse_error_after_a_long_usage_whatever_its_message():
    """SGLang's usage runs to hundreds of indented lines; the line at column 0 after them is argparse's error."""
    usage = "usage: launch_server.py [-h] --model-path MODEL_PATH\n" + "".join(
        "                        [--option-%d OPTION_%d]\n" % (n, n) for n in range(300))
    line = "launch_server.py: error: argument --reasoning-parser: invalid choice: 'kimi' (choose from 'deepseek-r1', 'qwen3')"
    res = classify_text(usage + line + "\n")
    assert (res["status"], res["signature"], res["error_line"]) == ("crashed", "arg_error", line)
    assert classify_text(usage + "[2031-02-03 04:05:06] Load weight begin.\n")["status"] == "starting"


def test_an_exception_that_says_error_is_not_argparse():
    assert classify_text("RuntimeError: error: something failed\n[2031-02-03 04:05:06] Load weight begin.\n")["status"] == "starting"


# ------------------------------------------------------------------------------------------------ prefixes
SGLANG_LINES = [
    "[2025-12-24 01:14:28 DP10 TP10 EP10] Scheduler hit an exception: Traceback (most recent call last):",
    "[2025-12-24 01:14:28 TP0] Load weight begin. avail mem=61.20 GB",
    "[2025-12-24 01:14:28 DP1 TP2] Capture cuda graph begin.",
    "[2025-12-24 01:14:28 PP0 TP1] Init torch distributed begin.",
    "[2025-12-24 01:14:28] Received sigquit from a child process. It usually means the child failed.",
    "[12-16 14:27:08 TP0] Memory pool end.",
    "[gpu=0] Init nccl begin.",
    "[Gloo] Rank 0 is connected to 7 peer ranks. Expected number of connected peer ranks is : 7",
    "node-d0:175:175 [0] NCCL INFO NCCL version 2.28.9+cuda13.0",
    "  0%|          | 0/8 [00:00<?, ?it/s]",
    "Traceback (most recent call last):",
]
TOOL_PREFIXES = [
    "sglang-server-1  | ",                                   # docker compose
    "deepseek-r1-1  | 2025-12-24T01:14:28.123456789Z ",      # docker compose logs -t
    "[pod/sglang-7d9f8c6b5-x2lkq/sglang] ",                  # kubectl logs --prefix
    "[pod/sglang-0/server] 2025-12-24T01:14:28.123Z ",       # kubectl logs --prefix --timestamps
    "Dec 24 01:14:28 gpu-node-07 python3[48211]: ",          # journalctl -o short, syslog
    "Dec 24 01:14:28.123456 gpu-node-07 sglang[1]: ",        # journalctl -o short-precise
    "Wed 2025-12-24 01:14:28 UTC gpu-node-07 python3[48211]: ",   # journalctl -o short-full
    "2025-12-24T01:14:28+0000 gpu-node-07 python3[48211]: ",  # journalctl -o short-iso
    "[ 1234.567890] gpu-node-07 python3[48211]: ",           # journalctl -o short-monotonic
    "0|sglang   | ",                                         # pm2
    "01:14:28 web.1  | ",                                    # foreman / honcho
    "[default0]:",                                           # torchrun --tee
    "(SchedulerActor pid=4123) ",                            # Ray
]


@pytest.mark.parametrize("prefix", TOOL_PREFIXES)
def test_tool_prefixes_are_stripped_and_sglang_lines_kept_whole(prefix):
    for line in SGLANG_LINES:
        assert PrefixReader().strip(prefix + line) == line


@pytest.mark.parametrize("text, signature", [
    ("/usr/bin/python3: No module named sglang.launch_server\n", "import_error"),
    ("CUDA error: no kernel image is available for execution on the device\n", "unsupported_arch"),
])
def test_one_line_failures_in_both_modes(text, signature):
    """A single fatal line and then silence (the log alone), or then the process's exit."""
    quiet = LogClassifier()
    quiet.feed(text, now=0.0)
    assert quiet.log_quiet(now=0.0) is True
    exited = LogClassifier()
    exited.feed(text, now=0.0)
    exited.process_exited(1, now=0.0)
    for res in (quiet.result(), exited.result()):
        assert (res["status"], res["stage"], res["signature"], res["error_line"]) == ("crashed", "start", signature, text[:-1])


def test_exception_lines_are_found_behind_tool_prefixes():
    assert is_exception_line("sglang-1  | [2025-12-24 01:14:28 TP0] torch.OutOfMemoryError: CUDA out of memory.")
    assert not is_exception_line("sglang-1  | [2025-12-24 01:14:28 TP0] Load weight begin.")


def test_a_rank_prefixed_traceback_is_read_whole():
    """torch prints each line of a rank's traceback as "[rank0]: ..." (one space): its exception line closes it."""
    text = ("[2031-02-03 04:05:06 TP0] Load weight begin. avail mem=61.20 GB\n"
            "[rank0]: Traceback (most recent call last):\n"
            '[rank0]:   File "/opt/sglang/srt/model_executor/model_runner.py", line 7, in load_model\n'
            "[rank0]:     self.model = get_model()\n"
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    classifier = LogClassifier()
    classifier.feed(text, now=0.0)
    assert classifier.log_quiet(now=0.0) is True
    res = classifier.result()
    assert (res["stage"], res["signature"], res["error_lineno"]) == ("load_weights", "cuda_oom", 2)


def test_sglang_own_prefixes_are_never_cut():
    """The first error line of ascend-eagle3-draft-graph-capture-device-error was once cut to "heduler hit ...": no
    prefix rule takes SGLang's own "[time DPn TPn EPn]" (nor anything of a line without a tool prefix)."""
    reader = PrefixReader()
    for line in SGLANG_LINES * 2:
        assert reader.strip(line) == line
        reader.learn(reader.strip(line))
    assert reader.learned is None


def test_an_unknown_constant_prefix_is_learned_from_sglang_lines_behind_it():
    reader = PrefixReader()
    lines = ["gpu07 sglang/main " + line for line in SGLANG_LINES[:3]]
    for line in lines:
        reader.learn(reader.strip(line))
    assert reader.strip("gpu07 sglang/main Traceback (most recent call last):") == "Traceback (most recent call last):"
    # state round trip (the classifier keeps it in its JSON state)
    again = PrefixReader(reader.learned, reader.seen)
    assert again.strip(lines[0]) == SGLANG_LINES[0]


def test_one_glued_progress_bar_teaches_no_prefix():
    reader = PrefixReader()
    for _line in range(2):
        reader.learn("Capturing batches (bs=8):   0%|          | 0/8 [00:00<?, ?it/s][2025-12-24 01:14:28 TP0] x")
    assert reader.learned is None


# ------------------------------------------------------------------------------------------------ stages
def test_a_capture_bar_without_its_title_is_the_graph_stage_once_weights_load():
    first_render = "  0%|          | 0/17 [00:00<?, ?it/s]\n"
    assert classify_text("[2031-02-03 04:05:06 TP0] Load weight begin. avail mem=61.20 GB\n" + first_render)["stage"] == "cuda_graph"
    assert classify_text(first_render)["stage"] == "start"   # a download's bar before any stage says nothing


# ------------------------------------------------------------------------------------------------ the decision
def test_a_request_error_logged_by_its_handler_is_no_crash_when_the_log_goes_quiet():
    text = ("[2031-02-03 04:05:06] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)\n"
            "[2031-02-03 04:05:07] Error in request: CUDA error: an illegal memory access was encountered\n"
            "Traceback (most recent call last):\n"
            '  File "/opt/sglang/srt/entrypoints/openai/serving_base.py", line 107, in handle_request\n'
            "    return await self._handle_non_streaming_request(\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    classifier = LogClassifier()
    classifier.feed(text, now=0.0)
    assert classifier.log_quiet(now=0.0) is False
    # the process's exit still makes it the crash's evidence
    classifier.process_exited(1, now=0.0)
    assert (classifier.status, classifier.result()["signature"]) == ("crashed", "device_error")


def test_sglang_logging_on_contradicts_a_fatal_line():
    text = ("[2031-02-03 04:05:06 TP0] Load weight begin. avail mem=61.20 GB\n"
            "ImportError: cannot import name 'xx' from 'flash_attn'\n"
            "[2031-02-03 04:05:09 TP0] Load weight end. type=Qwen3ForCausalLM\n")
    classifier = LogClassifier()
    classifier.feed(text, now=0.0)
    assert classifier.log_quiet(now=0.0) is False and classifier.result()["stage"] == "kv_cache"


@pytest.mark.parametrize("name", sglang_format_cases.case_names())
@pytest.mark.parametrize("mode", ["log", "pid"])
def test_generated_case_line_by_line(name, mode):
    """Every generated case fed line by line, with the state carried through JSON, then the log alone going quiet
    (``log``) or the process exiting (``pid``): the format's verdict."""
    data, exp = sglang_format_cases.build(name)
    classifier = LogClassifier()
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(True)):
        classifier.feed(line, now=0.0)
        if number % 7 == 0:
            classifier = LogClassifier(state=json.loads(json.dumps(classifier.to_state())))
    if mode == "log":
        classifier.log_quiet(now=0.0)
    elif exp["outcome"] == "crashed":
        classifier.process_exited(1, now=0.0)
    res = classifier.result()
    outcome = {"starting": "stalled"}.get(res["status"], res["status"])
    assert (outcome, res["stage"], res["signature"], res["error_line"]) == (
        exp["outcome"], exp["stage"], exp["signature"], exp["first_error_line"])
