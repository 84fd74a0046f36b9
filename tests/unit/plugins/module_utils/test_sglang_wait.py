# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of one wait round (and of many rounds carrying state) over real corpus logs, real files, real processes and a
real HTTP server. The systemd unit watch is driven by recorded `systemctl show` / `journalctl` text through
run_command (there is no systemd on the CI machine; never a fake systemctl binary)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.wait import _round as wait
from ansible_collections.llmops.sglang.plugins.module_utils.log._classifier import classify_text
from ansible_collections.llmops.sglang.plugins.module_utils.wait import _sources as sources
from ansible_collections.llmops.sglang.plugins.module_utils.wait._sources import JournalStream
from ansible_collections.llmops.sglang.plugins.module_utils.wait._state import WaitState
from ansible_collections.llmops.sglang.plugins.module_utils.wait import _decide as decide_rules
from ansible_collections.llmops.sglang.plugins.module_utils.wait import _observe as observe
from ansible_collections.llmops.sglang.plugins.module_utils.wait._round import WaitParams, WaitRound
from ansible_collections.llmops.sglang.plugins.module_utils.wait._report import CRASH_HINTS, root_cause

CORPUS = Path(__file__).resolve().parents[3] / "fixtures" / "sglang-logs"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "server.log").is_file())

# A writer process: appends bytes [start:] of a corpus log in `chunks` pieces, `delay` s apart, then behaves as the
# recorded server did: "exit1" (crash), "kill" (SIGKILL itself: killed from outside), "hang" (stays alive).
WRITER = r"""
import os, signal, sys, time
path, src, start, chunks, delay, end = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
data = open(src, "rb").read()[start:]
step = max(1, len(data) // chunks + 1)
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(0, len(data), step):
    os.write(fd, data[i:i + step])
    time.sleep(delay)
os.close(fd)
if end == "exit1":
    sys.exit(1)
if end == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(60)
"""


def expected(case):
    return json.loads((CORPUS / case / "expected.json").read_text())


def corpus_bytes(case):
    return (CORPUS / case / "server.log").read_bytes()


def run_until_done(params, round_seconds=1.0, limit=60.0, state_through_json=True, state=None):
    """Run rounds like the action plugin does, passing the state through JSON between rounds."""
    t_end = time.monotonic() + limit
    while True:
        res = WaitRound(params, state=state).run(round_seconds)
        state = res.pop("_state")
        if state_through_json:
            state = json.loads(json.dumps(state))
        if res["status"] in wait.TERMINAL or time.monotonic() > t_end:
            return res, state


def spawn_writer(path, case, start=0, chunks=8, delay=0.02, end="hang"):
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(CORPUS / case / "server.log"), str(start),
                             str(chunks), str(delay), end])


def end_action(exp):
    if exp["outcome"] != "crashed":
        return "hang"
    return "kill" if exp["signature"] == "silent_exit" else "exit1"


@pytest.mark.parametrize("case", CASES)
def test_every_corpus_case_through_rounds_with_a_real_writer_process(tmp_path, case):
    """Outcome, stage, signature and first error line of each case, seen live through the wait rounds."""
    exp = expected(case)
    log = tmp_path / "server.log"
    offset = exp.get("new_run_offset_bytes") or 0
    data = corpus_bytes(case)
    if offset:
        log.write_bytes(data[:offset])  # an earlier run already in the appended file
    log_offset = exp.get("stale_offset_bytes", offset) if "stale_offset_bytes" in exp else (offset if offset else None)
    if log_offset is None:
        log_offset = 0
    proc = spawn_writer(log, case, start=offset, end=end_action(exp))
    try:
        params = WaitParams(log_path=str(log), log_offset=log_offset, pid=proc.pid, timeout=60,
                            stall_timeout=2 if exp["outcome"] == "stalled" else 30, sleep=0.1, host="node1")
        res, _state = run_until_done(params)
    finally:
        proc.kill()
        proc.wait()
    assert res["status"] == exp["outcome"], res["msg"]
    assert res["stage"] == exp["stage"], res["msg"]
    assert res["signature"] == exp["signature"], res["msg"]
    if exp["outcome"] == "crashed":
        assert res["error_line"] == exp["first_error_line"]
        assert res["msg"].startswith("SGLang on node1 crashed after ") and exp["signature"] in res["msg"]
        assert str(log) in res["msg"] or exp["first_error_line"] is None
    assert res["ready"] is (exp["outcome"] == "ready")
    assert offset < res["log_offset_end"] <= len(data)


