# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the wait pipeline's parts: the pure decide() over its rule tables, the typed state's JSON round trip, and
whole rounds over real files with an injected clock and sleeper (the crash settle, the log-only crash rule, the
backlog bound). Log lines here are synthetic, written for these tests."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.wait import _decide as rules
from ansible_collections.llmops.sglang.plugins.module_utils.wait._round import READ_SLICE, WaitParams, WaitRound
from ansible_collections.llmops.sglang.plugins.module_utils.wait._decide import Observation, Verdict, decide
from ansible_collections.llmops.sglang.plugins.module_utils.wait._observe import READ_CHUNK
from ansible_collections.llmops.sglang.plugins.module_utils.wait._state import (
    Exited, ProgressEvent, WaitError, WaitState)

BASE = Observation(elapsed=5.0, since_change=0.1, quiet_for=0.1, log_watched=True, log_status="starting",
                   log_stage="load_weights", settled=True, process_watched=True, exited_for=None, crash_for=None,
                   health=None, health_ok_for=None, model_ok=True, scheduler_up=False, quiet_asked=False)
PARAMS = WaitParams(log_path="/x.log", timeout=60, stall_timeout=30, host="node1")


def obs(**changes):
    return dataclasses.replace(BASE, **changes)


def fresh_state(**changes):
    return dataclasses.replace(WaitState.fresh(0.0), **changes)


# ------------------------------------------------------------------------------------------------ decide (pure)

@pytest.mark.parametrize("changes, verdict", [
    ({}, Verdict()),
    # the crash settle: reported once the classifier is settled, the process is gone, the log was quiet for
    # SETTLE_QUIET, or SETTLE_MAX passed
    (dict(log_status="crashed", settled=False, crash_for=0.2), Verdict()),
    (dict(log_status="crashed", settled=True, crash_for=0.2), Verdict("crashed", reason="log")),
    (dict(log_status="crashed", settled=False, crash_for=0.2, exited_for=0.0), Verdict("crashed", reason="log")),
    (dict(log_status="crashed", settled=False, crash_for=0.2, quiet_for=rules.SETTLE_QUIET), Verdict("crashed", reason="log")),
    (dict(log_status="crashed", settled=False, crash_for=rules.SETTLE_MAX), Verdict("crashed", reason="log")),
    (dict(log_status="crashed", settled=False, crash_for=0.2, elapsed=60.0), Verdict("crashed", reason="log")),
    # the process is gone: a lagging log gets EXIT_DRAIN, then the classifier concludes
    (dict(exited_for=0.0), Verdict()),
    (dict(exited_for=rules.EXIT_DRAIN), Verdict(act="conclude_exit")),
    (dict(exited_for=0.0, log_watched=False), Verdict(act="conclude_exit")),
    # the log alone: a quiet log is handed to the classifier once per quiet, never while a process is watched
    (dict(process_watched=False, quiet_for=rules.LOG_QUIET_SECONDS), Verdict(act="ask_log_quiet")),
    (dict(process_watched=False, quiet_for=rules.LOG_QUIET_SECONDS, quiet_asked=True), Verdict()),
    (dict(process_watched=True, quiet_for=rules.LOG_QUIET_SECONDS), Verdict()),
    (dict(process_watched=False, quiet_for=rules.LOG_QUIET_SECONDS - 0.1), Verdict()),
    (dict(since_change=30.0, quiet_for=30.0), Verdict("stalled", reason="stall_timeout")),
    (dict(elapsed=60.0), Verdict("timeout", reason="timeout")),
    (dict(log_status="ready"), Verdict("ready", reason="ready_line")),
    (dict(log_status="ready", model_ok=False), Verdict()),
])
def test_decide_rules(changes, verdict):
    assert decide(obs(**changes), fresh_state(), PARAMS) == verdict


