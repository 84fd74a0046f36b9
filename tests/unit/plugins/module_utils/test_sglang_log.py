# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the SGLang start-up log classifier and the log follower (plugins/module_utils/log/_classifier.py).

Table-driven over every recorded log in tests/fixtures/sglang-logs/ (real SGLang logs from public issues
and repositories, see its README.md), plus targeted trap tests and real-file tests of LogFollower.
Runs on Python 3.9+ with pytest only.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.log import _classifier as sglang_log
from ansible_collections.llmops.sglang.plugins.module_utils.log._classifier import (
    SIGNATURES,
    STAGES,
    LogClassifier,
    classify_text,
)
from ansible_collections.llmops.sglang.plugins.module_utils.wait._sources import LogFollower

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "sglang-logs")
CASES = sorted(name for name in os.listdir(FIXTURES) if os.path.isdir(os.path.join(FIXTURES, name)))
OUTCOME = {"starting": "stalled", "ready": "ready", "crashed": "crashed"}


def load_case(name):
    with open(os.path.join(FIXTURES, name, "expected.json"), encoding="utf-8") as handle:
        expected = json.load(handle)
    with open(os.path.join(FIXTURES, name, "server.log"), "rb") as handle:
        data = handle.read()
    return expected, data


def case_text(name):
    expected, data = load_case(name)
    return data[expected.get("new_run_offset_bytes") or 0:].decode("utf-8", "replace")


def strip_times(value):
    """Results/events with the caller-supplied times removed (they depend on when feed() was called)."""
    if isinstance(value, dict):
        return dict((k, strip_times(v)) for k, v in value.items() if k != "time")
    if isinstance(value, list):
        return [strip_times(v) for v in value]
    return value


def follow_whole(path, offset, max_bytes=65536):
    follower = LogFollower(path, offset=offset)
    chunks, reasons = [], []
    while True:
        text = follower.read(max_bytes=max_bytes)
        reasons.append(follower.reset_reason)
        if not text:
            break
        chunks.append(text)
    return "".join(chunks), reasons, follower


# --------------------------------------------------------------------------------------------- corpus
def test_corpus_is_complete():
    assert len(CASES) >= 27
    for name in CASES:
        expected, _data = load_case(name)
        assert expected["source"].startswith("https://github.com/"), name
        assert expected["outcome"] in ("ready", "crashed", "stalled")
        assert expected["stage"] in STAGES
        assert expected["signature"] is None or expected["signature"] in SIGNATURES


@pytest.mark.parametrize("name", CASES)
def test_corpus_case(name, tmp_path):
    """Each recorded log, read through LogFollower from a real file as the watcher does, gives the
    recorded outcome, stage, signature and exact first error line."""
    expected, data = load_case(name)
    path = tmp_path / "server.log"
    path.write_bytes(data)
    offset = expected.get("stale_offset_bytes", expected.get("new_run_offset_bytes") or 0)
    text, reasons, follower = follow_whole(str(path), offset)
    if "stale_offset_bytes" in expected:
        assert expected["stale_offset_bytes"] > len(data)
        assert reasons[0] == "truncated"
    else:
        assert reasons[0] is None
    assert follower.offset == len(data)
    assert text == data[expected.get("new_run_offset_bytes") or 0:].decode("utf-8", "replace")

    classifier = LogClassifier()
    for pos in range(0, len(text), 4096):
        classifier.feed(text[pos:pos + 4096], now=1.0)
    classifier.flush(now=2.0)
    res = classifier.result()

    assert (OUTCOME[res["status"]], res["stage"], res["signature"]) == (
        expected["outcome"], expected["stage"], expected["signature"])
    assert res["error_line"] == expected["first_error_line"]
    lines = text.split("\n")
    assert res["lines_seen"] == len(lines) - (1 if text.endswith("\n") else 0)
    if res["error_line"] is not None:
        # error_lineno points at exactly that line of the text fed, and the context shows it
        assert lines[res["error_lineno"] - 1] == res["error_line"]
        assert any(res["error_line"][-80:] in line or line[-80:] in res["error_line"] for line in res["error_context"])
        assert len(res["error_context"]) <= 40
    if expected["outcome"] == "ready":
        assert res["post_ready_crash"] is bool(expected.get("post_ready_crash"))
    stages = [entry["stage"] for entry in res["stages"]]
    assert stages[0] == "start" and stages[-1] == res["stage"]
    assert stages == sorted(stages, key=STAGES.index), "stages are reported in start-up order"


@pytest.mark.parametrize("name", CASES)
def test_corpus_case_after_process_exit(name):
    """The process exiting afterwards never changes a decided outcome; a stalled start becomes a crash
    at the same stage with the exit as its only evidence."""
    expected, _data = load_case(name)
    text = case_text(name)
    before = classify_text(text)
    after = classify_text(text, exited=-9)
    assert after["exit_code"] == -9
    if expected["outcome"] == "stalled":
        assert after["status"] == "crashed" and after["signature"] == "process_exited"
        assert after["stage"] == expected["stage"] and after["error_line"] is None
    else:
        for key in ("status", "stage", "signature", "error_line", "error_lineno"):
            assert after[key] == before[key], key


def chunkings(text, seed):
    """Several chunkings of text: by lines, small and large random chunks, single characters."""
    rng = random.Random(seed)
    yield "lines", text.splitlines(True)
    for label, top in (("1-64", 64), ("1-5000", 5000), ("single characters", 1 if len(text) < 40000 else 300)):
        chunks, pos = [], 0
        while pos < len(text):
            size = rng.randint(1, top)
            chunks.append(text[pos:pos + size])
            pos += size
        yield label, chunks


@pytest.mark.parametrize("name", CASES)
def test_any_chunking_and_state_round_trip_gives_the_same_result(name):
    """Incremental property: any chunking, with to_state()/JSON/restore every few chunks, gives the
    same events and result as feeding the whole text at once (seeded random chunkings)."""
    text = case_text(name)
    whole = LogClassifier()
    whole_events = whole.feed(text, now=0.0) + whole.flush(now=0.0)
    reference = whole.result()
    rng = random.Random("restore-" + name)
    for label, chunks in chunkings(text, name):
        classifier = LogClassifier()
        events = []
        every = rng.randint(1, 40)
        for index, chunk in enumerate(chunks):
            events.extend(classifier.feed(chunk, now=0.0))
            if index % every == every - 1:
                state = json.loads(json.dumps(classifier.to_state()))
                classifier = LogClassifier(state=state)
        events.extend(classifier.flush(now=0.0))
        assert classifier.result() == reference, (label, every)
        assert events == whole_events, (label, every)