@pytest.mark.parametrize("case", CASES)
def test_rounds_never_lose_or_double_count_a_line(tmp_path, case):
    """Random byte chunks (splitting UTF-8 characters, CR progress bars and lines) appended between rounds that carry
    their state through JSON give exactly the classifier's verdict on the whole text."""
    data = corpus_bytes(case)
    exp = expected(case)
    start = exp.get("new_run_offset_bytes") or 0
    rng = random.Random(case)
    log = tmp_path / "server.log"
    log.write_bytes(data[:start])
    params = WaitParams(log_path=str(log), log_offset=start, timeout=600, stall_timeout=0, sleep=0.05)
    state = None
    pos = start
    rounds = 0
    res = None
    while pos < len(data):
        n = min(rng.choice([1, 2, 3, 7, 64, 500, 4096, 20000]), max(1, (len(data) - start) // 3), 64 if not rounds else 1 << 30)
        with open(log, "ab") as f:
            f.write(data[pos:pos + n])
        pos += n
        res = WaitRound(params, state=state).run(0)
        rounds += 1
        state = json.loads(json.dumps(res.pop("_state")))
        if res["status"] in wait.TERMINAL:
            break
    whole = classify_text(data[start:pos].decode("utf-8", "replace"))
    got = WaitRound(params, state=state).classifier.result()
    if res["status"] not in wait.TERMINAL:
        # the whole text was seen: compare after flushing the pending partial line too
        cls = WaitRound(params, state=state).classifier
        cls.flush()
        got = cls.result()
    assert got["lines_seen"] == whole["lines_seen"] or res["status"] in wait.TERMINAL
    # The pseudo-stage "start" is stamped by the classifier on the first line it sees when fed piecewise and on the
    # first stage line when fed a whole text (a classifier detail, reproducible without this module); compare the rest.
    got_stages = [(s["stage"], s["lineno"]) for s in got["stages"] if s["stage"] != "start"]
    whole_stages = [(s["stage"], s["lineno"]) for s in whole["stages"] if s["stage"] != "start"]
    assert got_stages == whole_stages[:len(got_stages)]
    assert len(got_stages) == len(whole_stages) or res["status"] in wait.TERMINAL
    if got["status"] == "crashed":
        assert (got["signature"], got["error_line"], got["error_lineno"]) == (
            whole["signature"], whole["error_line"], whole["error_lineno"])
    assert len(json.dumps(state)) < 200000, "state must stay small"
    assert rounds >= 2


def test_file_appears_late_and_default_offset(tmp_path):
    log = tmp_path / "late" / "server.log"
    log.parent.mkdir()
    case = "gb10-dflash-spec-decoding-ready"

    def later():
        time.sleep(0.6)
        with open(log, "wb") as f:
            f.write(corpus_bytes(case))

    th = threading.Thread(target=later)
    th.start()
    res, _state = run_until_done(WaitParams(log_path=str(log), timeout=20, stall_timeout=10, sleep=0.1))
    th.join()
    assert res["status"] == "ready" and res["log_reset"] in ("appeared", None)
    assert res["elapsed"] >= 0.5


def test_default_offset_skips_an_old_ready_line(tmp_path):
    """A finished earlier run in the appended log (with its 'fired up' line) never counts: status must not be ready."""
    log = tmp_path / "server.log"
    log.write_bytes(corpus_bytes("gb10-dflash-spec-decoding-ready"))
    res, _state = run_until_done(WaitParams(log_path=str(log), timeout=1, stall_timeout=0, sleep=0.1))
    assert res["status"] == "timeout" and res["stage"] == "start"
    assert "did not become ready within 1s" in res["msg"]
    assert "nothing was written to %s since the wait started (offset %d)" % (log, log.stat().st_size) in res["msg"]
    # nothing read: no empty quote of a "last log line", and the role's variable is named beside the option
    assert 'no log line yet' in res["msg"] and 'last log line: ""' not in res["msg"]
    assert "raise timeout (sglang_service_wait_timeout in the sglang_service role)" in res["msg"]


def test_truncation_mid_wait_reads_new_content_from_zero(tmp_path):
    """copytruncate-style rotation: the file is emptied and the server keeps writing from byte 0."""
    log = tmp_path / "server.log"
    data = corpus_bytes("rtx3090-oom-attention-workspace-at-graph-stage")
    old = corpus_bytes("gb10-dflash-spec-decoding-ready")
    log.write_bytes(old)
    params = WaitParams(log_path=str(log), timeout=20, stall_timeout=10, sleep=0.1)
    res = WaitRound(params).run(0.2)
    state = res.pop("_state")
    assert res["status"] == "starting"
    with open(log, "r+b") as f:
        f.truncate(0)
        f.write(data)
    res, _state = run_until_done(params, state=state)
    assert res["log_reset"] == "truncated"
    exp = expected("rtx3090-oom-attention-workspace-at-graph-stage")
    assert res["status"] == "crashed" and res["error_line"] == exp["first_error_line"]


def test_replaced_file_is_read_from_zero(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(corpus_bytes("gb10-dflash-spec-decoding-ready"))
    params = WaitParams(log_path=str(log), timeout=20, stall_timeout=10, sleep=0.1)
    res = WaitRound(params).run(0.1)
    state = json.loads(json.dumps(res.pop("_state")))
    os.rename(log, tmp_path / "server.log.1")  # logrotate's create mode
    log.write_bytes(corpus_bytes("warmup-502-initialization-failed-killed"))
    res = WaitRound(params, state=state).run(2)
    assert res["log_reset"] == "replaced" and res["status"] == "crashed"
    assert res["signature"] == expected("warmup-502-initialization-failed-killed")["signature"]


def test_pid_exit_without_log_evidence_is_process_exited_within_half_a_second(tmp_path):
    """A real process that exits with 3 when the fake time reaches 0.8 s (injected clock and sleeper)."""
    log = tmp_path / "server.log"
    log.write_text("[2026-06-11 05:10:02 TP0] Init torch distributed begin.\n")
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline(); sys.exit(3)"], stdin=subprocess.PIPE)

    def exit_child():
        child.stdin.write(b"exit\n")
        child.stdin.close()
        child.wait()

    ft = FakeTime()
    ft.at(0.8, exit_child)
    params = WaitParams(log_path=str(log), log_offset=0, pid=child.pid, timeout=20, sleep=0.1, host="node1")
    try:
        res = WaitRound(params, clock=ft.clock, sleeper=ft.sleep).run(None)
    finally:
        child.kill()
        child.wait()
    assert res["status"] == "crashed" and res["signature"] == "process_exited"
    assert res["stage"] == "init_distributed"
    assert res["exited"]["by"] == "pid" and str(child.pid) in res["exited"]["reason"]
    assert 0.8 <= res["elapsed"] <= 0.8 + params.sleep + decide_rules.EXIT_DRAIN + 2 * wait.INNER_POLL
    assert "process %d" % child.pid in res["msg"]


def test_pid_only_watch_with_url_and_no_log(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.4)"])
    try:
        res, _state = run_until_done(WaitParams(pid=child.pid, url="http://127.0.0.1:9", timeout=10, sleep=0.1))
    finally:
        child.wait()
    assert res["status"] == "crashed" and res["signature"] == "process_exited" and res["log_source"] is None


# ------------------------------------------------------------------------------------------------ HTTP

class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        srv = self.server
        if self.path.startswith("/health"):
            code = 200 if srv.healthy.is_set() else 503
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if srv.api_key and self.headers.get("Authorization") != "Bearer " + srv.api_key:
            self.send_response(401)
            body = b'{"error":"Unauthorized"}'
        else:
            self.send_response(200)
            body = json.dumps({"object": "list", "data": [{"id": srv.model, "object": "model", "owned_by": "sglang"}]}).encode()
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.healthy = threading.Event()
    srv.api_key = None
    srv.model = "Qwen/Qwen3-8B"
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    srv.url = "http://127.0.0.1:%d" % srv.server_address[1]
    yield srv
    srv.shutdown()
    srv.server_close()


def test_ready_line_waits_for_health_200(tmp_path, server):
    log = tmp_path / "server.log"
    log.write_bytes(corpus_bytes("gb10-dflash-spec-decoding-ready"))
    params = WaitParams(log_path=str(log), log_offset=0, url=server.url, served_model_name="Qwen/Qwen3-8B", timeout=20,
                        sleep=0.1)
    res = WaitRound(params).run(0.5)
    assert res["status"] == "starting" and res["stage"] == "ready"  # the log says ready, /health still 503
    assert res["http"]["health"]["status"] == 503 and res["models"] == ["Qwen/Qwen3-8B"]
    state = res.pop("_state")
    threading.Timer(0.3, server.healthy.set).start()
    res = WaitRound(params, state=state).run(5)
    assert res["status"] == "ready" and res["http"]["health"]["status"] == 200


def test_no_log_health_200_is_ready(server):
    server.healthy.set()
    res, _state = run_until_done(WaitParams(url=server.url, timeout=5, sleep=0.1))
    assert res["status"] == "ready" and res["models"] == ["Qwen/Qwen3-8B"] and res["log_source"] is None


def test_api_key_missing_fails_at_once_as_auth_problem(server):
    server.api_key = "sk-secret"
    server.healthy.set()
    t0 = time.monotonic()
    res, _state = run_until_done(WaitParams(url=server.url, timeout=30, sleep=0.1, host="node1"))
    assert time.monotonic() - t0 < 2
    assert res["status"] == "error" and "HTTP 401" in res["msg"] and "api_key" in res["msg"]
    res, _state = run_until_done(WaitParams(url=server.url, api_key="sk-secret", timeout=5, sleep=0.1))
    assert res["status"] == "ready"


def test_wrong_served_model_fails(server):
    server.healthy.set()
    res, _state = run_until_done(WaitParams(url=server.url, served_model_name="glm-5", timeout=5, sleep=0.1))
    assert res["status"] == "error" and "Qwen/Qwen3-8B" in res["msg"] and "glm-5" in res["msg"]


def test_ready_probe_log_ignores_health(tmp_path, server):
    log = tmp_path / "server.log"
    log.write_bytes(corpus_bytes("gb10-dflash-spec-decoding-ready"))
    res, _state = run_until_done(WaitParams(log_path=str(log), log_offset=0, url=server.url, ready_probe="log", timeout=5,
                                            sleep=0.1))
    assert res["status"] == "ready" and res["http"]["health"]["status"] == 503


# ------------------------------------------------------------------------------------------------ stall / timeout

def test_stall_at_nccl_init_names_the_stage(tmp_path):
    case = "gb200-two-node-hang-after-nccl-version"
    log = tmp_path / "server.log"
    log.write_bytes(corpus_bytes(case))
    res, _state = run_until_done(WaitParams(log_path=str(log), log_offset=0, timeout=30, stall_timeout=1, sleep=0.1,
                                            host="node1"))
    assert res["status"] == "stalled" and res["stage"] == expected(case)["stage"]
    assert "stalled at stage init_distributed" in res["msg"] and "NCCL" in res["msg"]
    assert 1.0 <= res["elapsed"] < 2.0


def test_stall_off_gives_timeout(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(corpus_bytes("tp2-stuck-in-cuda-graph-capture"))
    res, _state = run_until_done(WaitParams(log_path=str(log), log_offset=0, timeout=1, stall_timeout=0, sleep=0.1))
    assert res["status"] == "timeout" and res["stage"] == "cuda_graph" and res["log_tail"]
    assert 'last log line: "[' in res["msg"] and "no log line yet" not in res["msg"]


def test_cut_short_traceback_is_not_sent_to_its_last_line(tmp_path):
    """A process killed while writing its traceback leaves no exception line: the advice must not point at one."""
    log = tmp_path / "server.log"
    log.write_bytes(b"[2026-06-11 05:10:00] server_args=ServerArgs(model_path='m')\n"
                    b"[2026-06-11 05:10:02 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                    b'  File "/opt/sglang/venv/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 2914, in run\n')
    res, _state = run_until_done(WaitParams(log_path=str(log), log_offset=0, timeout=5, stall_timeout=0, sleep=0.1,
                                            pid=999999999))
    assert res["status"] == "crashed"
    assert "the traceback was cut short" in res["msg"] and "its last line names the root cause" not in res["msg"]
    assert res["root_cause"] is None


def test_root_cause_is_the_one_the_message_names(tmp_path):
    """A chained traceback (transformers re-raises the hub's error as OSError): the result's root_cause, which the run's
    table shows, is the exception the message names after "root cause:", not the wrapper on the traceback's last line."""
    log = tmp_path / "server.log"
    log.write_bytes(corpus_bytes("bad-model-path-oserror-no-timestamps"))
    res, _state = run_until_done(WaitParams(log_path=str(log), log_offset=0, timeout=10, stall_timeout=0, sleep=0.1,
                                            pid=999999999))
    assert res["status"] == "crashed"
    assert res["root_cause"].startswith("huggingface_hub.errors.HFValidationError: Repo id must be in the form")
    # the traceback's last exception line, the one the table showed before
    assert [x for x in res["error_context"] if x.startswith(("OSError: ", "huggingface_hub."))][-1].startswith("OSError: ")
    assert 'root cause: "%s' % res["root_cause"][:60] in res["msg"]


# ------------------------------------------------------------------------------------------------ node rank >= 1

def test_node_rank_1_ready_after_kv_cache_and_quiet(tmp_path):
    """Past the KV cache, a rank >= 1 is ready after RANK_SETTLE_SECONDS of quiet (injected clock and sleeper)."""
    text = ("[2026-06-11 05:10:02 TP8] Init torch distributed begin.\n"
            "[2026-06-11 05:10:04 TP8] Load weight begin. avail mem=78.20 GB\n"
            "[2026-06-11 05:11:04 TP8] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=12.1 GB\n"
            "[2026-06-11 05:11:05 TP8] KV Cache is allocated. #tokens: 400000, K size: 20 GB, V size: 20 GB\n"
            "[2026-06-11 05:11:05 TP8] Memory pool end. avail mem=6.1 GB\n")
    log = tmp_path / "server.log"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        params = WaitParams(log_path=str(log), log_offset=0, pid=child.pid, node_rank=1, timeout=100, sleep=0.1)
        log.write_text(text.split("Load weight end", maxsplit=1)[0])
        ft = FakeTime()
        res = WaitRound(params, clock=ft.clock, sleeper=ft.sleep).run(decide_rules.RANK_SETTLE_SECONDS + 1)
        assert res["status"] == "starting" and res["stage"] == "load_weights"  # quiet, but not yet past weights
        state = res.pop("_state")
        with open(log, "a", encoding="utf-8") as f:
            f.write(text[len(text.split("Load weight end", maxsplit=1)[0]):])
        t_kv = ft.now
        res = WaitRound(params, state=state, clock=ft.clock, sleeper=ft.sleep).run(None)
        assert res["status"] == "ready" and "node rank 1" in res["msg"]
        assert decide_rules.RANK_SETTLE_SECONDS <= ft.now - t_kv <= decide_rules.RANK_SETTLE_SECONDS + 2 * params.sleep
    finally:
        child.kill()
        child.wait()


def test_node_rank_1_scheduler_line_is_ready_at_once_but_exit_is_a_crash(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2026-06-11 05:11:05 TP8] Memory pool end. avail mem=6.1 GB\n"
                   "[2026-06-11 05:11:30 TP8] max_total_num_tokens=400000, chunked_prefill_size=8192, available_gpu_mem=5.2 GB\n")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        res = WaitRound(WaitParams(log_path=str(log), log_offset=0, pid=child.pid, node_rank=1, timeout=10,
                                   sleep=0.1)).run(None)
        assert res["status"] == "ready" and res["elapsed"] < 1.0
    finally:
        child.kill()
        child.wait()
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, pid=child.pid, node_rank=1, timeout=10, sleep=0.1)).run(None)
    assert res["status"] == "crashed"


# ------------------------------------------------------------------------------------------------ systemd unit (recorded text)

RUNNING = ("MainPID=41210\nExecMainPID=41210\nExecMainCode=0\nExecMainStatus=0\nResult=success\nNRestarts=0\n"
           "LoadState=loaded\nActiveState=active\nSubState=running\nInvocationID=2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e\n")
AUTO_RESTART = (RUNNING.replace("MainPID=41210\nExecMainPID", "MainPID=0\nExecMainPID").replace("ExecMainCode=0", "ExecMainCode=1")
                .replace("ExecMainStatus=0", "ExecMainStatus=1").replace("Result=success", "Result=exit-code")
                .replace("ActiveState=active", "ActiveState=activating").replace("SubState=running", "SubState=auto-restart"))
RESTARTED = RUNNING.replace("NRestarts=0", "NRestarts=1").replace("2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e", "9a8b7c6d5e4f40312a1b2c3d4e5f6071")


class Recorded:
    """run_command stand-in that answers with recorded `systemctl show` / `journalctl` output in sequence."""

    def __init__(self, shows, journal_chunks=()):
        self.shows = list(shows)
        self.journal = list(journal_chunks)
        self.calls = []
        self.cursor = 0

    def __call__(self, argv):
        self.calls.append(list(argv))
        if os.path.basename(argv[0]) == "systemctl":
            text = self.shows.pop(0) if len(self.shows) > 1 else self.shows[0]
            return 0, text, ""
        if os.path.basename(argv[0]) == "journalctl":
            if not self.journal:
                return 0, "", ""
            text = self.journal.pop(0)
            self.cursor += 1
            return 0, text + "-- cursor: s=abc;i=%x\n" % self.cursor, ""
        raise AssertionError("unexpected command %r" % argv)


def test_unit_failing_with_journal_traceback_prefers_log_signature():
    case = "rtx3090-oom-attention-workspace-at-graph-stage"
    text = corpus_bytes(case).decode("utf-8")
    lines = text.splitlines(True)
    rec = Recorded([RUNNING, RUNNING, AUTO_RESTART], ["".join(lines[:5]), "", "".join(lines[5:])])
    params = WaitParams(unit="sglang.service", timeout=10, sleep=0.05, host="node1")
    res = WaitRound(params, run_command=rec).run(None)
    assert res["status"] == "crashed" and res["log_source"] == "journal"
    assert res["signature"] == expected(case)["signature"]
    assert res["error_line"] == expected(case)["first_error_line"]
    assert "journal of sglang.service, InvocationID 2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e" in res["msg"]
    journal_calls = [c for c in rec.calls if os.path.basename(c[0]) == "journalctl"]
    assert all("_SYSTEMD_INVOCATION_ID=2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e" in c for c in journal_calls)
    assert "--after-cursor" in journal_calls[1]


def test_unit_restart_without_log_evidence_is_unit_failed(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2026-06-11 05:10:02] server_args=ServerArgs(model_path='/models/x', custom_sigquit_handler=None)\n")
    rec = Recorded([RUNNING, RUNNING, RESTARTED])
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, unit="sglang.service", timeout=10, sleep=0.05,
                               host="node1"), run_command=rec).run(None)
    assert res["status"] == "crashed" and res["signature"] == "unit_failed"
    assert "NRestarts 0 -> 1" in res["msg"] and res["unit"]["NRestarts"] == 1
    assert "systemctl status" in res["msg"]