def test_decide_error_first_and_conclusion_after_exit():
    state = fresh_state(error=WaitError(kind="auth", url="http://x/health", status=401))
    assert decide(obs(log_status="ready"), state, PARAMS) == Verdict("error", reason="error")
    state = fresh_state(exit_concluded=True, exited=Exited(by="pid", reason="process 7 exited", at=0.0))
    assert decide(obs(exited_for=0.5, log_status="starting"), state, PARAMS) == Verdict("crashed", reason="exit")


@pytest.mark.parametrize("params, changes, status", [
    (dict(url="http://h:1"), dict(health=200), None),                                    # auto: 200 alone is not ready
    (dict(url="http://h:1"), dict(health=200, log_status="ready"), "ready"),
    (dict(url="http://h:1"), dict(health=200, log_watched=False), "ready"),
    (dict(url="http://h:1"), dict(health=200, health_ok_for=30.0, quiet_for=30.0), "ready"),  # health_only
    (dict(url="http://h:1", ready_probe="health"), dict(health=200), "ready"),
    (dict(url="http://h:1", ready_probe="log"), dict(health=200), None),
    (dict(node_rank=1), dict(log_stage="kv_cache", scheduler_up=True), "ready"),
    (dict(node_rank=1), dict(log_stage="load_weights", scheduler_up=True), None),
    (dict(node_rank=1), dict(log_stage="kv_cache", quiet_for=rules.RANK_SETTLE_SECONDS), "ready"),
])
def test_ready_rules_per_mode(params, changes, status):
    p = WaitParams(log_path="/x.log", timeout=600, stall_timeout=0, host="n", **params)
    assert decide(obs(**changes), fresh_state(), p).status == status


def test_wait_params_refuse_an_unknown_option():
    with pytest.raises(TypeError):
        WaitParams(log_path="/x.log", stal_timeout=3)  # pylint: disable=unexpected-keyword-arg
    assert WaitParams.from_options({"log_path": "/x", "deployment": "d", "deployment_size": 2}).log_path == "/x"


# ------------------------------------------------------------------------------------------------ typed state

def test_state_survives_json_and_refuses_another_version():
    st = WaitState.fresh(10.0)
    st.exited = Exited(by="unit", reason="unit failed", exit_code=1, at=11.0)
    st.error = WaitError(kind="model", url="http://h/v1/models", models=["a"])
    st.log.tail = ["x"]
    st.http.models = ["a"]
    back = WaitState.restore(json.loads(json.dumps(st.to_json())), 12.0)
    assert back == st
    assert WaitState.restore(dict(st.to_json(), v=1), 12.0) == WaitState.fresh(12.0)
    assert WaitState.restore(st.to_json(), 5.0).start == 5.0  # the clock went back: the host rebooted
    event = ProgressEvent(kind="progress", elapsed=3.0, stage="cuda_graph", percent=50)
    assert ProgressEvent.from_json(json.loads(json.dumps(event.to_json()))) == event


# ------------------------------------------------------------------------------------------------ rounds, injected time

class FakeTime:
    """Injected clock and sleeper: time moves when the round sleeps, and by `tick` at each clock read (the CPU time
    of reading a chunk); scheduled writes run once the time reaches them."""

    def __init__(self, tick=0.0):
        self.now, self.tick, self.pending = 1000.0, tick, []

    def clock(self):
        self.now += self.tick
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        for item in sorted(p for p in self.pending if p[0] <= self.now):
            self.pending.remove(item)
            item[1]()

    def at(self, delay, func):
        self.pending.append((self.now + delay, func))


def appender(path, text):
    def write():
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
    return write


def start_lines(n=1):
    return "".join("[2030-01-02 03:04:%02d TP0] Load weight begin. avail mem=%d.00 GB\n" % (i % 60, 40 + i) for i in range(n))


CRASH_HEAD = ("[2030-01-02 03:05:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
              "  File \"/srv/venv/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py\", line 3100, in run\n"
              "    scheduler.event_loop()\n")