@pytest.mark.parametrize("name", CASES)
def test_prefilter_is_sound(name, monkeypatch):
    """The literal-gate prefilter only skips lines that cannot matter: with every line read in full the
    result is identical."""
    text = case_text(name)
    fast = classify_text(text)
    monkeypatch.setattr(sglang_log, "_gate_re", lambda stage, extra: re.compile(r"(?m)^"))
    monkeypatch.setattr(sglang_log, "_CRASH_GATE_RE", re.compile(r""))
    slow = classify_text(text)
    assert slow == fast


@pytest.mark.parametrize("name", CASES)
def test_bytes_through_follower_in_any_read_size_give_the_same_result(name, tmp_path):
    """Byte-level chunking: the file read through LogFollower with random read sizes (byte by byte for
    small logs), follower and classifier both restored from JSON state between reads."""
    expected, data = load_case(name)
    offset = expected.get("new_run_offset_bytes") or 0
    path = tmp_path / "server.log"
    path.write_bytes(data)
    reference = classify_text(data[offset:].decode("utf-8", "replace"))
    rng = random.Random("bytes-" + name)
    top = 1 if len(data) - offset < 5000 else 4096
    follower, classifier = LogFollower(str(path), offset=offset), LogClassifier()
    while True:
        text = follower.read(max_bytes=rng.randint(1, top))
        if not text and follower.offset == len(data):
            break
        classifier.feed(text, now=0.0)
        follower = LogFollower(str(path), state=json.loads(json.dumps(follower.to_state())))
        classifier = LogClassifier(state=json.loads(json.dumps(classifier.to_state())))
    classifier.flush(now=0.0)
    assert classifier.result() == reference


BENIGN_NOISE = (
    "[2026-01-01 00:00:00 TP3] Ignore import error when loading sglang.srt.models.glm4v_moe: No module named 'x'",
    '[2026-01-01 00:00:00] INFO:     127.0.0.1:40000 - "GET /health HTTP/1.1" 503 Service Unavailable',
    "[2026-01-01 00:00:00 DP1 TP2 EP2] Failed to import amdsmi with ModuleNotFoundError(\"No module named 'amdsmi'\")",
    "/usr/lib/python3.12/site-packages/torch/cuda/__init__.py:61: UserWarning: error while probing; Traceback hidden\n"
    "  warnings.warn(",
)


@pytest.mark.parametrize("name", CASES)
def test_verdict_survives_other_rank_prefixes_and_benign_noise(name):
    """Generalisation: the same log with DP/EP rank prefixes, ANSI colours, CRLF line ends, or benign noise
    lines (import-error notices, /health 503, warnings) between SGLang lines gives the same verdict."""
    text = case_text(name)
    base = classify_text(text)

    def verdict(res):
        return res["status"], res["stage"], res["signature"], res["error_line"] is None

    variants = {
        "ranks": re.sub(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) TP(\d+)\]",
                        lambda m: "[%s DP1 TP%s EP%s]" % (m.group(1), m.group(2), m.group(2)), text, flags=re.M),
        "ansi": "".join("\x1b[36m" + line[:-1] + "\x1b[0m\n" if line.startswith("[20") and line.endswith("\n") else line
                        for line in text.splitlines(True)),
        "crlf": text.replace("\n", "\r\n"),
    }
    rng = random.Random("noise-" + name)
    lines = text.split("\n")
    limit = (base["error_lineno"] or len(lines)) - 1
    noisy = []
    for index, line in enumerate(lines):
        noisy.append(line)
        if index < limit - 1 and line.startswith("[20") and lines[index + 1].startswith("[20") and rng.random() < 0.3:
            noisy.append(rng.choice(BENIGN_NOISE))
    variants["noise"] = "\n".join(noisy)
    for label, variant in variants.items():
        res = classify_text(variant)
        assert verdict(res) == verdict(base), label
        if label in ("ranks", "crlf", "ansi"):
            assert res["error_lineno"] == base["error_lineno"], label


# --------------------------------------------------------------------------------------------- traps
ARGS_DUMP = (
    "[2026-06-11 05:10:00] server_args=ServerArgs(model_path='/models/Traceback-ready-crash', "
    "served_model_name='The server is fired up and ready to roll! Scheduler hit an exception', "
    "custom_sigquit_handler=None, crash_dump_folder=None, crash_on_nan=False, watchdog_timeout=300, "
    "skip_server_warmup=False, warmups=None, checkpoint_engine_wait_weights_before_ready=False, "
    "chat_template='Received sigquit from a child process. Killed', disable_cuda_graph=False)\n"
)


def test_args_dump_words_are_never_evidence():
    res = classify_text(ARGS_DUMP)
    assert (res["status"], res["stage"], res["signature"]) == ("starting", "start", None)
    json_dump = ('[2026-06-11 05:10:00] server_args={"model_path": "/m/x", "tokenizer_path": "Traceback (most recent call '
                 'last):", "note": "CUDA out of memory; Capture cuda graph begin; Uvicorn running on"}\n')
    res = classify_text(json_dump)
    assert (res["status"], res["stage"]) == ("starting", "start")


def test_ignore_import_error_and_benign_warnings_are_not_crashes():
    text = (
        ARGS_DUMP
        + "[2026-06-11 05:10:01 TP0] Ignore import error when loading sglang.srt.models.glm4v_moe: "
          "No module named 'transformers.models.glm4v_moe'\n"
        + "[2026-06-11 05:10:01 TP0] Failed to import amdsmi with ModuleNotFoundError(\"No module named 'amdsmi'\")\n"
        + "Failed to get device capability: nvcc not found and PyTorch is not built with CUDA support.\n"
        + "/usr/lib/python3.12/site-packages/torch/cuda/__init__.py:61: UserWarning: error in CUDA probe ignored\n"
        + "  warnings.warn(\n"
        + "[2026-06-11 05:10:02 TP0] Init torch distributed begin.\n"
    )
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"]) == ("starting", "init_distributed", None)


