# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the wait_for_sglang action plugin. `_execute_module` is replaced by the real module run as a process on
this machine (what the local connection does), so the plugin's loop, progress output, connection retry, check mode
and final result are exercised against real rounds over real corpus logs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.playbook.play_context import PlayContext

from ansible_collections.llmops.sglang.plugins.action import wait_for_sglang as action_mod
from ansible_collections.llmops.sglang.plugins.action.wait_for_sglang import ActionModule, Progress, progress_line
from ansible_collections.llmops.sglang.plugins.module_utils.wait._state import ProgressEvent
from ansible_collections.llmops.sglang.plugins.module_utils.log._classifier import STAGES
from wait_live import module_following

CORPUS = Path(__file__).resolve().parents[3] / "fixtures" / "sglang-logs"
MODULE = "ansible_collections.llmops.sglang.plugins.modules.wait_for_sglang"


class RealModule:
    """_execute_module stand-in: runs the real module process with the args the plugin built."""

    def __init__(self, tmp_path, fail_first=0):
        self.tmp_path = tmp_path
        self.calls = []
        self.fail_first = fail_first

    def __call__(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        assert module_name == "llmops.sglang.wait_for_sglang"
        self.calls.append(json.loads(json.dumps(module_args)))
        if self.fail_first:
            self.fail_first -= 1
            raise AnsibleConnectionFailure("ssh: connect to host node1 port 22: Connection reset by peer")
        argfile = self.tmp_path / ("args-%d.json" % time.monotonic_ns())
        args = dict(module_args)
        if self.check_mode:
            args["_ansible_check_mode"] = True
        argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        out = subprocess.run([sys.executable, "-m", MODULE, str(argfile)], capture_output=True, text=True, env=env,
                             timeout=120, check=False)
        return json.loads(out.stdout)

    check_mode = False


def make_action(args, check_mode=False):
    task = MagicMock()
    task.args = args
    task.check_mode = check_mode
    task.async_val = 0
    task.action = "llmops.sglang.wait_for_sglang"
    task._uuid = "0242ac12-wait"  # one task, run for several hosts, has one UUID
    task.diff = False
    connection = MagicMock()
    connection._shell.tmpdir = None
    plugin = ActionModule(task, connection, PlayContext(), loader=None, templar=None, shared_loader_obj=None)
    return plugin, connection


@pytest.fixture()
def display(monkeypatch):
    disp = MagicMock()
    disp.verbosity = 0
    monkeypatch.setattr(action_mod, "display", disp)
    return disp


def replay(log, case, delay=0.01, start_after=0.3, chunk=2048, parts=None, when=None):
    """Append a corpus log in chunks; with parts=N, in N blocks of whole lines `delay` seconds apart. when: a callable
    the writer waits for first (e.g. the module following the log), then start_after seconds."""
    data = (CORPUS / case / "server.log").read_bytes()
    if parts:
        lines = data.splitlines(True)
        step = len(lines) // parts + 1
        chunks = [b"".join(lines[i:i + step]) for i in range(0, len(lines), step)]
    else:
        chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)]

    def run():
        if when is not None:
            when()
        time.sleep(start_after)
        with open(log, "ab") as f:
            for piece in chunks:
                f.write(piece)
                f.flush()
                time.sleep(delay)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


# What importing the action plugin loads, in a fresh interpreter: each fork of ansible-playbook that runs the task
# imports it. The argument_spec comes from module_utils/wait/_spec.py; the module, and through it the log classifier and
# the whole wait pipeline, ran on the target only (importing them cost 0.176 CPU-s per run on the controller).
IMPORT_PROBE = """
import json, sys
from ansible_collections.llmops.sglang.plugins.action import wait_for_sglang
print(json.dumps(sorted(m for m in sys.modules if m.startswith("ansible_collections.llmops.sglang."))))
"""


def test_action_plugin_imports_neither_the_module_nor_the_classifier():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, env=env, check=True,
                         timeout=60).stdout
    loaded = json.loads(out.splitlines()[-1])
    prefix = "ansible_collections.llmops.sglang.plugins."
    assert prefix + "action.wait_for_sglang" in loaded and prefix + "module_utils.wait._spec" in loaded, loaded
    for name in ("modules.wait_for_sglang", "module_utils.log._classifier", "module_utils.log._rules",
                 "module_utils.wait._round", "module_utils.wait._observe", "module_utils.wait._sources"):
        assert prefix + name not in loaded, (name, loaded)


