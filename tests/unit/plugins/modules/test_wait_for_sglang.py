# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the llmops.sglang.wait_for_sglang module: documentation vs. argument_spec, and the real module run as a
process (as AnsiballZ runs it) on real log files and real child processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from wait_live import module_following

from ansible_collections.llmops.sglang.plugins.modules import wait_for_sglang as mod

CORPUS = Path(__file__).resolve().parents[3] / "fixtures" / "sglang-logs"
MODULE = "ansible_collections.llmops.sglang.plugins.modules.wait_for_sglang"


def run_module(tmp_path, args, check_mode=False, timeout=60):
    args = dict(args, _ansible_inject_invocation=True)
    if check_mode:
        args["_ansible_check_mode"] = True
    argfile = tmp_path / ("args-%d.json" % time.monotonic_ns())
    argfile.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-m", MODULE, str(argfile)], capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_documentation_agrees_with_argument_spec():
    doc = yaml.safe_load(mod.DOCUMENTATION)
    spec = mod.argument_spec()
    # the action plugin's private options are documented as internal, so sanity needs no ignore line
    assert set(doc["options"]) == set(spec)
    assert all("Internal." in doc["options"][k]["description"][0] for k in spec if k.startswith("_"))
    for name, opt in doc["options"].items():
        s = spec[name]
        assert opt["type"] == s["type"], name
        assert opt.get("default") == s.get("default"), name
        assert opt.get("choices") == s.get("choices"), name
        assert opt.get("elements") == s.get("elements"), name
        assert opt.get("required", False) == s.get("required", False), name
        assert opt["description"], name
    assert spec["api_key"]["no_log"] is True
    assert doc["version_added"] == "0.1.0" and not doc["short_description"].endswith(".")
    assert "ansible.builtin.action_common_attributes.flow" in doc["extends_documentation_fragment"]
    yaml.safe_load(mod.EXAMPLES)


def test_return_documents_every_key(tmp_path):
    ret = yaml.safe_load(mod.RETURN)
    for key, val in ret.items():
        assert {"description", "returned", "type", "sample"} <= set(val), key
    log = tmp_path / "server.log"
    log.write_bytes((CORPUS / "rtx3090-oom-attention-workspace-at-graph-stage" / "server.log").read_bytes())
    rc, res = run_module(tmp_path, {"log_path": str(log), "log_offset": 0, "timeout": 10})
    assert rc == 1 and res["failed"] is True
    undocumented = set(res) - set(ret) - {"changed", "failed", "invocation"}
    assert not undocumented, undocumented


def test_direct_call_without_state_loops_until_ready(tmp_path):
    log = tmp_path / "server.log"
    data = (CORPUS / "gb10-dflash-spec-decoding-ready" / "server.log").read_bytes()

    def writer():
        assert module_following(tmp_path)  # write only once the module follows the log, whatever the load
        time.sleep(0.2)
        with open(log, "ab") as f:
            for i in range(0, len(data), 4096):
                f.write(data[i:i + 4096])
                f.flush()
                time.sleep(0.01)

    th = threading.Thread(target=writer)
    th.start()
    rc, res = run_module(tmp_path, {"log_path": str(log), "log_offset": 0, "timeout": 30, "stall_timeout": 10})
    th.join()
    assert rc == 0 and res["status"] == "ready" and res["ready"] is True and not res.get("failed")
    assert [s["stage"] for s in res["stages"]][-1] == "ready" and res["elapsed"] > 0
    assert "_state" not in res and "_events" not in res


def test_crash_fails_with_structured_context(tmp_path):
    case = "warmup-502-initialization-failed-killed"
    exp = json.loads((CORPUS / case / "expected.json").read_text())
    log = tmp_path / "server.log"
    log.write_bytes((CORPUS / case / "server.log").read_bytes())
    rc, res = run_module(tmp_path, {"log_path": str(log), "log_offset": 0, "timeout": 10, "api_key": "sk-abc"})
    assert rc == 1 and res["failed"] is True and res["status"] == "crashed"
    assert res["signature"] == exp["signature"] and res["error_line"] == exp["first_error_line"]
    assert res["error_context"] and res["log_tail"]
    assert res["msg"].startswith("SGLang on ") and "crashed after" in res["msg"]
    args = res["invocation"]["module_args"]
    assert not any(k.startswith("_") for k in args)
    assert "sk-abc" not in json.dumps(res)