def test_health_503_during_warmup_is_expected():
    text = (
        "[2026-06-11 05:12:00] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)\n"
        '[2026-06-11 05:12:01] INFO:     127.0.0.1:40000 - "GET /health HTTP/1.1" 503 Service Unavailable\n'
        '[2026-06-11 05:12:01] INFO:     127.0.0.1:40002 - "GET /model_info HTTP/1.1" 200 OK\n'
        '[2026-06-11 05:12:02] INFO:     127.0.0.1:40004 - "GET /health HTTP/1.1" 503 Service Unavailable\n'
    )
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"]) == ("starting", "warmup", None)
    assert [s["stage"] for s in res["stages"]] == ["start", "http_listening", "warmup"]


def test_health_503_alone_does_not_mean_warmup():
    text = ('[2026-06-11 05:12:00] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)\n'
            '[2026-06-11 05:12:01] INFO:     127.0.0.1:40000 - "GET /health HTTP/1.1" 503 Service Unavailable\n')
    assert classify_text(text)["stage"] == "http_listening"


def test_ansi_colours_are_matched_through_and_kept_in_the_error_line():
    red = "\x1b[31m{}\x1b[0m"
    crash_line = red.format("[2026-06-11 05:11:58 TP0] Scheduler hit an exception: Traceback (most recent call last):")
    text = (
        "\x1b[32m[2026-06-11 05:11:50 TP0] Load weight begin. avail mem=23.1 GB\x1b[0m\n"
        + crash_line + "\n"
        + '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 10, in run_scheduler_process\n'
        + "\x1b[1mtorch.OutOfMemoryError\x1b[0m: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"]) == ("crashed", "load_weights", "cuda_oom")
    assert res["error_line"] == crash_line


def test_no_trailing_newline_waits_for_the_line_until_flush():
    classifier = LogClassifier()
    events = classifier.feed("[2026-06-11 05:12:30] The server is fired up and ready", now=1.0)
    assert events == [] and classifier.status == "starting"
    events = classifier.feed(" to roll!", now=2.0)
    assert events == [] and classifier.status == "starting"
    events = classifier.flush(now=3.0)
    assert classifier.status == "ready" and classifier.stage == "ready"
    assert [e["type"] for e in events] == ["stage", "ready"]
    assert events[1]["lineno"] == 1 and events[1]["time"] == 3.0


def test_custom_crash_and_ignore_patterns():
    text = ("[2026-06-11 05:10:02 TP0] Init torch distributed begin.\n"
            "[2026-06-11 05:10:03 TP0] my-plugin: FATAL cannot mount /models\n")
    res = classify_text(text, crash_patterns=[r"my-plugin: FATAL"])
    assert (res["status"], res["signature"], res["error_lineno"]) == ("crashed", "traceback", 2)
    # a custom crash line that names a specific failure gets the specific class
    res = classify_text(text.replace("cannot mount /models", "CUDA out of memory"), crash_patterns=[r"my-plugin: FATAL"])
    assert res["signature"] == "cuda_oom"
    # ignored lines are never evidence: neither crash nor stage
    noisy = text + "[2026-06-11 05:10:04] Received sigquit from a child process. It usually means the child failed.\n"
    assert classify_text(noisy)["status"] == "crashed"
    res = classify_text(noisy, ignore_patterns=[r"Received sigquit"])
    assert (res["status"], res["stage"]) == ("starting", "init_distributed")
    res = classify_text(noisy, ignore_patterns=[r"Init torch distributed", r"sigquit"])
    assert (res["status"], res["stage"]) == ("starting", "start")


def test_patterns_survive_state_round_trip():
    classifier = LogClassifier(crash_patterns=[r"BOOM"], ignore_patterns=[r"quiet"])
    classifier.feed("quiet BOOM\n", now=0.0)
    assert classifier.status == "starting"
    restored = LogClassifier(state=json.loads(json.dumps(classifier.to_state())))
    restored.feed("BOOM\n", now=0.0)
    assert restored.status == "crashed" and restored.result()["error_lineno"] == 2


TRACEBACK_HEAD = (
    "[2026-06-11 05:11:58 {rank}] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2546, in run_scheduler_process\n'
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, pp_rank, dp_rank)\n"
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 235, in __init__\n'
    "    self.initialize(min_per_gpu_memory)\n"
)


@pytest.mark.parametrize("root_cause, signature", [
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 384.00 MiB. GPU 1 has a total capacity of 31.86 GiB",
     "cuda_oom"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "cuda_oom"),
    ("RuntimeError: NPU out of memory. Tried to allocate 1.00 GiB", "cuda_oom"),
    ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "cuda_oom"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "unsupported_arch"),
    ("RuntimeError: HIP error: invalid device function", "unsupported_arch"),
    ("RuntimeError: No supported CUDA architectures found for major versions [9, 10].", "unsupported_arch"),
    ("ValueError: type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')",
     "unsupported_arch"),
    ("ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 89. "
     "Current capability: 86.", "unsupported_arch"),
    ("RuntimeError: FlashAttention only supports Ampere GPUs or newer.", "unsupported_arch"),
    ("RuntimeError: CUDA error: invalid device ordinal", "cuda_error"),
    ("RuntimeError: Triton Error [CUDA]: device kernel image is invalid", "unsupported_arch"),
    ("RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.", "driver_mismatch"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "device_error"),
    ("torch.AcceleratorError: CUDA error: device-side assert triggered", "device_error"),
    ("RuntimeError: HIP error: an illegal memory access was encountered", "device_error"),
    ("RuntimeError: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k)`",
     "device_error"),
    ("RuntimeError: Sync:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:325 NPU function error: "
     "c10_npu::acl::AclrtSynchronizeStreamWithTimeout(stream), error code is 507035", "device_error"),
    ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)", "nccl_error"),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error, "
     "NCCL version 2.21.5 ncclUnhandledCudaError: Call to CUDA function failed.", "nccl_error"),
    ("torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined.", "nccl_error"),
    ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: 29500, "
     "useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use", "nccl_error"),
    ("RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by "
     "key '0', but store->get('0') got error: Connection reset by peer", "nccl_error"),
    ("RuntimeError: CUDA driver version is insufficient for CUDA runtime version", "driver_mismatch"),
    ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
     "NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non "
     "supported HW", "driver_mismatch"),
    ("pynvml.NVMLError_LibRmVersionMismatch: RM has detected an NVML/RM version mismatch.", "driver_mismatch"),
    ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
     "NumCudaDevices() that might have already set an error? Error 802: system not yet initialized", "cuda_error"),
    ("RuntimeError: CUDA error: no CUDA-capable device is detected", "cuda_error"),
    ("KeyError: 'model.layers.0.mlp.experts.w13_weight'", "traceback"),
    ("AssertionError: res=<Response [502]>", "traceback"),
])
@pytest.mark.parametrize("rank", ["TP0", "TP3", "DP1 TP0 EP1", "PP0 TP0", "DP3 TP15 EP15"])
def test_root_cause_decides_the_signature(root_cause, signature, rank):
    text = ("[2026-06-11 05:11:50 %s] Load weight begin. avail mem=23.1 GB\n" % rank
            + TRACEBACK_HEAD.format(rank=rank) + root_cause + "\n\n"
            + "[2026-06-11 05:11:58] Received sigquit from a child process. It usually means the child failed.\n")
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"]) == ("crashed", "load_weights", signature)
    assert res["error_lineno"] == 2 and "hit an exception" in res["error_line"]
    assert root_cause in res["error_context"]