CRASH_CAUSE = ("  File \"/srv/venv/lib/python3.12/site-packages/torch/cuda/memory.py\", line 12, in alloc\n"
               "    return torch.empty(n)\n"
               "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 9.00 GiB. GPU 0 has 1.00 GiB free.\n")


def test_settle_reads_the_root_cause_that_follows_the_fatal_phrase(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(start_lines())
    ft = FakeTime()
    ft.at(0.2, appender(log, CRASH_HEAD))
    ft.at(0.8, appender(log, CRASH_CAUSE))  # the root cause comes 0.6 s after the verdict line
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, timeout=60, host="n1"), clock=ft.clock,
                    sleeper=ft.sleep).run(None)
    assert res["status"] == "crashed" and res["signature"] == "cuda_oom"
    assert res["error_line"] == CRASH_HEAD.split("\n", maxsplit=1)[0]
    assert res["error_context"][-1].startswith("torch.OutOfMemoryError: CUDA out of memory")
    assert res["elapsed"] < 0.8 + rules.SETTLE_QUIET  # ended when the traceback closed, not after a quiet second


def test_settle_is_bounded_when_the_traceback_never_closes(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(start_lines())
    ft = FakeTime()
    ft.at(0.1, appender(log, CRASH_HEAD))
    for i in range(40):  # a frame every 0.5 s: never quiet for SETTLE_QUIET, never closed
        ft.at(0.2 + 0.5 * i, appender(log, "  File \"/srv/x.py\", line %d, in f%d\n" % (i, i)))
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, timeout=60), clock=ft.clock, sleeper=ft.sleep).run(None)
    assert res["status"] == "crashed" and res["error_line"] == CRASH_HEAD.split("\n", maxsplit=1)[0]
    assert 0.1 + rules.SETTLE_MAX <= res["elapsed"] <= 0.1 + rules.SETTLE_MAX + 0.2


LOG_ONLY_TB = ("[2030-01-02 03:04:05] Init torch distributed begin.\n"
               "Traceback (most recent call last):\n"
               "  File \"/srv/venv/lib/python3.12/site-packages/sglang/launch_server.py\", line 14, in <module>\n"
               "    server_args = prepare_server_args(sys.argv[1:])\n"
               "ValueError: --tp-size 3 does not divide the 32 attention heads of the model\n")


def test_log_alone_proves_a_crash_after_a_short_quiet_and_says_how_to_watch_a_process(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(LOG_ONLY_TB)
    ft = FakeTime()
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, timeout=600, stall_timeout=900, host="n1"),
                    clock=ft.clock, sleeper=ft.sleep).run(None)
    assert res["status"] == "crashed" and res["error_line"] is not None
    assert rules.LOG_QUIET_SECONDS <= res["elapsed"] < rules.LOG_QUIET_SECONDS + 0.2
    assert "no process was watched" in res["msg"] and "pass pid (or unit)" in res["msg"]


def test_with_a_process_watched_a_quiet_log_is_not_asked(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(LOG_ONLY_TB)
    ft = FakeTime()
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, pid=os.getpid(), timeout=600, stall_timeout=5),
                    clock=ft.clock, sleeper=ft.sleep).run(None)
    assert res["status"] == "stalled" and "no process was watched" not in res["msg"]


def test_the_timeout_holds_over_a_backlog(tmp_path):
    """Reading is slow here (each clock read costs 50 ms of fake time, ~5 MiB/s): the round stops reading at its
    deadline instead of finishing the backlog first."""
    log = tmp_path / "server.log"
    line = "[2030-01-02 03:04:05 TP3] Load weight begin. avail mem=77.00 GB\n"
    log.write_text(line * (16 * 1024 * 1024 // len(line)))
    size = log.stat().st_size
    ft = FakeTime(tick=0.05)
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, timeout=1, stall_timeout=0), clock=ft.clock,
                    sleeper=ft.sleep).run(None)
    assert res["status"] == "timeout" and res["elapsed"] <= 1 + READ_SLICE
    assert 0 < res["log_offset_end"] < size