def test_unit_already_failed_at_first_look():
    failed = AUTO_RESTART.replace("ActiveState=activating", "ActiveState=failed").replace("SubState=auto-restart", "SubState=failed")
    rec = Recorded([failed], ["Traceback (most recent call last):\n  File \"x.py\", line 1\nModuleNotFoundError: No module named 'sgl_kernel'\n"])
    res = WaitRound(WaitParams(unit="sglang.service", timeout=10, sleep=0.05), run_command=rec).run(None)
    assert res["status"] == "crashed" and res["exited"]["exit_code"] == 1
    assert res["signature"] in ("import_error", "traceback", "unit_failed")


# ------------------------------------------------------------------------------------------------ state, check mode, misc

def test_zero_second_round_is_one_probe_pass(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(corpus_bytes("tp2-stuck-in-cuda-graph-capture"))
    ft = FakeTime()
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, timeout=100, sleep=0.25), clock=ft.clock,
                    sleeper=ft.sleep).run(0)
    assert ft.now == 1000.0  # never slept
    assert res["status"] == "starting" and res["stage"] == "cuda_graph"
    assert res["msg"].startswith("SGLang on ") and "still starting" in res["msg"]


class FakeTime:
    """Injected clock and sleeper: time moves only when the round sleeps (plus `tick` per clock read, to stand for
    the CPU time of reading); `at` runs callbacks once the fake time reaches them."""

    def __init__(self, tick=0.0):
        self.now, self.tick, self.pending, self.sleeps = 1000.0, tick, [], []

    def clock(self):
        self.now += self.tick
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds
        for item in [p for p in self.pending if p[0] <= self.now]:
            self.pending.remove(item)
            item[1]()

    def at(self, delay, func):
        self.pending.append((self.now + delay, func))