def test_action_plugin_validates_with_the_modules_public_options():
    from ansible_collections.llmops.sglang.plugins.modules import wait_for_sglang as module_mod

    spec = module_mod.argument_spec()
    assert action_mod.public_argument_spec() == dict((k, v) for k, v in spec.items() if not k.startswith("_"))
    assert {"_state", "_round_seconds", "_spent", "_host"} <= set(spec)


def test_ready_prints_one_line_per_stage_and_succeeds(tmp_path, display):
    log = tmp_path / "server.log"
    # the writer starts once the first module process follows the log: on a loaded machine a module's start-up took
    # longer than the whole replay, the first round read the whole log and the test saw one round and one stage
    th = replay(log, "gb10-dflash-spec-decoding-ready", delay=2.8, parts=5, when=lambda: module_following(tmp_path))
    plugin, _connection = make_action({"log_path": str(log), "log_offset": 0, "timeout": 60, "stall_timeout": 20})
    runner = RealModule(tmp_path)
    plugin._execute_module = runner
    res = plugin.run(task_vars={"inventory_hostname": "node1"})
    th.join()
    assert res["failed"] is False and res["status"] == "ready" and res["changed"] is False
    lines = [c.args[0] for c in display.display.call_args_list]
    assert lines[-1].startswith("node1: ready (")
    # one line per moment stages were reached (stages read together share it), in stage order (a progress bucket of a
    # stage may add a line for the same stage, never the same text twice)
    stages = [word.split(" ")[0] for ln in lines for word in ln.split(": ", 1)[1].split(" (")[0].split(", ")]
    order = [STAGES.index(s) for s in stages]
    assert order == sorted(order) and len(set(stages)) >= 3
    assert len(lines) == len(set(ln.split(" (")[0] for ln in lines))
    assert all(k not in res for k in ("_state", "_events"))
    assert len(runner.calls) >= 2 and all(c["_host"] == "node1" for c in runner.calls)
    assert runner.calls[0]["_state"] == {} and runner.calls[1]["_state"]["v"] == 2


def test_crash_fails_the_task_with_the_message(tmp_path, display):
    case = "rtx3090-oom-attention-workspace-at-graph-stage"
    exp = json.loads((CORPUS / case / "expected.json").read_text())
    log = tmp_path / "server.log"
    th = replay(log, case)
    plugin, _connection = make_action({"log_path": str(log), "log_offset": 0, "timeout": 60})
    plugin._execute_module = RealModule(tmp_path)
    res = plugin.run(task_vars={"inventory_hostname": "node1"})
    th.join()
    assert res["failed"] is True and res["status"] == "crashed" and res["signature"] == exp["signature"]
    assert res["msg"].startswith("SGLang on node1 crashed after ")
    assert display.display.call_args_list[-1].args[0].startswith("node1: crashed at %s: %s (" % (exp["stage"], exp["signature"]))


def test_new_log_lines_at_v_and_probes_at_vvv(tmp_path, display):
    display.verbosity = 3
    log = tmp_path / "server.log"
    log.write_bytes((CORPUS / "warmup-502-initialization-failed-killed" / "server.log").read_bytes())
    plugin, _connection = make_action({"log_path": str(log), "log_offset": 0, "timeout": 30, "url": "http://127.0.0.1:9"})
    plugin._execute_module = RealModule(tmp_path)
    res = plugin.run(task_vars={"inventory_hostname": "node2"})
    assert res["status"] == "crashed"
    shown = [c.args[0] for c in display.v.call_args_list]
    assert any("Uvicorn running on" in s for s in shown)
    assert all(c.kwargs.get("host") == "node2" for c in display.v.call_args_list)
    assert any(c.args[0].startswith("probe ") for c in display.vvv.call_args_list)


