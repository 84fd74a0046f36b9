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

from ansible_collections.llmops.sglang.plugins.module_utils.log._classifier import LogClassifier


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


@pytest.mark.parametrize("cause", [
    "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 3; 60.00 GiB total capacity)",
    "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 80.00 MiB.",
])
def test_sigquit_first_then_an_exception_line_alone_names_the_cause(cause):
    text = ("[2031-02-03 04:05:09] Received sigquit from a child process. It usually means the child failed.\n"
            "[2031-02-03 04:05:09] kill_process_tree called: parent_pid=7, include_parent=True\n" + cause + "\n")
    classifier = run(text)
    res = classifier.result()
    assert (res["status"], res["signature"], res["error_lineno"], res["root_cause"]) == ("crashed", "cuda_oom", 1, cause)
    assert classifier.settled


def test_sigquit_alone_is_not_settled_the_failing_ranks_traceback_is_expected():
    classifier = run("[2031-02-03 04:05:09] Received sigquit from a child process. It usually means the child failed.\n")
    assert classifier.status == "crashed" and classifier.settled is False


def test_cpp_what_line_is_the_root_cause():
    text = (LOAD + "terminate called after throwing an instance of 'c10::Error'\n"
            "  what():  CUDA error: out of memory\n"
            "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43\n")
    classifier = LogClassifier()
    classifier.feed(text.split("  what()", maxsplit=1)[0], now=0.0)
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


# --------------------------------------------------------------------------------------- fault 3: import chain
def import_chain(exception):
    return ("Traceback (most recent call last):\n"
            '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
            '  File "<frozen runpy>", line 88, in _run_code\n'
            '  File "/srv/py/lib/python3.12/site-packages/sglang/launch_server.py", line 7, in <module>\n'
            "    from sglang.srt.entrypoints.http_server import launch_server\n"
            '  File "/srv/py/lib/python3.12/site-packages/sglang/srt/entrypoints/http_server.py", line 51, in <module>\n'
            "    from sglang.srt.managers.io_struct import EmbeddingReqInput\n"
            '  File "<frozen importlib._bootstrap>", line 1360, in _find_and_load\n'
            '  File "/srv/py/lib/python3.12/site-packages/sglang/srt/managers/io_struct.py", line 33, in <module>\n'
            "    class EmbeddingReqInput(BaseReq):\n"
            + exception + "\n")


@pytest.mark.parametrize("exception", [
    "TypeError: unsupported operand type(s) for |: 'type' and 'NoneType'",
    "AttributeError: module 'torch.library' has no attribute 'custom_op'",
    "ImportError: cannot import name 'is_flashinfer_available' from 'sglang.srt.utils'",
    "ValueError: too many values to unpack (expected 2)",
])
def test_exception_while_launch_server_imports_its_modules_is_import_error(exception):
    for quiet in (False, True):
        classifier = run(import_chain(exception), quiet=quiet)
        if not quiet:
            classifier.flush(now=0.0)
        res = classifier.result()
        assert (res["status"], res["stage"], res["signature"], res["error_lineno"]) == ("crashed", "start", "import_error", 1)
        assert res["root_cause"] == exception


def test_same_exception_from_a_called_function_is_not_an_import_chain():
    text = ("Traceback (most recent call last):\n"
            '  File "<frozen runpy>", line 88, in _run_code\n'
            '  File "/srv/py/lib/python3.12/site-packages/sglang/launch_server.py", line 14, in <module>\n'
            "    launch_server(server_args)\n"
            '  File "/srv/py/lib/python3.12/site-packages/sglang/srt/entrypoints/http_server.py", line 900, in launch_server\n'
            "    tokenizer_manager = _launch_subprocesses(server_args)\n"
            "TypeError: unsupported operand type(s) for |: 'type' and 'NoneType'\n")
    res = run(text, quiet=True).result()
    assert (res["status"], res["signature"]) == ("crashed", "arg_error")   # a launcher TypeError before any stage