def line_events(res):
    return [e["text"] for e in res["_events"] if e["kind"] == "line"]


def test_round_returns_early_on_stage_change(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("")
    params = WaitParams(log_path=str(log), timeout=100, sleep=0.25)
    ft = FakeTime()
    ft.at(0.3, lambda: log.open("a", encoding="utf-8").write("[2026-06-11 05:10:02 TP0] Init torch distributed begin.\n"))
    t0 = ft.now
    res = WaitRound(params, clock=ft.clock, sleeper=ft.sleep).run(10)
    took = ft.now - t0
    # returns LINGER seconds after the change (so a crash right after a stage line is caught in the same round)
    assert res["stage"] == "init_distributed" and wait.LINGER + 0.3 <= took <= wait.LINGER + 0.3 + wait.INNER_POLL * 2
    assert line_events(res) == ["[2026-06-11 05:10:02 TP0] Init torch distributed begin."]
    assert [(e["kind"], e["stage"]) for e in res["_events"] if e["kind"] == "stage"] == [("stage", "init_distributed")]


def test_log_reading_is_incremental(tmp_path):
    """A big log already present: the wait reads only what is appended after the offset."""
    log = tmp_path / "server.log"
    with open(log, "wb") as f:
        f.truncate(64 * 1024 * 1024 - 1)  # 64 MiB sparse file of earlier runs, ending with a whole line
        f.seek(0, os.SEEK_END)
        f.write(b"\n")
    params = WaitParams(log_path=str(log), timeout=100, sleep=0.05)
    res = WaitRound(params).run(0.2)
    state = res.pop("_state")
    with open(log, "ab") as f:
        f.write(b"[2026-06-11 05:10:02 TP0] Init torch distributed begin.\n")
    res = WaitRound(params, state=state).run(0.5)
    state = res.pop("_state")
    assert res["stage"] == "init_distributed"
    assert state["log"]["bytes_read"] == len("[2026-06-11 05:10:02 TP0] Init torch distributed begin.\n")
    assert res["log_offset_end"] == 64 * 1024 * 1024 + state["log"]["bytes_read"]


def test_crash_message_shape(tmp_path):
    case = "rtx3090-oom-attention-workspace-at-graph-stage"
    log = tmp_path / "server.log"
    log.write_bytes(corpus_bytes(case))
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, timeout=10, host="node1")).run(None)
    exp = expected(case)
    line_no = corpus_bytes(case).decode().split("\n").index(exp["first_error_line"]) + 1
    assert res["msg"].startswith("SGLang on node1 crashed after ")
    assert " at stage %s: %s: \"" % (exp["stage"], exp["signature"]) in res["msg"]
    assert "(log %s, line %d)" % (log, line_no) in res["msg"]
    assert CRASH_HINTS[exp["signature"]] in res["msg"]
    assert res["error_lineno"] == line_no and res["error_context"]