def test_check_mode_is_one_round_and_never_fails(tmp_path, display):
    log = tmp_path / "server.log"
    log.write_bytes((CORPUS / "tp2-stuck-in-cuda-graph-capture" / "server.log").read_bytes())
    plugin, _connection = make_action({"log_path": str(log), "log_offset": 0, "timeout": 600}, check_mode=True)
    runner = RealModule(tmp_path)
    runner.check_mode = True
    plugin._execute_module = runner
    t0 = time.monotonic()
    res = plugin.run(task_vars={"inventory_hostname": "node1"})
    assert time.monotonic() - t0 < 10
    assert len(runner.calls) == 1 and runner.calls[0]["_round_seconds"] == 0.0
    assert res["failed"] is False and res["status"] == "starting" and res["stage"] == "cuda_graph"
    # the probe is the task's result, not progress: its line shows with -v only
    assert display.display.call_args_list == []
    assert re.fullmatch(r"node1: init_distributed, load_weights, kv_cache, cuda_graph 0% \(\d+\.\ds\)",
                        [c.args[0] for c in display.v.call_args_list][-1])


def test_connection_failures_are_ridden_out_with_backoff_and_the_wait_goes_on(tmp_path, display, monkeypatch):
    monkeypatch.setattr(action_mod, "backoff_delay", lambda attempt, rand=None: 0.01)
    log = tmp_path / "server.log"
    log.write_bytes((CORPUS / "warmup-502-initialization-failed-killed" / "server.log").read_bytes())
    plugin, connection = make_action({"log_path": str(log), "log_offset": 0, "timeout": 30})
    runner = RealModule(tmp_path, fail_first=3)
    plugin._execute_module = runner
    res = plugin.run(task_vars={"inventory_hostname": "node1"})
    assert connection.reset.call_count == 3 and res["status"] == "crashed" and len(res["connection_lost"]) == 1
    lost = [c.args[0] for c in display.display.call_args_list if "connection lost" in c.args[0]]
    assert len(lost) == 3 and all(line.startswith("node1: connection lost (") and "s of 120s" in line for line in lost)


def test_past_unreachable_timeout_the_wait_fails_naming_the_host(tmp_path, display, monkeypatch):
    monkeypatch.setattr(action_mod, "backoff_delay", lambda attempt, rand=None: 0.05)
    log = tmp_path / "server.log"
    log.write_bytes((CORPUS / "warmup-502-initialization-failed-killed" / "server.log").read_bytes())
    plugin, _connection = make_action({"log_path": str(log), "log_offset": 0, "timeout": 30, "unreachable_timeout": 1})
    plugin._execute_module = RealModule(tmp_path, fail_first=10 ** 6)
    res = plugin.run(task_vars={"inventory_hostname": "node1"})
    assert (res["failed"], res["status"], res["ready"]) == (True, "unreachable", False)
    assert res["msg"].startswith("SGLang on node1: the host is unreachable: no connection for 1s (unreachable_timeout)")


def test_module_argument_error_is_returned_not_looped(tmp_path, display):
    plugin, _connection = make_action({"log_path": str(tmp_path / "x.log"), "crash_patterns": ["(bad"]})
    runner = RealModule(tmp_path)
    plugin._execute_module = runner
    res = plugin.run(task_vars={"inventory_hostname": "node1"})
    assert res["failed"] is True and "not a valid Python regular expression" in res["msg"] and len(runner.calls) == 1


def test_private_options_are_rejected_from_users(tmp_path, display):
    plugin, _connection = make_action({"log_path": "/x.log", "_state": {"v": 1}})
    runner = RealModule(tmp_path)
    plugin._execute_module = runner
    with pytest.raises(AnsibleActionFail, match="Unsupported parameters .*_state"):
        plugin.run(task_vars={"inventory_hostname": "node1"})
    assert runner.calls == []


def _events(*items):
    return [ProgressEvent(**item).to_json() for item in items]