def test_exception_message_continued_on_the_next_line_refines_the_class():
    text = ("Traceback (most recent call last):\n"
            '  File "/venv/lib/python3.12/site-packages/sglang/srt/model_executor/model_runner.py", line 90, in init_torch_distributed\n'
            "    torch.get_device_module(self.device).set_device(self.gpu_id)\n"
            "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda \n"
            "functions before calling NumCudaDevices() that might have already set an error? \n"
            "Error 804: forward compatibility was attempted on non supported HW\n")
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"], res["error_lineno"]) == (
        "crashed", "init_distributed", "driver_mismatch", 1)


def test_signature_is_refined_by_an_event_once_the_root_cause_shows():
    classifier = LogClassifier()
    events = classifier.feed(TRACEBACK_HEAD.format(rank="TP0"), now=0.0)
    assert [e["type"] for e in events] == ["crash"] and events[0]["signature"] == "traceback"
    events = classifier.feed("torch.OutOfMemoryError: CUDA out of memory.\n", now=0.0)
    assert events == [{"type": "signature", "signature": "cuda_oom",
                       "line": "torch.OutOfMemoryError: CUDA out of memory.", "lineno": 6}]


def test_root_cause_window_ends_with_the_exception_message():
    head = TRACEBACK_HEAD.format(rank="TP0") + "RuntimeError: Runtime check failed at marlin.cuh:963\n"
    # the message continues on the next lines until a blank line: still part of the root cause
    res = classify_text(head + "CUDA kernel errors might be asynchronously reported at some other API call\n"
                        "Error 804: forward compatibility was attempted on non supported HW\n")
    assert res["signature"] == "driver_mismatch"
    # after the blank line that ends the traceback, unrelated output does not change the verdict
    res = classify_text(head + "\nnode-d0:1234:1300 [0] NCCL WARN Cuda failure 'out of memory'\n")
    assert res["signature"] == "traceback"


def test_sigquit_logged_first_then_traceback_root_cause():
    text = ("[2026-06-17 09:57:15] Received sigquit from a child process. It usually means the child failed.\n"
            "[2026-06-17 09:57:15] kill_process_tree called: parent_pid=1, include_parent=True, pid=1\n"
            + TRACEBACK_HEAD.format(rank="TP4"))
    res = classify_text(text)
    assert (res["status"], res["signature"], res["error_lineno"]) == ("crashed", "sigquit_child", 1)
    res = classify_text(text + "torch.OutOfMemoryError: CUDA out of memory.\n")
    assert (res["signature"], res["error_lineno"]) == ("cuda_oom", 1)
    # another rank's traceback after the first one is complete does not change the verdict
    res = classify_text(text + "KeyError: 'x'\n\n" + TRACEBACK_HEAD.format(rank="TP5") + "RuntimeError: NCCL error: x\n")
    assert res["signature"] == "sigquit_child"


@pytest.mark.parametrize("line, signature", [
    ("[2026-06-11 05:10:09] Received sigquit from a child proces. It usually means the child failed.", "sigquit_child"),
    ("[2026-06-11 05:10:09] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
     "sigquit_child"),
    ("[2026-06-11 05:10:09] Rank 0 scheduler is dead. Please check if there are relevant logs.", "process_exited"),
    ("[2026-06-11 05:10:09] Scheduler or DataParallelController 1 terminated with -9", "silent_exit"),
    ("[2026-06-11 05:10:09] scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), "
     "a common cause is the OS OOM killer.", "silent_exit"),
    ("[2026-06-11 05:10:09] scheduler died during initialization (exit code: 1).", "process_exited"),
    ("[2026-06-11 05:10:09] Initialization failed. Please see the error messages above.", "traceback"),
    ("[2026-08-02 00:17:43] Subprocess scheduler_0 (pid=31377) crashed with exit code -9. Triggering SIGQUIT for cleanup...",
     "silent_exit"),
    ("Killed", "silent_exit"),
    ("[2026-06-11 05:10:09] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000): address "
     "already in use", "traceback"),
    ("[rank0]:[E1104 10:20:30.123456 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.", "nccl_error"),
    ("Segmentation fault (core dumped)", "process_exited"),
    ("Fatal Python error: Segmentation fault", "traceback"),
    ("terminate called after throwing an instance of 'c10::Error'", "traceback"),
    ("/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: There appear to be 1 "
     "leaked semaphore objects to clean up at shutdown", "silent_exit"),
])
def test_decisive_lines(line, signature):
    text = "[2026-06-11 05:10:02 TP0] Init torch distributed begin.\n" + line + "\n"
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"], res["error_line"]) == (
        "crashed", "init_distributed", signature, line)


@pytest.mark.parametrize("line", [
    "Killed",
    "Segmentation fault (core dumped)",
    "/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: resource_tracker: There appear to be 1 "
    "leaked semaphore objects to clean up at shutdown",
])
def test_shell_exit_evidence_counts_only_if_sglang_does_not_log_on(line):
    head = "[2026-06-11 05:10:02 TP0] Load weight begin. avail mem=78.5 GB\n" + line + "\n"
    classifier = LogClassifier()
    classifier.feed(head + "  warnings.warn('resource_tracker: There appear to be %d '\n", now=0.0)
    assert classifier.status == "starting"   # could be another process: wait for the end of input / exit
    classifier.flush(now=0.0)
    assert (classifier.status, classifier.result()["error_lineno"]) == ("crashed", 2)
    # SGLang logging on proves it was some other process (a compile worker, a wrapper script's child)
    res = classify_text(head + "[2026-06-11 05:10:09 TP0] Load weight end. avail mem=20.1 GB\n", exited=None)
    assert (res["status"], res["stage"]) == ("starting", "kv_cache")
    # the server's own exit afterwards: silent_exit when it was a "Killed"/leaked-semaphore line
    res = classify_text(head + "[2026-06-11 05:10:09 TP0] Load weight end. avail mem=20.1 GB\n", exited=-9)
    assert res["signature"] == ("process_exited" if line.startswith("Segmentation") else "silent_exit")
    assert res["error_line"] is None