def test_a_round_ends_on_time_over_a_backlog_and_the_next_goes_on(tmp_path):
    log = tmp_path / "server.log"
    line = "[2030-01-02 03:04:05 TP3] Load weight begin. avail mem=77.00 GB\n"
    log.write_text(line * (8 * 1024 * 1024 // len(line)))
    ft = FakeTime(tick=0.05)
    params = WaitParams(log_path=str(log), log_offset=0, timeout=600, stall_timeout=0)
    t0 = ft.now
    res = WaitRound(params, clock=ft.clock, sleeper=ft.sleep).run(1.0)
    assert res["status"] == "starting" and ft.now - t0 <= 1.0 + READ_SLICE + 0.2
    first = res["log_offset_end"]
    assert READ_CHUNK <= first < log.stat().st_size
    res = WaitRound(params, state=json.loads(json.dumps(res["_state"])), clock=ft.clock, sleeper=ft.sleep).run(1.0)
    assert res["log_offset_end"] > first


def test_a_first_round_counts_the_start_up_before_it_could_look(tmp_path):
    """The task's time before the module could look (controller, transfer, interpreter start) is part of timeout:
    a wait whose start-up took 3 s of a 10 s timeout times out 7 s after it first looks, with elapsed 10."""
    log = tmp_path / "server.log"
    log.write_text(start_lines(3))
    ft = FakeTime()
    t0 = ft.now
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, timeout=10, stall_timeout=0), clock=ft.clock,
                    sleeper=ft.sleep, spent=3.0).run(None)
    assert res["status"] == "timeout"
    assert 7.0 <= ft.now - t0 <= 7.0 + READ_SLICE
    assert 10.0 <= res["elapsed"] <= 10.0 + READ_SLICE
    # later rounds carry the start; their own start-up does not move it
    state = WaitState.fresh(100.0, spent=3.0)
    assert WaitState.restore(state.to_json(), 105.0, spent=9.0).start == 97.0


def test_a_round_near_the_timeout_goes_on_to_the_verdict(tmp_path):
    """A round that would end less than the next round's start-up before the timeout goes on to the timeout itself:
    otherwise the next module's start-up (seconds on a loaded host) would carry the verdict past it."""
    log = tmp_path / "server.log"
    log.write_text("")   # no stage change: the round would run to its length
    params = WaitParams(log_path=str(log), log_offset=0, timeout=10, stall_timeout=0)
    ft = FakeTime()
    t0 = ft.now
    # round length 8 s, start-up 1 s: 2 s are left after it, less than 2 x 1 s + margin
    res = WaitRound(params, clock=ft.clock, sleeper=ft.sleep, spent=1.0).run(8.0)
    assert res["status"] == "timeout" and ft.now - t0 <= 9.0 + READ_SLICE
    # with a quick start-up the round ends on time and the next one decides
    ft = FakeTime()
    t0 = ft.now
    res = WaitRound(params, clock=ft.clock, sleeper=ft.sleep, spent=0.1).run(8.0)
    assert res["status"] == "starting" and ft.now - t0 <= 8.0 + READ_SLICE


def test_one_stage_event_per_stage_even_when_one_read_spans_several(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2030-01-02 03:04:01 TP0] Init torch distributed begin.\n"
                   "[2030-01-02 03:04:02 TP0] Load weight begin. avail mem=70.00 GB\n"
                   "[2030-01-02 03:04:09 TP0] Load weight end. type=X, dtype=torch.bfloat16, avail mem=20.00 GB\n"
                   "[2030-01-02 03:04:10 TP0] KV Cache is allocated. #tokens: 1000, K size: 1 GB, V size: 1 GB\n")
    ft = FakeTime()
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, timeout=60), clock=ft.clock, sleeper=ft.sleep).run(0)
    stages = [e["stage"] for e in res["_events"] if e["kind"] == "stage"]
    assert stages == ["init_distributed", "load_weights", "kv_cache"]