def test_stages_reached_together_share_one_line(display):
    progress = Progress("node1", stable_for=15)
    # a start replayed fast: every stage within a second, a progress bar passing two quarters, then the stability watch
    progress.round({"status": "starting", "_events": _events(
        {"kind": "stage", "stage": "init_distributed", "elapsed": 1.2},
        {"kind": "stage", "stage": "load_weights", "elapsed": 1.2},
        {"kind": "progress", "stage": "load_weights", "percent": 50, "elapsed": 1.3},
        {"kind": "progress", "stage": "load_weights", "percent": 100, "elapsed": 1.3},
        {"kind": "stage", "stage": "cuda_graph", "elapsed": 1.4},
        {"kind": "stage", "stage": "stability", "elapsed": 1.5},
    )})
    # a paced start: stages seconds apart get a line each
    progress.round({"status": "starting", "_events": _events(
        {"kind": "stage", "stage": "http_listening", "elapsed": 9.0},
        {"kind": "stage", "stage": "warmup", "elapsed": 12.5},
    )})
    progress.round({"status": "ready", "stage": "ready", "elapsed": 16.5, "_events": []})
    assert [c.args[0] for c in display.display.call_args_list] == [
        "node1: init_distributed, load_weights 100%, cuda_graph, ready (1.5s), watching it for stable_for=15s",
        "node1: http_listening (9.0s)",
        "node1: warmup (12.5s)",
        "node1: ready (16.5s)",
    ]


def test_progress_line_format():
    # a server found serving stays at stage start; the line says ready, and a check-mode probe has no wait time
    assert progress_line("node1", {"stage": "start", "elapsed": 0.0, "status": "ready"}, probe_only=True) == \
        "node1: ready (one probe, check mode)"
    assert progress_line("node1", {"stage": "ready", "elapsed": 12.3, "status": "ready"}) == "node1: ready (12.3s)"
    assert progress_line("node1", {"stage": "load_weights", "progress": 57, "elapsed": 43.04, "status": "starting"}) == \
        "node1: load_weights 57% (43.0s)"
    assert progress_line("node1", {"stage": "cuda_graph", "signature": "cuda_oom", "elapsed": 83.2, "status": "crashed"}) == \
        "node1: crashed at cuda_graph: cuda_oom (83.2s)"
    assert progress_line("n", {"stage": "init_distributed", "elapsed": 900, "status": "stalled"}) == "n: stalled at init_distributed (900.0s)"


def test_a_failed_rank_ends_the_wait_on_the_other_ranks_of_the_deployment(tmp_path, display, monkeypatch):
    # Two ranks of one deployment waited on by two plugin instances at once (as two forks of one ansible-playbook run
    # would): rank 1 replays a real crash during NCCL init, rank 0 a real start that hangs after the NCCL version line.
    monkeypatch.setattr(action_mod.C, "DEFAULT_LOCAL_TMP", str(tmp_path / "local-tmp"))
    crash_case = "tp8-rank2-exception-during-nccl-init"
    exp = json.loads((CORPUS / crash_case / "expected.json").read_text())
    log0, log1 = tmp_path / "rank0.log", tmp_path / "rank1.log"
    th0 = replay(log0, "gb200-two-node-hang-after-nccl-version", start_after=0.1)
    th1 = replay(log1, crash_case, start_after=1.5)
    results = {}

    def wait(host, log, rank):
        plugin, _connection = make_action({"log_path": str(log), "log_offset": 0, "timeout": 60, "stall_timeout": 50,
                                           "node_rank": rank, "deployment": "glm5-pair"})
        plugin._execute_module = RealModule(tmp_path / host)
        (tmp_path / host).mkdir()
        results[host] = (plugin.run(task_vars={"inventory_hostname": host}), time.monotonic())

    threads = [threading.Thread(target=wait, args=a) for a in (("node1", log0, 0), ("node2", log1, 1))]
    for t in threads:
        t.start()
    for t in threads + [th0, th1]:
        t.join(90)
    r0, t_rank0 = results["node1"]
    r1, t_rank1 = results["node2"]
    assert r1["status"] == "crashed" and r1["signature"] == exp["signature"] and "peer_failure" not in r1
    assert r0["status"] == "crashed" and r0["failed"] is True
    assert r0["peer_failure"]["host"] == "node2" and r0["peer_failure"]["node_rank"] == 1
    assert r0["signature"] == exp["signature"] and r0["error_line"] == exp["first_error_line"]
    assert "failed on rank 1 (node2)" in r0["msg"] and "node1 stopped waiting" in r0["msg"]
    # rank 0 ends within a couple of short rounds after rank 1, not at its stall_timeout (50 s)
    assert t_rank0 - t_rank1 < 5.0