def test_unraisable_and_logging_tracebacks_are_never_candidates():
    for intro in ("Exception ignored in: <function _Stream.__del__ at 0x7f00deadbeef>", "--- Logging error ---"):
        text = ("[2026-06-11 05:10:02 TP0] Load weight begin. avail mem=78.5 GB\n" + intro + "\n"
                "Traceback (most recent call last):\n"
                '  File "/usr/lib/python3.12/logging/__init__.py", line 1160, in emit\n'
                "ValueError: I/O operation on closed file.\n")
        res = classify_text(text)
        assert (res["status"], res["stage"]) == ("starting", "load_weights"), intro


def test_warmup_failure():
    text = ("[2024-12-13 01:45:02] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)\n"
            "[2024-12-13 01:47:34] Initialization failed. warmup error: Traceback (most recent call last):\n"
            '  File "/sgl/python/sglang/srt/entrypoints/http_server.py", line 621, in _wait_and_warmup\n'
            '    assert res.status_code == 200, f"{res=}, {res.text=}"\n'
            "AssertionError: res=<Response [502]>, res.text=''\n")
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"], res["error_lineno"]) == ("crashed", "warmup", "warmup_failed", 2)


def test_argparse_error_is_arg_error():
    text = ("usage: launch_server.py [-h] --model-path MODEL_PATH [--tp-size TP_SIZE]\n"
            "launch_server.py: error: unrecognized arguments: --enable-magic\n")
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"], res["error_lineno"]) == ("crashed", "start", "arg_error", 2)


LAUNCHER_TB = (
    "Traceback (most recent call last):\n"
    '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
    '  File "/venv/lib/python3.12/site-packages/sglang/launch_server.py", line 6, in <module>\n'
    "    from sglang.srt.entrypoints.http_server import launch_server\n"
)


@pytest.mark.parametrize("tail, signature", [
    ("", "import_error"),   # excerpt cut inside the import chain
    ("ImportError: cannot import name 'fused_marlin_moe' from 'sgl_kernel'\n", "import_error"),
    ("OSError: /venv/lib/python3.12/site-packages/sgl_kernel/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDevice\n",
     "import_error"),
    ('  File "/venv/lib/python3.12/site-packages/sglang/srt/server_args.py", line 836, in __post_init__\n'
     "    self._handle_model_specific_adjustments()\n"
     "ValueError: --speculative-algorithm NGRAM is not compatible with --mamba-scheduler-strategy no_buffer\n", "arg_error"),
    ('  File "/venv/lib/python3.12/site-packages/sglang/srt/hf_transformers_utils.py", line 90, in get_config\n'
     "OSError: /models/missing is not a local folder and is not a valid model identifier listed on "
     "'https://huggingface.co/models'\n", "arg_error"),
    ("RuntimeError: CUDA error: no CUDA-capable device is detected\n", "cuda_error"),
])
def test_launcher_traceback_is_decided_at_end_of_input(tail, signature):
    text = "[2026-06-11 05:10:00] Casting torch.bfloat16 to torch.float16.\n" + LAUNCHER_TB + tail
    classifier = LogClassifier()
    classifier.feed(text, now=0.0)
    if signature not in ("cuda_error",):
        # a bare top-level traceback is only a candidate while the process may still be running
        assert classifier.status == "starting"
    classifier.flush(now=0.0)
    res = classifier.result()
    assert (res["status"], res["stage"], res["signature"]) == ("crashed", "start", signature)
    assert (res["error_line"], res["error_lineno"]) == ("Traceback (most recent call last):", 2)
    # the process exiting decides it the same way
    assert classify_text(text, exited=1)["signature"] == signature


def test_benign_library_traceback_followed_by_progress_is_not_a_crash():
    text = (
        "[2026-06-11 05:10:00] Using default HuggingFace chat template with detected content format: string\n"
        + LAUNCHER_TB
        + "ModuleNotFoundError: No module named 'vllm'\n"
        + "[2026-06-11 05:10:05 TP0] Init torch distributed begin.\n"
        + "[2026-06-11 05:10:07 TP0] Load weight begin. avail mem=78.5 GB\n"
    )
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"]) == ("starting", "load_weights", None)
    # ... and a later exit is then a plain process exit, not the old traceback
    res = classify_text(text, exited=1)
    assert (res["signature"], res["error_line"]) == ("process_exited", None)


def test_bare_frames_without_an_exception_line_prove_nothing():
    """A stack print (frames only, e.g. traceback.print_stack()) at the end of a static log is not a crash."""
    text = ("[2026-06-11 05:10:07 TP0] Load weight begin. avail mem=78.5 GB\n"
            '  File "/venv/lib/python3.12/site-packages/sglang/srt/model_loader/loader.py", line 90, in load_weights\n'
            "    self._load(x)\n")
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"]) == ("starting", "load_weights", None)
    res = classify_text(text, exited=1)
    assert (res["status"], res["signature"], res["error_line"]) == ("crashed", "process_exited", None)


def test_traceback_glued_after_progress_bar_is_a_candidate():
    text = ("[2026-06-11 05:10:07 TP0] Load weight begin. avail mem=78.5 GB\n"
            "\rLoading safetensors checkpoint shards:   0% Completed | 0/8 [00:00<?, ?it/s]Traceback (most recent call last):\n"
            '  File "/venv/lib/python3.12/site-packages/sglang/srt/model_loader/loader.py", line 90, in load_weights\n'
            "KeyError: 'lm_head.weight'\n")
    res = classify_text(text)
    assert (res["status"], res["signature"], res["error_lineno"]) == ("crashed", "traceback", 2)