def test_monotonic_clock_reset_between_rounds_restarts_the_clock(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("")
    params = WaitParams(log_path=str(log), timeout=100, sleep=0.05)
    res = WaitRound(params).run(0)
    state = res.pop("_state")
    state["start"] = time.monotonic() + 1e6  # as after a reboot of the target
    res = WaitRound(params, state=state).run(0)
    assert res["elapsed"] < 1


def test_display_line_strips_ansi_and_cr_segments():
    assert observe.display_line("\x1b[32mINFO\x1b[0m x") == "INFO x"
    assert observe.display_line("a 10%\rb 20%\r") == "b 20%"
    assert len(observe.display_line("x" * 5000)) == observe.MAX_LINE_CHARS + 3


def test_sigkill_of_writer_without_log_proof_is_detected(tmp_path):
    log = tmp_path / "server.log"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    child.send_signal(signal.SIGKILL)
    child.wait()
    res = WaitRound(WaitParams(log_path=str(log), pid=child.pid, timeout=5, sleep=0.05)).run(None)
    assert res["status"] == "crashed" and res["elapsed"] < 0.5


def test_stage_times_come_from_the_log_timestamps_when_the_whole_log_is_read_at_once(tmp_path):
    # The wait often starts after the server did (handlers, other hosts): every stage line is then read in one
    # chunk, so only SGLang's own timestamps tell how long each stage took.
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-06-11 05:10:00] server_args=ServerArgs(model_path='m')\n"
        "[2026-06-11 05:10:02 TP0] Init torch distributed begin.\n"
        "[2026-06-11 05:10:05 TP0] Load weight begin. avail mem=23.2 GB\n"
        "[2026-06-11 05:11:05 TP0] Load weight end. type=X, dtype=torch.bfloat16, avail mem=10.0 GB\n"
    )
    params = WaitParams(log_path=str(log), log_offset=0, timeout=30, stall_timeout=0, sleep=0.05)
    rnd = WaitRound(params)
    res = rnd.run(round_seconds=0)
    by_stage = dict((s["stage"], s) for s in res["stages"])
    assert by_stage["init_distributed"]["log_elapsed"] == 2.0
    assert by_stage["load_weights"]["log_elapsed"] == 5.0
    assert by_stage["kv_cache"]["log_elapsed"] == 65.0
    assert by_stage["start"]["log_elapsed"] == 0.0