def test_a_ready_rank_fails_when_another_rank_of_the_deployment_failed_after_it(tmp_path, display, monkeypatch):
    # With deployment_size, rank 0 reaching its ready line first does not make the deployment ready: it waits
    # for the other rank's outcome, and rank 1 crashing later fails rank 0 too.
    monkeypatch.setattr(action_mod.C, "DEFAULT_LOCAL_TMP", str(tmp_path / "local-tmp"))
    crash_case = "tp8-rank2-exception-during-nccl-init"
    log0, log1 = tmp_path / "rank0.log", tmp_path / "rank1.log"
    th0 = replay(log0, "rocm-tp2-multimodal-ready-no-cuda-graph", start_after=0.1)
    th1 = replay(log1, crash_case, start_after=6.0)
    results = {}

    def wait(host, log, rank):
        plugin, _connection = make_action({"log_path": str(log), "log_offset": 0, "timeout": 60, "stall_timeout": 50,
                                           "node_rank": rank, "deployment": "pair", "deployment_size": 2})
        (tmp_path / host).mkdir()
        plugin._execute_module = RealModule(tmp_path / host)
        results[host] = plugin.run(task_vars={"inventory_hostname": host})

    threads = [threading.Thread(target=wait, args=a) for a in (("node1", log0, 0), ("node2", log1, 1))]
    for t in threads:
        t.start()
    for t in threads + [th0, th1]:
        t.join(90)
    assert results["node2"]["status"] == "crashed" and "peer_failure" not in results["node2"]
    assert results["node1"]["status"] == "crashed" and results["node1"]["failed"] is True
    assert results["node1"]["peer_failure"]["host"] == "node2"
    assert any("node1: ready" in c.args[0] for c in display.display.call_args_list), "rank 0 was ready first"


class Clock:
    def __init__(self):
        self.now = 100.0
        self.slept = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(round(seconds, 3))
        self.now += seconds


def flaky(failures, clock, cost=0.0):
    """A round that fails `failures` times (each attempt costing `cost` seconds, as a timed-out ssh does), then answers."""
    left = [failures]

    def run_round():
        clock.now += cost
        if left[0]:
            left[0] -= 1
            raise AnsibleConnectionFailure("Failed to connect to the host via ssh: Connection timed out\nmore")
        return {"status": "starting"}
    return run_round


def test_backoff_doubles_to_its_cap_with_jitter_bounds():
    assert [action_mod.backoff_delay(a, rand=lambda: 0.5) for a in range(8)] == [1, 2, 4, 8, 16, 30, 30, 30]
    assert action_mod.backoff_delay(2, rand=lambda: 0.0) == pytest.approx(3.2)
    assert action_mod.backoff_delay(2, rand=lambda: 1.0) == pytest.approx(4.8)


def test_reconnector_rides_out_a_gap_and_says_so_once_per_retry():
    clock, said, resets = Clock(), [], []
    rc = action_mod.Reconnector("node1", 120, clock=clock.clock, sleeper=clock.sleep, rand=lambda: 0.5, say=said.append)
    assert rc.call(flaky(4, clock), lambda: resets.append(1)) == {"status": "starting"}
    assert clock.slept == [1, 2, 4, 8] and len(resets) == 4 and rc.lost_for == [15.0]
    assert said[2] == "node1: connection lost (Failed to connect to the host via ssh: Connection timed out), retrying in 4s; 3s of 120s"


def test_reconnector_gives_up_at_its_bound_and_never_sleeps_past_it():
    clock, said = Clock(), []
    rc = action_mod.Reconnector("node1", 30, clock=clock.clock, sleeper=clock.sleep, rand=lambda: 0.5, say=said.append)
    with pytest.raises(action_mod.Unreachable):
        rc.call(flaky(10 ** 6, clock, cost=2.0), lambda: None)
    # lost at 102; failures seen at +0, +3, +7, +13, +23 (sleeps of 1, 2, 4, 8 plus 2 s per attempt); the next sleep is
    # cut from 16 to the 7 s left of the bound of 30; the last attempt, made at the bound, fails 2 s later: unreachable
    assert clock.slept == [1, 2, 4, 8, 7]
    assert clock.now - 102.0 == 32 and len(said) == 5