def test_old_formats():
    v02 = ("[gpu=0] Init nccl begin.\n[gpu=0] Load weight begin. avail mem=22.1 GB\n"
           "[gpu=0] Memory pool end. avail mem=3.1 GB\n[gpu=0] Capture cuda graph begin.\n")
    res = classify_text(v02)
    assert (res["status"], res["stage"]) == ("starting", "cuda_graph")
    v04 = ("[2025-02-26 12:01:56 TP3] sglang is using nccl==2.21.5\n"
           "INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)\n"
           'INFO:     127.0.0.1:55410 - "GET /get_model_info HTTP/1.1" 200 OK\n'
           "The server is fired up and ready to roll!\n")
    res = classify_text(v04)
    assert (res["status"], res["stage"]) == ("ready", "ready")
    assert [s["stage"] for s in res["stages"]] == ["start", "init_distributed", "http_listening", "warmup", "ready"]


def test_v02_gpu_id_prefix_and_warmup_killed():
    """0.2.x issue format (sgl-project/sglang#744) and a localised shell kill message (#16855)."""
    text = ("[gpu_id=0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=15.61 GB\n"
            "[gpu_id=1] Capture cuda graph begin. This can take up to several minutes.\n"
            "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)\n"
            "[2026-01-10 13:23:26 TP0] Prefill batch, #new-seq: 1, #new-token: 2163, #cached-token: 41\n")
    res = classify_text(text)
    assert (res["status"], res["stage"]) == ("starting", "warmup")
    assert [s["stage"] for s in res["stages"]] == ["start", "kv_cache", "cuda_graph", "http_listening", "warmup"]
    res = classify_text(text + "\n\u5df2\u6740\u6b7b\n")
    assert (res["status"], res["signature"], res["error_lineno"]) == ("crashed", "silent_exit", 6)


def test_year_less_prefix_is_an_sglang_line():
    text = ("Traceback (most recent call last):\n"
            '  File "/venv/lib/python3.12/site-packages/sglang/cli/main.py", line 26, in main\n'
            "ValueError: x\n"
            "[12-16 14:27:08] Using default chat template\n")
    assert classify_text(text)["status"] == "starting"   # SGLang went on logging: benign
    res = classify_text("[12-16 14:27:08] Rank 0 scheduler is dead. Please check if there are relevant logs.\n")
    assert (res["status"], res["signature"]) == ("crashed", "process_exited")


SCHEDULER_TB_NO_HEADER = (
    "Traceback (most recent call last):\n"
    '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1748, in run_scheduler_process\n'
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)\n"
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 934, in init_cuda_graphs\n'
    "    self.cuda_graph_runner = CudaGraphRunner(self)\n"
    '  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 269, in __init__\n'
    "    raise Exception(\n"
)


@pytest.mark.parametrize("message, signature", [
    ("CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a total capacity of 95.00 GiB", "cuda_oom"),
    ("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [192.0.2.7]:7215", "nccl_error"),
    ("invalid argument", "traceback"),
])
def test_capture_failed_exception_in_a_pasted_traceback(message, signature):
    """Issue excerpts often start at the scheduler's bare traceback (sgl-project/sglang#4489, #5285, #4205)."""
    text = SCHEDULER_TB_NO_HEADER + "Exception: Capture cuda graph failed: " + message + "\n" + "Possible solutions:\n"
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"]) == ("crashed", "cuda_graph", signature)
    assert (res["error_line"], res["error_lineno"]) == ("Traceback (most recent call last):", 1)


@pytest.mark.parametrize("code, signature", [("-9", "silent_exit"), ("-3", "process_exited")])
def test_launcher_traceback_reporting_a_dead_scheduler(code, signature):
    """0.5.10+: the launcher raises RuntimeError naming the scheduler's exit code (sgl-project/sglang#25118)."""
    text = ("[2026-05-12 10:00:00 TP0] Load weight begin. avail mem=180.1 GB\n"
            "Traceback (most recent call last):\n"
            '  File "/sgl-workspace/sglang/python/sglang/srt/entrypoints/engine.py", line 1277, in _wait_for_scheduler_ready\n'
            "    raise _scheduler_died_error(i, scheduler_procs[i])\n"
            "RuntimeError: Rank 0 scheduler died during initialization (exit code: %s). If exit code is -9 (SIGKILL), "
            "a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.\n" % code)
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"], res["error_lineno"]) == ("crashed", "load_weights", signature, 2)


def test_newer_stage_names():
    text = ("[2026-03-01 10:00:00 TP0] Init parallel begin.\n"
            "[2026-03-01 10:00:02 TP0] Load weight begin. avail mem=178.1 GB\n"
            "[2026-03-01 10:00:30 TP0] Load weight end. elapsed=28.1 s\n"
            "[2026-03-01 10:00:31 TP0] Running FlashInfer autotune...\n"
            "[2026-03-01 10:00:40 TP0] Capture target decode CUDA graph begin. avail mem=20.1 GB\n")
    res = classify_text(text)
    assert [s["stage"] for s in res["stages"]] == ["start", "init_distributed", "load_weights", "kv_cache", "cuda_graph"]


def test_speculative_draft_reload_is_not_a_restart():
    text = ("[2026-08-01 21:51:16] Capture target prefill CUDA graph begin.\n"
            "[2026-08-01 21:54:52] Capture target prefill CUDA graph end. elapsed=216 s\n"
            "[2026-08-01 21:54:53] Init torch distributed begin.\n"
            "[2026-08-01 21:54:53] Load weight begin. avail mem=11.2 GB\n")
    res = classify_text(text)
    assert (res["status"], res["stage"]) == ("starting", "cuda_graph")
    assert [s["stage"] for s in res["stages"]] == ["start", "cuda_graph"]


def test_post_ready_crash_keeps_ready():
    text = ("[2026-01-15 13:43:11] The server is fired up and ready to roll!\n"
            + TRACEBACK_HEAD.format(rank="DP2 TP10 EP10") + "RuntimeError: NPU function error: x\n"
            + "[2026-01-15 13:43:22] Received sigquit from a child process. It usually means the child failed.\n")
    res = classify_text(text, exited=1)
    assert (res["status"], res["stage"], res["signature"], res["post_ready_crash"]) == ("ready", "ready", None, True)


def test_headless_excerpt_takes_stage_from_frames():
    text = ('  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/cuda_graph_runner.py", line 384, in __init__\n'
            "    self.capture()\n"
            "RuntimeError: Runtime check failed at moe_wna16_marlin.cuh:963\n"
            "\n"
            "[2026-06-11 05:11:11] Received sigquit from a child process. It usually means the child failed.\n")
    res = classify_text(text)
    assert (res["status"], res["stage"], res["signature"], res["error_lineno"]) == ("crashed", "cuda_graph", "traceback", 3)


