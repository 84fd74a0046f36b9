# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The stability window after ready (wait_for_sglang stable_for): the pure decision over observations, and whole
rounds with an injected clock over the recorded post-ready crash (a real log, a real process that exits)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import pathlib
import subprocess
import sys

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.wait import _decide as rules
from ansible_collections.llmops.sglang.plugins.module_utils.wait._round import WaitParams, WaitRound
from ansible_collections.llmops.sglang.plugins.module_utils.wait._decide import Observation, Verdict, decide
from ansible_collections.llmops.sglang.plugins.module_utils.wait._state import WaitState

READY = Observation(elapsed=50.0, since_change=0.1, quiet_for=0.1, log_watched=True, log_status="ready",
                    log_stage="ready", settled=True, process_watched=True, exited_for=None, crash_for=None,
                    health=200, health_ok_for=1.0, model_ok=True, scheduler_up=False, quiet_asked=False)
WINDOW = WaitParams(log_path="/x.log", timeout=60, stall_timeout=30, stable_for=15, host="node1")
CASE = pathlib.Path(__file__).parents[3] / "fixtures" / "sglang-logs" / "ascend-ready-then-scheduler-crash-11s-later"


def in_window(**changes):
    return dataclasses.replace(READY, **changes)


def ready_state():
    return dataclasses.replace(WaitState.fresh(0.0), ready_at=45.0, ready_by="ready_line")


@pytest.mark.parametrize("params, state, changes, verdict", [
    # no window: ready at once, as before
    (dataclasses.replace(WINDOW, stable_for=0), WaitState.fresh(0.0), {}, Verdict("ready", reason="ready_line")),
    # the first ready opens the window (the round records when and by which rule)
    (WINDOW, WaitState.fresh(0.0), {}, Verdict(act="begin_stability", reason="ready_line")),
    # inside the window: keep watching, even past timeout and stall_timeout
    (WINDOW, ready_state(), dict(ready_for=5.0, elapsed=70.0, since_change=40.0), Verdict()),
    (WINDOW, ready_state(), dict(ready_for=15.0), Verdict("ready", reason="ready_line")),
    # an exit (a unit restart is an exit of the watched invocation) fails it, after the log's drain
    (WINDOW, ready_state(), dict(ready_for=11.0, exited_for=0.0), Verdict()),
    (WINDOW, ready_state(), dict(ready_for=11.0, exited_for=rules.EXIT_DRAIN), Verdict("crashed", reason="exit_after_ready")),
    (WINDOW, ready_state(), dict(ready_for=16.0, exited_for=rules.EXIT_DRAIN), Verdict("crashed", reason="exit_after_ready")),
    # a crash line after ready: once its traceback had a quiet second (or at once when no process is watched)
    (WINDOW, ready_state(), dict(ready_for=11.0, post_ready_crash=True), Verdict()),
    (WINDOW, ready_state(), dict(ready_for=11.0, post_ready_crash=True, quiet_for=rules.SETTLE_QUIET),
     Verdict("crashed", reason="log_after_ready")),
    (WINDOW, ready_state(), dict(ready_for=11.0, post_ready_crash=True, process_watched=False),
     Verdict("crashed", reason="log_after_ready")),
    # health that drops inside the window does not end it: only an exit or a crash line does
    (WINDOW, ready_state(), dict(ready_for=3.0, health=503, health_ok_for=None), Verdict()),
])
def test_stability_decision(params, state, changes, verdict):
    assert decide(in_window(**changes), state, params) == verdict


class FakeTime:
    """Injected clock and sleeper: time moves only when the round sleeps; scheduled actions run when it reaches them."""

    def __init__(self):
        self.now, self.pending = 1000.0, []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        for item in sorted((p for p in self.pending if p[0] <= self.now), key=lambda p: p[0]):
            self.pending.remove(item)
            item[1]()

    def at(self, delay, func):
        self.pending.append((self.now + delay, func))


def recorded_halves():
    """The recorded log up to and including its ready line, and the rest (the scheduler crash 11 s later)."""
    text = gzip.decompress((CASE / "server.log.gz").read_bytes()).decode("utf-8", "replace")
    cut = text.index("\n", text.index("The server is fired up and ready to roll!")) + 1
    return text[:cut], text[cut:]


@pytest.fixture
def server():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc
    proc.kill()
    proc.wait()


def crash_later(ft, log, rest, proc, after):
    def crash():
        with open(log, "a", encoding="utf-8") as f:
            f.write(rest)
        proc.kill()
        proc.wait()  # reaped: the pid is gone, as the server's is when it exits
    ft.at(after, crash)