def test_health_only_fallback_for_a_server_that_logs_above_info(tmp_path, server):
    """--log-level warning: no stage lines and no ready line; /health 200 for HEALTH_ONLY_SECONDS with a silent log
    (injected clock: the 30 s pass in fake time; the HTTP server is real)."""
    log = tmp_path / "server.log"
    log.write_text("")
    server.healthy.set()
    params = WaitParams(log_path=str(log), url=server.url, timeout=100, stall_timeout=0, sleep=0.5, host="node1")
    with open(log, "a", encoding="utf-8") as f:
        f.write("[2026-06-11 05:10:00] WARNING: some warning the server prints at warning level\n")
    ft = FakeTime()
    res = WaitRound(params, state=None, clock=ft.clock, sleeper=ft.sleep).run(None)
    limit = decide_rules.HEALTH_ONLY_SECONDS + observe.SLOW_HTTP_PROBE + params.sleep
    assert res["status"] == "ready" and decide_rules.HEALTH_ONLY_SECONDS <= res["elapsed"] <= limit
    assert "never printed the ready line" in res["msg"] and "--log-level" in res["msg"]
    assert res["stage"] == "ready"  # not 'start': the table's STAGE names where the server is (issue 25)


def test_health_200_with_a_busy_log_is_not_ready_without_the_ready_line(tmp_path, server):
    """A server whose log still progresses (an old server answering on the port?) is never taken for ready by /health
    (injected clock: a progress line every 0.2 s over twice HEALTH_ONLY_SECONDS in fake time; the HTTP server is real)."""
    log = tmp_path / "server.log"
    log.write_text("")
    server.healthy.set()
    ft = FakeTime()

    def chatter():
        with open(log, "a", encoding="utf-8") as f:
            f.write("Multi-thread loading shards:  50% Completed | 1/2 [00:10<00:10, 10.0s/it]\n")
        ft.at(0.2, chatter)

    chatter()
    timeout = 2 * decide_rules.HEALTH_ONLY_SECONDS
    params = WaitParams(log_path=str(log), url=server.url, timeout=timeout, stall_timeout=0, sleep=0.25)
    res = WaitRound(params, clock=ft.clock, sleeper=ft.sleep).run(None)
    assert res["status"] == "timeout" and timeout <= res["elapsed"] <= timeout + 1
    assert res["http"]["health"]["status"] == 200


