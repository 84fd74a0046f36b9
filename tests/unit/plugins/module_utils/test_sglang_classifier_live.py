# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The classifier asked the way a live wait asks it: after every line, while the log is still being written.

Synthetic lines written for these tests (never copied from the corpus): the settle after a crash
(``settled``, root cause refined by later lines, C++ ``what():``), crashes the log alone proves
(``log_quiet``), the import-chain rule, the warmup stage, and line assembly across every read boundary.
Every scenario is fed line by line, in random chunks, and with the state carried through JSON.
"""

from __future__ import annotations

import json
import random

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils._sglang_log import LogClassifier


def feedings(text, seed=0):
    """Ways a follower hands text over: whole, line by line, random chunks with JSON state hand-overs."""
    rng = random.Random(seed)
    yield "whole", [text], False
    yield "lines", text.splitlines(True), False
    chunks, pos = [], 0
    while pos < len(text):
        size = rng.randint(1, 97)
        chunks.append(text[pos:pos + size])
        pos += size
    yield "chunks", chunks, False
    yield "chunks+state", chunks, True


def run(text, quiet=False, seed=0):
    """Feed text every way; optionally call log_quiet() at the end. All ways must agree; returns the classifier."""
    results = []
    last = None
    for label, chunks, hand_over in feedings(text, seed):
        classifier = LogClassifier()
        for chunk in chunks:
            classifier.feed(chunk, now=0.0)
            if hand_over:
                classifier = LogClassifier(state=json.loads(json.dumps(classifier.to_state())))
        if quiet:
            classifier.log_quiet(now=0.0)
        results.append((label, classifier.result(), classifier.settled))
        last = classifier
    for label, result, settled in results[1:]:
        assert (result, settled) == (results[0][1], results[0][2]), label
    return last


def fields(classifier):
    res = classifier.result()
    return res["status"], res["stage"], res["signature"], res["error_line"]


LOAD = "[2031-02-03 04:05:06 TP1] Load weight begin. avail mem=61.20 GB\n"
SCHED = "[2031-02-03 04:05:09 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
FRAMES = ('  File "/opt/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 77, in run_scheduler_process\n'
          "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank)\n"
          '  File "/opt/venv/lib/python3.11/site-packages/sglang/srt/model_loader/loader.py", line 301, in load_model\n'
          "    model = _initialize_model(model_config)\n")


# --------------------------------------------------------------------------------------- fault 1: settle
def test_crash_is_not_settled_until_the_traceback_closes_and_the_root_cause_refines_it():
    classifier = LogClassifier()
    classifier.feed(LOAD + SCHED + FRAMES, now=0.0)
    assert fields(classifier) == ("crashed", "load_weights", "traceback", SCHED[:-1])
    assert classifier.settled is False
    events = classifier.feed("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 80.00 MiB.\n", now=0.1)
    assert [e["type"] for e in events] == ["signature"] and events[0]["signature"] == "cuda_oom"
    assert classifier.settled is True
    res = classifier.result()
    assert res["root_cause"] == "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 80.00 MiB."
    assert res["error_context"][-1] == "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 80.00 MiB."
    assert res["error_line"] == SCHED[:-1]


@pytest.mark.parametrize("cause, signature", [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB.", "cuda_oom"),
    ("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 3; 60.00 GiB total capacity)", "cuda_oom"),
    ("RuntimeError: NCCL error in: ../nccl.cpp:42, unhandled cuda error", "nccl_error"),
])
def test_sigquit_first_then_the_failing_ranks_traceback_refines(cause, signature):
    text = ("[2031-02-03 04:05:09] Received sigquit from a child process. It usually means the child failed.\n"
            + SCHED + FRAMES + cause + "\n")
    classifier = run(text)
    res = classifier.result()
    assert (res["status"], res["signature"], res["error_lineno"]) == ("crashed", signature, 1)
    assert res["root_cause"] == cause and classifier.settled


def test_sigquit_alone_is_not_settled_the_failing_ranks_traceback_is_expected():
    classifier = run("[2031-02-03 04:05:09] Received sigquit from a child process. It usually means the child failed.\n")
    assert classifier.status == "crashed" and classifier.settled is False


def test_cpp_what_line_is_the_root_cause():
    text = (LOAD + "terminate called after throwing an instance of 'c10::Error'\n"
            "  what():  CUDA error: out of memory\n"
            "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43\n")
    classifier = LogClassifier()
    classifier.feed(text.split("  what()")[0], now=0.0)
    assert classifier.status == "crashed" and classifier.result()["signature"] == "traceback"
    assert classifier.settled is False
    classifier = run(text)
    res = classifier.result()
    assert (res["status"], res["stage"], res["signature"]) == ("crashed", "load_weights", "cuda_oom")
    assert res["error_line"] == "terminate called after throwing an instance of 'c10::Error'"
    assert res["root_cause"] == "what():  CUDA error: out of memory"
    assert classifier.settled


def test_no_traceback_open_is_settled():
    assert run(LOAD).settled is True
    assert run(LOAD + "Traceback (most recent call last):\n" + FRAMES).settled is False


# --------------------------------------------------------------------------------------- fault 2: log alone
LAUNCHER_TB = ("Traceback (most recent call last):\n"
               '  File "/opt/venv/lib/python3.11/site-packages/sglang/launch_server.py", line 12, in <module>\n'
               "    server_args = prepare_server_args(sys.argv[1:])\n"
               '  File "/opt/venv/lib/python3.11/site-packages/sglang/srt/server_args.py", line 900, in __post_init__\n'
               "    self.check_server_args()\n"
               "ValueError: --tp-size 3 does not divide the number of attention heads (32)\n")


def test_closed_top_level_traceback_is_a_crash_when_the_log_goes_quiet():
    text = "[2031-02-03 04:05:00] server_args=ServerArgs(model_path='/m')\n" + LAUNCHER_TB
    assert run(text).status == "starting"        # not before the quiet
    classifier = run(text, quiet=True)
    res = classifier.result()
    assert (res["status"], res["stage"], res["signature"], res["error_lineno"]) == ("crashed", "start", "arg_error", 2)
    assert res["error_line"] == "Traceback (most recent call last):"
    assert res["root_cause"] == "ValueError: --tp-size 3 does not divide the number of attention heads (32)"


def test_open_traceback_at_stage_start_is_a_crash_when_quiet_but_not_later():
    head = "Traceback (most recent call last):\n" + LAUNCHER_TB.split("\n", 1)[1].rsplit("ValueError", 1)[0]
    res = run(head, quiet=True).result()
    assert (res["status"], res["stage"], res["error_lineno"]) == ("crashed", "start", 1)
    # later stages: a process may print a traceback and go on (warnings, probes), so only its end proves
    assert run(LOAD + head, quiet=True).status == "starting"


def test_thread_traceback_and_ignore_import_error_traceback_are_not_crashes_when_quiet():
    thread = (LOAD + "Exception in thread Thread-3 (_watch):\n" + LAUNCHER_TB)
    assert run(thread, quiet=True).status == "starting"
    ignored = (LOAD + "[2031-02-03 04:05:07 TP1] Ignore import error when loading sglang.srt.models.foo: failed:\n"
               + LAUNCHER_TB)
    assert run(ignored, quiet=True).status == "starting"


def test_quiet_never_turns_a_ready_log_into_a_crash():
    text = ("[2031-02-03 04:06:00] The server is fired up and ready to roll!\n" + LAUNCHER_TB)
    classifier = run(text, quiet=True)
    assert classifier.status == "ready" and classifier.result()["signature"] is None


def test_quiet_after_shell_exit_evidence_is_a_crash():
    text = (LOAD + "/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: "
            "There appear to be 2 leaked semaphore objects to clean up at shutdown\n")
    assert run(text).status == "starting"
    res = run(text, quiet=True).result()
    assert (res["status"], res["stage"], res["signature"], res["error_lineno"]) == ("crashed", "load_weights", "silent_exit", 2)


def test_quiet_then_more_lines_keep_refining():
    classifier = LogClassifier()
    classifier.feed("Traceback (most recent call last):\n"
                    '  File "/opt/venv/lib/python3.11/site-packages/sglang/launch_server.py", line 3, in <module>\n'
                    "    from sglang.srt.entrypoints.http_server import launch_server\n", now=0.0)
    assert classifier.log_quiet(now=5.0) is True and classifier.settled is False
    classifier.feed("ModuleNotFoundError: No module named 'sgl_kernel'\n", now=6.0)
    res = classifier.result()
    assert (res["signature"], res["error_lineno"], res["root_cause"]) == (
        "import_error", 1, "ModuleNotFoundError: No module named 'sgl_kernel'")
    assert classifier.settled