def test_crash_after_a_new_server_args_dump_is_a_new_run_boundary():
    """After a decided crash, a new args dump (restart appended to the same file) ends the refinement window."""
    text = ("[2026-06-11 05:11:58] Received sigquit from a child process. It usually means the child failed.\n"
            + ARGS_DUMP + TRACEBACK_HEAD.format(rank="TP0") + "torch.OutOfMemoryError: CUDA out of memory.\n")
    res = classify_text(text)
    assert (res["signature"], res["stage"]) == ("sigquit_child", "start")


def test_state_stays_small_for_huge_inputs():
    classifier = LogClassifier()
    progress = "\rCapturing batches (bs=512 avail_mem=3.20 GB):  12%|#2        | 6/52 [00:01<00:10,  4.2it/s]"
    for _chunk in range(2000):   # ~200 MB of progress updates without a newline
        classifier.feed(progress * 1000, now=0.0)
    state = json.dumps(classifier.to_state())
    assert len(state) < 100000
    classifier.feed("\n" + TRACEBACK_HEAD.format(rank="TP0"), now=0.0)
    for _chunk in range(5000):
        classifier.feed('  File "/x/sglang/srt/layers/linear.py", line 1, in forward\n    return f(x)\n', now=0.0)
    classifier.feed("torch.OutOfMemoryError: CUDA out of memory.\n", now=0.0)
    res = classifier.result()
    assert res["status"] == "crashed" and len(res["error_context"]) <= 40
    assert len(json.dumps(classifier.to_state())) < 100000
    assert res["lines_seen"] == 1 + 5 + 10000 + 1
    # the root cause is read within a bounded window after the crash line (1000 lines): not this far
    assert res["signature"] == "traceback"
    deep = TRACEBACK_HEAD.format(rank="TP0") + '  File "/x/sglang/srt/layers/linear.py", line 1, in forward\n    f(x)\n' * 400
    res = classify_text(deep + "torch.OutOfMemoryError: CUDA out of memory.\n")
    assert res["signature"] == "cuda_oom" and len(res["error_context"]) == 40
    assert res["error_context"][-1] == "torch.OutOfMemoryError: CUDA out of memory."
    assert res["error_context"][0] == res["error_line"]


def test_long_line_is_capped_the_same_way_in_any_chunking():
    line = "[2026-06-11 05:10:09 TP0] " + "x" * 100000 + " Scheduler hit an exception: Traceback (most recent call last):"
    whole = classify_text(line + "\n")
    parts = LogClassifier()
    for pos in range(0, len(line), 777):
        parts.feed(line[pos:pos + 777], now=0.0)
    parts.feed("\n", now=0.0)
    parts.flush(now=0.0)
    assert parts.result() == whole
    assert whole["status"] == "crashed" and whole["error_line"].endswith("Traceback (most recent call last):")
    assert len(whole["error_line"]) < 40000


def test_process_exit_without_evidence():
    res = classify_text("[2026-06-11 05:10:02 TP0] Init torch distributed begin.\n", exited=0)
    assert (res["status"], res["stage"], res["signature"], res["error_line"]) == (
        "crashed", "init_distributed", "process_exited", None)
    assert res["error_context"] == ["[2026-06-11 05:10:02 TP0] Init torch distributed begin."]


def test_result_and_events_are_json_serialisable():
    classifier = LogClassifier()
    events = classifier.feed(case_text("rtx3090-oom-attention-workspace-at-graph-stage"))
    events += classifier.flush()
    json.dumps(events)
    json.dumps(classifier.result())
    json.dumps(classifier.to_state())
    assert all(isinstance(e["time"], float) for e in events if e["type"] == "stage")


def test_state_version_is_checked():
    state = LogClassifier().to_state()
    state["version"] = 99
    with pytest.raises(ValueError, match="state version"):
        LogClassifier(state=state)


# --------------------------------------------------------------------------------------------- follower
def test_follower_file_appears_later(tmp_path):
    path = tmp_path / "sglang.log"
    follower = LogFollower(str(path))
    assert follower.offset == 0 and follower.read() == "" and follower.reset_reason is None
    path.write_bytes(b"[2026-06-11 05:10:00] first\n")
    assert follower.read() == "[2026-06-11 05:10:00] first\n" and follower.reset_reason == "appeared"
    with open(str(path), "ab") as handle:
        handle.write(b"second\n")
    assert follower.read() == "second\n" and follower.reset_reason is None
    assert follower.read() == "" and follower.offset == path.stat().st_size


def test_follower_default_offset_is_the_current_size(tmp_path):
    path = tmp_path / "sglang.log"
    path.write_bytes(b"old run line 1\nold run line 2\n")
    follower = LogFollower(str(path))
    assert follower.offset == 30 and follower.read() == ""
    with open(str(path), "ab") as handle:
        handle.write(b"new run\n")
    assert follower.read() == "new run\n"


def test_follower_truncation_and_regrow(tmp_path):
    path = tmp_path / "sglang.log"
    path.write_bytes(b"A" * 100 + b"\n")
    follower = LogFollower(str(path), offset=0)
    assert len(follower.read()) == 101
    # copytruncate: shorter than the offset
    path.write_bytes(b"short\n")
    assert follower.read() == "short\n" and follower.reset_reason == "truncated"
    # truncated and already grown past the old offset before the next read: the bytes before the offset changed
    with open(str(path), "r+b") as handle:
        handle.truncate(0)
        handle.write(b"B" * 50 + b"\n")
    assert follower.read() == "B" * 50 + "\n" and follower.reset_reason == "truncated"


def test_follower_stale_offset_beyond_eof(tmp_path):
    path = tmp_path / "sglang.log"
    path.write_bytes(b"only this run\n")
    follower = LogFollower(str(path), offset=177070)
    assert follower.read() == "only this run\n" and follower.reset_reason == "truncated"


def test_follower_replacement_logrotate_create(tmp_path):
    path = tmp_path / "sglang.log"
    path.write_bytes(b"run 1\n")
    follower = LogFollower(str(path), offset=0)
    assert follower.read() == "run 1\n"
    os.rename(str(path), str(tmp_path / "sglang.log.1"))
    assert follower.read() == "" and follower.reset_reason is None   # rotated away, not recreated yet
    path.write_bytes(b"run 2, a longer first line than before\n")
    assert follower.read() == "run 2, a longer first line than before\n" and follower.reset_reason == "replaced"