def test_unit_that_cannot_be_queried_is_an_error_at_once():
    def no_bus(argv):
        return 1, "", "System has not been booted with systemd as init system (PID 1). Can't operate.\nFailed to connect to bus: Host is down\n"

    res = WaitRound(WaitParams(unit="sglang.service", timeout=30, sleep=0.05, host="node1"), run_command=no_bus).run(None)
    assert res["status"] == "error" and res["elapsed"] < 1
    assert "cannot watch unit sglang.service" in res["msg"] and "Host is down" in res["msg"]


def test_unknown_unit_is_an_error_not_a_crash():
    not_found = RUNNING.replace("LoadState=loaded", "LoadState=not-found").replace("ActiveState=active", "ActiveState=inactive")
    res = WaitRound(WaitParams(unit="sglang-typo.service", timeout=30, sleep=0.05), run_command=Recorded([not_found])).run(None)
    assert res["status"] == "error" and "LoadState=not-found" in res["msg"] and res["signature"] is None


def test_unit_main_pid_watch_runs_systemctl_rarely_and_at_once_on_exit():
    """While the unit's MainPID lives, systemctl show runs every UNIT_PROBE_EVERY s; its death triggers one at once
    (injected clock: the real child is killed when the fake time reaches 5 s)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    running = RUNNING.replace("MainPID=41210\nExecMainPID=41210", "MainPID=%d\nExecMainPID=%d" % (child.pid, child.pid))
    failed = AUTO_RESTART.replace("ExecMainPID=41210", "ExecMainPID=%d" % child.pid)
    calls = []

    def run(argv):
        calls.append(ft.now)
        # the recorded unit is running while the child lives, then systemd shows it exited and about to restart
        return 0, (running if child.poll() is None else failed), ""

    def end_child():
        child.kill()
        child.wait()

    ft = FakeTime()
    ft.at(5.0, end_child)
    t0 = ft.now
    params = WaitParams(unit="sglang.service", timeout=30, sleep=0.05, host="node1")
    try:
        res = WaitRound(params, run_command=lambda a: (run(a) if os.path.basename(a[0]) == "systemctl" else (0, "", "")),
                        clock=ft.clock, sleeper=ft.sleep).run(None)
    finally:
        end_child()
    assert res["status"] == "crashed" and res["signature"] == "unit_failed" and res["exited"]["exit_code"] == 1
    # seen within a sleep of the exit plus the exit's drain of the log, not at the next UNIT_PROBE_EVERY tick (6 s)
    assert 5.0 <= ft.now - t0 <= 5.0 + 2 * params.sleep + decide_rules.EXIT_DRAIN + wait.INNER_POLL
    # the first look, one every UNIT_PROBE_EVERY while the child lives, and the one its exit triggered
    assert len(calls) == 1 + int(5.0 // observe.UNIT_PROBE_EVERY) + 1, calls


def journal_json(case):
    """A corpus log as the JSON lines `journalctl -o json` prints for the unit's stdout (one entry per line)."""
    out = []
    for i, line in enumerate(corpus_bytes(case).decode("utf-8").split("\n")[:-1]):
        msg = list(line.encode()) if "\r" in line else line
        out.append(json.dumps({"__CURSOR": "s=6c0ea6ee;i=%x;b=0f3e8a7c" % (i + 1), "__REALTIME_TIMESTAMP": "1781154602%06d" % i,
                               "_BOOT_ID": "0f3e8a7c5b6d4e3f", "MESSAGE": msg}) + "\n")
    return out


class PipeJournal:
    """journal_stream_factory for tests: a real pipe fed by a thread with recorded journalctl JSON lines, starting after
    the cursor it is given (what `journalctl --after-cursor` does)."""

    def __init__(self, entries, delay=0.002, fast_from=None):
        self.entries, self.delay, self.calls, self.threads = entries, delay, [], []
        self.fast_from = len(entries) if fast_from is None else fast_from

    def __call__(self, invocation_id, cursor):
        self.calls.append((invocation_id, cursor))
        start = 0
        if cursor:
            start = next(i + 1 for i, e in enumerate(self.entries) if json.loads(e)["__CURSOR"] == cursor)
        rfd, wfd = os.pipe()

        def feed():
            try:
                for i, e in enumerate(self.entries[start:], start):
                    os.write(wfd, e.encode())
                    if i < self.fast_from:  # a traceback reaches the journal at once
                        time.sleep(self.delay)
                time.sleep(30)
            except OSError:
                pass

        th = threading.Thread(target=feed, daemon=True)
        th.start()
        self.threads.append(th)
        return JournalStream(rfd)


def test_streamed_journal_across_rounds_resumes_at_the_cursor():
    case = "rocm-tp2-oom-both-ranks-at-weight-init"  # error line is entry 60 of 192: after the first round
    exp = expected(case)
    entries = journal_json(case)
    journal = PipeJournal(entries, delay=0.01, fast_from=55)
    rec = Recorded([RUNNING])
    params = WaitParams(unit="sglang.service", timeout=30, sleep=0.05, host="node1")
    res = WaitRound(params, run_command=rec, journal_stream_factory=journal).run(0.2)
    state = json.loads(json.dumps(res.pop("_state")))
    assert res["status"] == "starting" and state["log"]["journal_cursor"]
    res = WaitRound(params, state=state, run_command=rec, journal_stream_factory=journal).run(None)
    assert res["status"] == "crashed" and res["signature"] == exp["signature"]
    assert res["error_line"] == exp["first_error_line"]
    assert journal.calls[0] == ("2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e", None)
    assert journal.calls[1] == ("2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e", state["log"]["journal_cursor"])
    assert not any(os.path.basename(c[0]) == "journalctl" for c in rec.calls)  # no polling while streaming
    # every line exactly once across the two rounds
    assert res["error_lineno"] == corpus_bytes(case).decode().split("\n").index(exp["first_error_line"]) + 1