def test_check_mode_one_probe_never_fails(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes((CORPUS / "tp2-stuck-in-cuda-graph-capture" / "server.log").read_bytes())
    t0 = time.monotonic()
    rc, res = run_module(tmp_path, {"log_path": str(log), "log_offset": 0, "timeout": 600}, check_mode=True)
    # one probe, not a wait: far below the 600 s a wait would take, and far above a module run on a machine at load 20
    # (the bound was 5 s: 9.4 s at load 12-17)
    assert time.monotonic() - t0 < 60
    assert rc == 0 and not res.get("failed") and res["status"] == "starting" and res["stage"] == "cuda_graph"


def test_driven_round_returns_state_and_never_fails(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes((CORPUS / "rtx3090-oom-attention-workspace-at-graph-stage" / "server.log").read_bytes())
    rc, res = run_module(tmp_path, {"log_path": str(log), "log_offset": 0, "_state": {}, "_round_seconds": 5,
                                    "_host": "node7"})
    assert rc == 0 and not res.get("failed") and res["status"] == "crashed"
    assert isinstance(res["_state"], dict) and res["_state"]["classifier"]["status"] == "crashed"
    assert res["msg"].startswith("SGLang on node7 crashed")
    assert any(e["kind"] == "line" for e in res["_events"]) and "_state" not in res["invocation"]["module_args"]


@pytest.mark.parametrize("args, words", [
    ({"log_path": "/x.log", "crash_patterns": ["(unclosed"]}, "crash_patterns entry '(unclosed' is not a valid"),
    ({"url": "127.0.0.1:30000"}, "must start with http://"),
    ({"log_path": "/x.log", "timeout": -1}, "timeout must be 0 or more"),
    ({"log_path": "/x.log", "served_model_name": "m"}, "url"),
    ({"timeout": 5}, "one of the following is required: log_path, unit, url"),
    ({"log_path": "/x.log", "ready_probe": "port"}, "ready_probe"),
])
def test_bad_arguments_fail_with_what_and_why(tmp_path, args, words):
    rc, res = run_module(tmp_path, args)
    assert rc == 1 and res["failed"] is True and words in res["msg"]


def test_unit_without_systemctl_on_path_is_explained(tmp_path):
    env_path = os.environ.get("PATH", "")
    os.environ["PATH"] = str(tmp_path)  # a host without systemd tools
    try:
        rc, res = run_module(tmp_path, {"unit": "sglang.service"})
    finally:
        os.environ["PATH"] = env_path
    assert rc == 1 and "systemctl was not found" in res["msg"] and "pid and log_path" in res["msg"]


def test_no_secret_leaves_the_host_in_what_the_wait_returns(tmp_path):
    """SGLang logs its configuration, api_key included (0.5.9 engine.py: server_args=ServerArgs(...)); a failing start
    can print an environment value. Neither reaches the result: the log tail, first error line and message come back
    masked, also when the role did not name the key (it came through --config)."""
    key, token = "sk-llmops-secret-0123", "hf_llmopsSecret456789"
    crash = (CORPUS / "rtx3090-oom-attention-workspace-at-graph-stage" / "server.log").read_bytes()
    log = tmp_path / "sglang.log"
    log.write_bytes(b"[2026-01-05 10:00:00] server_args=ServerArgs(model_path='zai-org/GLM-5', api_key='" + key.encode()
                    + b"', admin_api_key=None, port=30000)\n" + crash
                    + b"[2026-01-05 10:00:09] env: HF_TOKEN=" + token.encode() + b" api_key='" + key.encode() + b"'\n")
    rc, res = run_module(tmp_path, {"log_path": str(log), "log_offset": 0, "timeout": 10, "secrets": [token]})
    assert (rc, res["status"], res["signature"]) == (1, "crashed", "cuda_oom")
    text = json.dumps(res)
    assert key not in text and token not in text
    assert any("HF_TOKEN=********" in line and "api_key='********'" in line for line in res["log_tail"])
    assert res["invocation"]["module_args"]["secrets"] == "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"