def test_follower_multibyte_utf8_split_across_reads_and_states(tmp_path):
    text = "Capturing batches: 100%|\u2588\u2588\u2588\u2588| 4/4 \u2014 \u00e9t\u00e9 \U0001f600 done\n"
    data = text.encode("utf-8")
    path = tmp_path / "sglang.log"
    path.write_bytes(data)
    follower = LogFollower(str(path), offset=0)
    out = []
    while True:
        chunk = follower.read(max_bytes=1)
        assert len(chunk.encode("utf-8")) <= 1 or chunk == "" or len(chunk) == 1
        follower = LogFollower(str(path), state=json.loads(json.dumps(follower.to_state())))
        if follower.offset == len(data) and not chunk:
            break
        out.append(chunk)
    assert "".join(out) == text and "\ufffd" not in "".join(out)


def test_follower_invalid_utf8_is_replaced(tmp_path):
    path = tmp_path / "sglang.log"
    path.write_bytes(b"bad \xff\xfe bytes\n")
    assert LogFollower(str(path), offset=0).read() == "bad \ufffd\ufffd bytes\n"


def test_follower_reads_only_new_bytes_up_to_max(tmp_path):
    path = tmp_path / "sglang.log"
    path.write_bytes(b"0123456789" * 10)
    follower = LogFollower(str(path), offset=0)
    assert follower.read(max_bytes=30) == "0123456789" * 3 and follower.offset == 30
    assert follower.read(max_bytes=1000) == "0123456789" * 7 and follower.offset == 100


# A log whose lines end in \n, with \r progress segments, \r\n and multi-byte characters (own synthetic lines).
PARTIAL_LOG = (
    "[2026-06-11 05:10:00 TP0] Load weight begin. avail mem=78.50 GB \u2014 \u00e9\n"
    "Loading safetensors:  50%|\u2588\u2588   | 1/2\rLoading safetensors: 100%|\u2588\u2588\u2588\u2588| 2/2\n"
    "[2026-06-11 05:10:02 TP1] Capture cuda graph begin.\r\n"
    "[2026-06-11 05:10:03 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    "RuntimeError: boom\n"
).encode("utf-8")


def first_line_start_at_or_after(data, pos):
    """Where the first line that starts at or after ``pos`` starts (byte 0, after a \n, or after a \r)."""
    while 0 < pos < len(data) and data[pos - 1:pos] not in (b"\n", b"\r"):
        pos += 1
    return pos


@pytest.mark.parametrize("read_size", [1, 5, 4096])
def test_follower_default_offset_inside_a_line_skips_its_tail_at_every_cut(tmp_path, read_size):
    """Fault 5 of issue 10: the default offset (the file's size) falls while a line is being written; the rest of
    that line is not a line of its own. Every cut position, every read boundary (state round trip per read)."""
    path = tmp_path / "sglang.log"
    for cut in range(len(PARTIAL_LOG) + 1):
        path.write_bytes(PARTIAL_LOG[:cut])
        follower = LogFollower(str(path))
        with open(str(path), "ab") as handle:
            handle.write(PARTIAL_LOG[cut:])
        pieces = []
        while follower.offset < len(PARTIAL_LOG):
            pieces.append(follower.read(max_bytes=read_size))
            follower = LogFollower(str(path), state=json.loads(json.dumps(follower.to_state())))
        assert "".join(pieces).encode("utf-8") == PARTIAL_LOG[first_line_start_at_or_after(PARTIAL_LOG, cut):], cut


def test_follower_explicit_offset_and_byte_zero_are_line_starts(tmp_path):
    """The role's offset is where the new run began, even when the earlier run ended without a newline."""
    path = tmp_path / "sglang.log"
    path.write_bytes(b"old run killed mid-li")
    follower = LogFollower(str(path), offset=21)
    with open(str(path), "ab") as handle:
        handle.write(b"[2026-06-11 05:10:00] new run\n")
    assert follower.read() == "[2026-06-11 05:10:00] new run\n"
    path.write_bytes(b"truncated, then one line\n")   # a restart at byte 0 never skips
    follower = LogFollower(str(path), offset=10_000)
    assert follower.read() == "truncated, then one line\n" and follower.reset_reason == "truncated"


def test_error_line_is_whole_when_the_wait_starts_inside_a_crash_line(tmp_path):
    """16 ranks print the same crash line; a wait starting inside rank 0's reports rank 1's, as written."""
    lines = ["[2026-06-11 05:10:%02d TP%d] Load weight end. type=Qwen3ForCausalLM, avail mem=61.%02d GB\n"
             % (i % 60, i % 16, i % 100) for i in range(2000)]
    crash = [TRACEBACK_HEAD.format(rank="TP%d" % r).split("\n", 1)[0] + "\n" for r in range(16)]
    data = "".join(lines + crash + ["RuntimeError: boom\n"]).encode("utf-8")
    rank0 = data.index(crash[0].encode())
    path = tmp_path / "sglang.log"
    for cut in range(rank0, rank0 + len(crash[0]) + 1, 7):
        path.write_bytes(data[:cut])
        follower, classifier = LogFollower(str(path)), LogClassifier()
        with open(str(path), "ab") as handle:
            handle.write(data[cut:])
        while follower.offset < len(data):
            classifier.feed(follower.read(max_bytes=4093), now=0.0)
        classifier.flush(now=0.0)
        assert classifier.result()["error_line"] == (crash[0] if cut == rank0 else crash[1]).rstrip("\n"), cut


WRITER = r"""
import sys, time
path, n = sys.argv[1], int(sys.argv[2])
with open(path, "a", encoding="utf-8") as handle:
    for i in range(n):
        handle.write("[2026-06-11 05:10:%02d TP%d] line %d \u00e9\u2588 " % (i % 60, i % 8, i) + "x" * (i % 50) + "\n")
        if i % 7 == 0:
            handle.flush()
            time.sleep(0.001)
"""


def test_follower_with_a_real_writer_appending_while_reading(tmp_path):
    path = tmp_path / "sglang.log"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "3000"])
    follower = LogFollower(str(path))
    classifier = LogClassifier()
    pieces = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            finished = proc.poll() is not None
            chunk = follower.read(max_bytes=4093)
            pieces.append(chunk)
            classifier.feed(chunk, now=time.monotonic())
            if finished and not chunk:
                break
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == 0
    assert "".join(pieces) == path.read_text(encoding="utf-8")
    classifier.flush()
    assert classifier.result()["lines_seen"] == 3000 and classifier.status == "starting"