class PagedJournal:
    """run_command stand-in for `journalctl -o cat --show-cursor` over recorded entries, with journalctl's paging:
    --cursor / --after-cursor position, --lines=N shows the N entries after it; each call costs `cost` fake seconds."""

    def __init__(self, entries, ft=None, cost=0.0):
        self.entries, self.ft, self.cost, self.pages = entries, ft, cost, []

    def __call__(self, argv):
        if os.path.basename(argv[0]) == "systemctl":
            return 0, RUNNING, ""
        opts = dict(a.split("=", 1) for a in argv if a.startswith("--lines="))
        start = 0
        if "--after-cursor" in argv:
            start = int(argv[argv.index("--after-cursor") + 1].rsplit("=", 1)[1]) + 1
        else:
            assert argv[argv.index("--cursor") + 1] == "t=1"   # before the invocation's first entry
        end = min(len(self.entries), start + int(opts["--lines"]))
        self.pages.append(end - start)
        if self.ft is not None:
            self.ft.now += self.cost
        out = "".join(e + "\n" for e in self.entries[start:end])
        return 0, out + ("-- cursor: s=abc;i=%d\n" % (end - 1) if end > start else ""), ""


def test_polled_journal_reads_a_backlog_in_bounded_pages_each_entry_once():
    entries = ["[2026-06-11 05:10:%02d TP%d] Load weight begin. entry %d" % (i % 60, i % 8, i) for i in range(5000)]
    journal = PagedJournal(entries)
    state = WaitState.restore(None, 0.0)
    state.log.journal_invocation = "2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e"
    source = sources.JournalPollSource(state.log, journal, every=0.25)
    text, more = source.read(0.0, 64 * 1024)
    texts = [text]
    while more:
        text, more = source.read(0.0, 64 * 1024)   # a backlog is read on at once, not at the next poll tick
        texts.append(text)
    assert "".join(texts) == "".join(e + "\n" for e in entries)
    assert max(journal.pages) == 64 * 1024 // sources.JOURNAL_ENTRY_BYTES and len(journal.pages) >= 10
    assert source.read(0.1, 64 * 1024) == ("", False)   # caught up: the next poll waits for its tick


def test_timeout_holds_over_a_polled_journal_backlog():
    """200 000 journal entries, every journalctl run costs 0.2 fake seconds: the round ends at its timeout, not when
    the backlog is read (injected clock and runner)."""
    entries = ["[2026-06-11 05:10:00 TP0] Load weight begin. avail mem=78.20 GB, entry %d" % i for i in range(200000)]
    ft = FakeTime()
    journal = PagedJournal(entries, ft, cost=0.2)
    params = WaitParams(unit="sglang.service", timeout=3, stall_timeout=0, sleep=0.25, host="node1")
    res = WaitRound(params, run_command=journal, clock=ft.clock, sleeper=ft.sleep).run(None)
    assert res["status"] == "timeout" and 3 <= res["elapsed"] <= 3 + wait.READ_SLICE + 2 * 0.2
    assert sum(journal.pages) < len(entries)


def test_stream_that_cannot_start_falls_back_to_polling():
    def broken(invocation_id, cursor):
        raise OSError("[Errno 2] No such file or directory: 'journalctl'")

    case = "warmup-502-initialization-failed-killed"
    rec = Recorded([RUNNING], [corpus_bytes(case).decode()])
    res = WaitRound(WaitParams(unit="sglang.service", timeout=10, sleep=0.05), run_command=rec,
                    journal_stream_factory=broken).run(None)
    assert res["status"] == "crashed" and res["signature"] == expected(case)["signature"]
    assert any(os.path.basename(c[0]) == "journalctl" for c in rec.calls)


@pytest.mark.parametrize("context, cause", [
    (["Traceback (most recent call last):", '  File "<frozen runpy>", line 198, in _run_module_as_main',
      "ModuleNotFoundError: No module named 'numpy'"], "ModuleNotFoundError: No module named 'numpy'"),
    (["[2026-06-11 05:11:58 TP0] Scheduler hit an exception: Traceback (most recent call last):",
      "    raise e", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
      "[2026-06-11 05:11:59] Received sigquit from a child process. It usually means the child failed."],
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."),
    (["[2025-02-26 12:01:56 TP2] Scheduler hit an exception: Traceback (most recent call last):",
      '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 240, in __init__'], None),
])
def test_root_cause_is_the_last_exception_line_of_the_traceback(context, cause):
    assert root_cause(context) == cause


def test_crash_message_names_the_root_cause_below_a_bare_traceback_header(tmp_path):
    # A real launcher dying on an import, as `python -m sglang.launch_server` does in a venv without SGLang's
    # dependencies: its stderr is the log, and the wait is given its (exited) pid.
    log = tmp_path / "server.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", "import llmops_sglang_no_such_module"], stderr=err)
        proc.wait()
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, pid=proc.pid, timeout=30, stall_timeout=0,
                               sleep=0.05)).run(round_seconds=2)
    assert res["status"] == "crashed" and res["signature"] == "import_error"
    assert res["error_line"] == "Traceback (most recent call last):"
    assert 'root cause: "ModuleNotFoundError: No module named \'llmops_sglang_no_such_module\'"' in res["msg"]