# --------------------------------------------------------------------------------------- fault 4: warmup
UP = ("[2031-02-03 04:07:00] INFO:     Started server process [4242]\n"
      "[2031-02-03 04:07:00] INFO:     Uvicorn running on http://127.0.0.1:31000 (Press CTRL+C to quit)\n")


def test_crash_after_the_http_server_is_up_is_in_warmup():
    text = (UP + "[2031-02-03 04:07:02 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
            '  File "/opt/sglang/python/sglang/srt/managers/scheduler.py", line 2301, in event_loop_overlap\n'
            "    batch_result = self.run_batch(batch)\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    res = run(text).result()
    assert (res["status"], res["stage"], res["signature"]) == ("crashed", "warmup", "device_error")
    assert [s["stage"] for s in res["stages"]] == ["start", "http_listening", "warmup"]
    # the process dying with no line at all in that window is also the warmup failing
    res = LogClassifier()
    res.feed(UP, now=0.0)
    res.process_exited(-6, now=1.0)
    assert (res.status, res.stage, res.result()["signature"]) == ("crashed", "warmup", "process_exited")


def test_old_layout_first_prefill_forward_is_the_warmup_request():
    """Before 0.3 the tp worker ran the warmup request's prefill in forward_step -> forward_fill_batch."""
    text = ("[gpu_id=0] Memory pool end. avail mem=7.10 GB\n"
            "[gpu_id=0] max_total_num_tokens=81234, max_prefill_tokens=16384\n"
            "Exception in ModelTpServer:\n"
            "Traceback (most recent call last):\n"
            '  File "/usr/lib/python3/site-packages/sglang/srt/managers/controller/tp_worker.py", line 188, in exposed_step\n'
            "    self.forward_step()\n"
            '  File "/usr/lib/python3/site-packages/sglang/srt/managers/controller/tp_worker.py", line 204, in forward_step\n'
            "    self.forward_fill_batch(new_batch)\n"
            "RuntimeError: CUDA error: device-side assert triggered\n")
    res = run(text).result()
    assert (res["status"], res["stage"], res["signature"], res["error_lineno"]) == ("crashed", "warmup", "device_error", 3)


def test_stalled_with_the_http_server_up_stays_http_listening():
    assert run(UP, quiet=True).result()["stage"] == "http_listening"


# --------------------------------------------------------------------------------------- fault 5: line assembly
def progress_bars(ranks, updates):
    """Progress bars of several ranks written into one file: carriage-return segments without a newline."""
    return "".join("\rLoading safetensors checkpoint shards: %3d%% Completed | %d/%d [00:%02d<00:07, 1.31it/s] (rank %d)"
                   % (100 * step // updates, step, updates, step % 60, rank)
                   for step in range(updates) for rank in range(ranks))


MARKER = "[2031-02-03 04:05:09 DP1 TP13 EP13] Scheduler hit an exception: Traceback (most recent call last):"


def split_everywhere(text, step=1):
    """Results of feeding text in two chunks split at every position (and with a JSON hand-over between)."""
    for cut in range(0, len(text) + 1, step):
        classifier = LogClassifier()
        classifier.feed(text[:cut], now=0.0)
        if cut % 2:
            classifier = LogClassifier(state=json.loads(json.dumps(classifier.to_state())))
        classifier.feed(text[cut:], now=0.0)
        yield cut, classifier.result()


def test_error_line_is_the_line_as_written_across_every_boundary():
    lines = ["[2031-02-03 04:05:0%d DP%d TP%d EP%d] Load weight begin. avail mem=60.1 GB" % (r % 10, r // 8, r, r)
             for r in range(0, 16, 5)]
    long_line = progress_bars(8, 2) + MARKER
    text = "\n".join(lines + [long_line] + FRAMES.splitlines() + ["torch.OutOfMemoryError: CUDA out of memory."]) + "\n"
    assert len(long_line) > 1500
    for cut, res in split_everywhere(text):
        assert (res["status"], res["signature"], res["error_lineno"]) == ("crashed", "cuda_oom", 5), cut
        assert res["error_line"] == long_line, cut


def test_a_line_over_the_cap_keeps_its_last_segment_whole_across_every_boundary(monkeypatch):
    """Lines over the cap keep head + marker + tail; the tail starts at a carriage return, so the segment a
    terminal shows (the glued crash marker) is never cut, for any chunking."""
    from ansible_collections.llmops.sglang.plugins.module_utils.log import _classifier as sglang_log
    monkeypatch.setattr(sglang_log, "LINE_HEAD", 40)
    monkeypatch.setattr(sglang_log, "LINE_TAIL", 300)
    long_line = progress_bars(3, 4) + MARKER
    text = "[2031-02-03 04:05:00 TP0] Load weight begin.\n" + long_line + "\n" + FRAMES
    expected = None
    for cut, res in split_everywhere(text):
        assert res["status"] == "crashed" and res["error_lineno"] == 2, cut
        if expected is None:
            expected = res
            head, tail = res["error_line"].split(sglang_log.LINE_MARK)
            assert head == long_line[:40] and 0 < len(tail) <= 300
            assert long_line.endswith("\r" + tail) and tail.endswith(MARKER)
        assert res == expected, cut


# --------------------------------------------------------------------------------------- rules and their gates
def corpus_lines():
    import os
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "sglang-logs")
    for name in sorted(os.listdir(fixtures)):
        path = os.path.join(fixtures, name, "server.log")
        if os.path.isfile(path):
            with open(path, "rb") as handle:
                yield from handle.read().decode("utf-8", "replace").split("\n")


GATE_EXAMPLES = (
    "Exception: Capture cuda graph failed: CUDA out of memory",
    "RuntimeError: Capture CUDA graph failed: invalid argument",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    "RuntimeError: No supported CUDA architectures found for major versions [9, 10].",
    "[2031-02-03 04:05:09] ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30000)",
    "Floating point exception (core dumped)",
    "Aborted (core dumped)",
)


def test_every_rule_matches_only_lines_that_hold_one_of_its_gates():
    """A phrase and its gate cannot drift apart: every line of the corpus (and the examples above) that a
    rule's pattern matches holds one of that rule's gates, and every gate is in the prefilter."""
    from ansible_collections.llmops.sglang.plugins.module_utils.log import _rules as rules
    from ansible_collections.llmops.sglang.plugins.module_utils.log._classifier import _gate_re
    checked = 0
    for line in list(corpus_lines()) + list(GATE_EXAMPLES):
        for rule in rules.PHRASE_RULES + rules.STAGE_RULES:
            if rule.gates and rule.pattern.search(line):
                checked += 1
                assert any(gate in line for gate in rule.gates), (rule.pattern.pattern, line[-200:])
    assert checked > 1000
    prefilter = _gate_re("start", ())
    for rule in rules.PHRASE_RULES + rules.STAGE_RULES:
        for gate in rule.gates:
            assert prefilter.search(gate), gate


def test_the_factored_gate_search_finds_what_a_plain_alternation_finds():
    """The prefilter is a trie of its literals (faster in Python's re): on every corpus line, at every stage, it
    finds a gate exactly where the plain alternation of the same literals does."""
    import re
    from ansible_collections.llmops.sglang.plugins.module_utils.log import _rules as rules
    lines = list(corpus_lines()) + list(GATE_EXAMPLES) + ["E", "Err", "xceptio", "Traceback", ""]
    for stage in rules.STAGES:
        gates = rules.gates_after(stage)
        plain = re.compile("|".join(re.escape(g) for g in gates))
        factored = re.compile(rules.literal_alternation(gates))
        for line in lines:
            a, b = plain.search(line), factored.search(line)
            assert (a and a.start()) == (b and b.start()), (stage, line[-200:])
    # a word that is a prefix of another is kept (Err and Error both match "Err")
    assert re.fullmatch(rules.literal_alternation(["Error", "Err"]), "Err")


def test_argparse_error_is_read_in_the_window_after_usage():
    text = ("usage: launch_server.py [-h] --model-path MODEL_PATH [--tp-size TP_SIZE]\n"
            "                        [--port PORT]\n"
            "launch_server.py: error: unrecognized arguments: --tp 3\n")
    res = run(text).result()
    assert (res["status"], res["signature"], res["error_lineno"]) == ("crashed", "arg_error", 3)
    # the same words without argparse's usage line are not read
    assert run("[2031-02-03 04:05:00] note: error: argument parsing of the chat template\n").status == "starting"


# --------------------------------------------------------------------------------------- the corpus, live
def corpus_cases():
    import os
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "sglang-logs")
    for name in sorted(os.listdir(fixtures)):
        if os.path.isfile(os.path.join(fixtures, name, "expected.json")):
            with open(os.path.join(fixtures, name, "expected.json"), encoding="utf-8") as handle:
                expected = json.load(handle)
            with open(os.path.join(fixtures, name, "server.log"), "rb") as handle:
                data = handle.read()
            yield name, expected, data[expected.get("new_run_offset_bytes") or 0:].decode("utf-8", "replace")


@pytest.mark.parametrize("name, expected, text", list(corpus_cases()), ids=[case[0] for case in corpus_cases()])
def test_corpus_line_by_line_with_the_log_going_quiet_after_any_line(name, expected, text):
    """A live wait with no process to watch: lines arrive one by one and the log may go quiet after any of
    them. A quiet never turns a ready or stalled recording into a crash; a crash it decides is the recorded
    one (first error line), and the lines that follow refine it to the recorded signature."""
    classifier = LogClassifier()
    decided = None
    for line in text.splitlines(True):
        classifier.feed(line, now=0.0)
        if decided is not None:
            decided.feed(line, now=0.0)
            continue
        state = classifier._s   # pylint: disable=protected-access
        if state.status == "starting" and (state.candidate is not None or state.exit_pending is not None):
            quiet = LogClassifier(state=json.loads(json.dumps(classifier.to_state())))
            if quiet.log_quiet(now=0.0):
                assert expected["outcome"] == "crashed", (name, quiet.result()["error_line"])
                assert quiet.result()["error_line"] == expected["first_error_line"], name
                decided = quiet
    for live in (classifier, decided):
        if live is None:
            continue
        live.log_quiet(now=0.0)
        res = live.result()
        outcome = {"starting": "stalled"}.get(res["status"], res["status"])
        assert (outcome, res["stage"], res["signature"], res["error_line"]) == (
            expected["outcome"], expected["stage"], expected["signature"], expected["first_error_line"]), name


# --------------------------------------------------------------------------------------- repeated benign lines
@pytest.mark.parametrize("name, expected, text", list(corpus_cases()), ids=[case[0] for case in corpus_cases()])
def test_remembering_benign_lines_changes_no_result(name, expected, text):
    """The memory of lines that changed nothing (digits blanked) only saves time: the same events and result
    without it."""
    remembering, reading = LogClassifier(), LogClassifier()
    reading._inert = None   # pylint: disable=protected-access
    events = [c.feed(text, now=0.0) + c.flush(now=0.0) for c in (remembering, reading)]
    assert events[0] == events[1] and remembering.result() == reading.result(), name


def test_health_checks_during_a_hung_warmup_then_the_warmup_request_and_its_crash():
    checks = "".join('[2031-02-03 04:07:%02d] INFO:     127.0.0.1:%d - "GET /health HTTP/1.1" 503 Service Unavailable\n'
                     % (i % 60, 40000 + i) for i in range(300))
    text = (UP + checks + '[2031-02-03 04:08:00] INFO:     127.0.0.1:41999 - "POST /generate HTTP/1.1" 200 OK\n'
            + checks + "[2031-02-03 04:08:09 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
            "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    res = run(text).result()
    assert (res["status"], res["stage"], res["signature"], res["error_lineno"]) == ("crashed", "warmup", "device_error", 604)
    assert [s["stage"] for s in res["stages"]] == ["start", "http_listening", "warmup"]