def test_the_recorded_crash_11s_after_ready_fails_the_start(tmp_path, server):
    assert json.loads((CASE / "expected.json").read_text())["post_ready_crash"] is True
    head, rest = recorded_halves()
    log = tmp_path / "server.log"
    log.write_text(head)
    ft = FakeTime()
    crash_later(ft, log, rest, server, after=11.0)
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, pid=server.pid, timeout=600, stable_for=15, host="n1"),
                    clock=ft.clock, sleeper=ft.sleep).run(None)
    assert (res["status"], res["stage"], res["signature"]) == ("crashed", "ready", "post_ready_crash")
    died_after = res["elapsed"] - res["ready_elapsed"]
    assert 11.0 <= died_after < 11.0 + 1.0
    assert "Scheduler hit an exception" in res["error_line"]
    assert res["msg"].startswith("SGLang on n1 crashed %.1fs after ready (within stable_for=15s) at stage ready: "
                                 "post_ready_crash" % died_after)
    assert res["exited"]["by"] == "pid"


def test_a_crash_after_the_window_is_not_the_start_s(tmp_path, server):
    head, rest = recorded_halves()
    log = tmp_path / "server.log"
    log.write_text(head)
    ft = FakeTime()
    crash_later(ft, log, rest, server, after=11.0)
    res = WaitRound(WaitParams(log_path=str(log), log_offset=0, pid=server.pid, timeout=600, stable_for=5, host="n1"),
                    clock=ft.clock, sleeper=ft.sleep).run(None)
    assert (res["status"], res["signature"]) == ("ready", None)
    assert 5.0 <= res["elapsed"] - res["ready_elapsed"] < 5.5
    assert "stayed up for stable_for=5s" in res["msg"]


def test_the_window_survives_rounds(tmp_path, server):
    """The action plugin runs short rounds: the window's start is carried in the state, not restarted per round."""
    head, rest = recorded_halves()
    log = tmp_path / "server.log"
    log.write_text(head)
    ft = FakeTime()
    params = WaitParams(log_path=str(log), log_offset=0, pid=server.pid, timeout=600, stable_for=15, host="n1")
    res = WaitRound(params, clock=ft.clock, sleeper=ft.sleep).run(2.0)
    assert res["status"] == "starting" and res["ready_elapsed"] is not None
    assert any(e.get("stage") == "stability" for e in res["_events"])
    crash_later(ft, log, rest, server, after=9.0)
    for _round in range(20):
        res = WaitRound(params, state=json.loads(json.dumps(res["_state"])), clock=ft.clock, sleeper=ft.sleep).run(2.0)
        if res["status"] != "starting":
            break
    assert (res["status"], res["signature"]) == ("crashed", "post_ready_crash")
    assert 9.0 <= res["elapsed"] - res["ready_elapsed"] < 12.0


def test_a_new_boot_id_is_a_reboot_not_a_crash(tmp_path, server, monkeypatch):
    """The unit probe notes the boot id when the wait begins; a new one ends the wait as rebooted, before any rule
    that would read the new boot's unit (a new InvocationID) as a crash."""
    from ansible_collections.llmops.sglang.plugins.module_utils.host import _procfs  # pylint: disable=import-outside-toplevel
    boot = tmp_path / "boot_id"
    boot.write_text("old-boot\n")
    monkeypatch.setattr(_procfs, "BOOT_ID_PATH", str(boot))
    log = tmp_path / "server.log"
    log.write_text(recorded_halves()[0][:2000])
    params = WaitParams(log_path=str(log), log_offset=0, pid=server.pid, timeout=600, host="n1")
    ft = FakeTime()
    res = WaitRound(params, clock=ft.clock, sleeper=ft.sleep).run(1.0)
    assert (res["status"], res["boot_id"]) == ("starting", "old-boot")
    boot.write_text("new-boot\n")
    server.kill()
    server.wait()  # the reboot ended the process too: still a reboot, not a crash
    res = WaitRound(params, state=json.loads(json.dumps(res["_state"])), clock=ft.clock, sleeper=ft.sleep).run(1.0)
    assert (res["status"], res["signature"], res["ready"]) == ("rebooted", None, False)
    assert res["msg"].startswith("SGLang on n1: the host rebooted during the wait (boot id old-boot -> new-boot)")
    assert decide(in_window(ready_for=None), dataclasses.replace(WaitState.fresh(0.0), rebooted=["a", "b"]), WINDOW) \
        == Verdict("rebooted", reason="boot_id")
