# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Tests of the probes of wait_for_sglang: systemctl show decisions, journal output, pid watch, HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.wait import _sources as sources
from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _probe as probe
from ansible_collections.llmops.sglang.plugins.module_utils.host._systemd import parse_show

# `systemctl show -p ActiveState,SubState,Result,NRestarts,ExecMainStatus,ExecMainCode,ExecMainPID,InvocationID,MainPID,LoadState`
# prints the properties in systemd's own order (service properties first, then unit properties), as below (systemd 252).
SHOW_RUNNING = """MainPID=41210
ExecMainPID=41210
ExecMainCode=0
ExecMainStatus=0
Result=success
NRestarts=0
LoadState=loaded
ActiveState=active
SubState=running
InvocationID=2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e
"""
SHOW_FAILED_EXIT1 = """MainPID=0
ExecMainPID=41210
ExecMainCode=1
ExecMainStatus=1
Result=exit-code
NRestarts=0
LoadState=loaded
ActiveState=failed
SubState=failed
InvocationID=2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e
"""
SHOW_AUTO_RESTART_KILLED = """MainPID=0
ExecMainPID=41210
ExecMainCode=2
ExecMainStatus=9
Result=signal
NRestarts=0
LoadState=loaded
ActiveState=activating
SubState=auto-restart
InvocationID=2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e
"""
SHOW_RESTARTED = """MainPID=41377
ExecMainPID=41377
ExecMainCode=0
ExecMainStatus=0
Result=success
NRestarts=1
LoadState=loaded
ActiveState=active
SubState=running
InvocationID=9a8b7c6d5e4f40312a1b2c3d4e5f6071
"""
SHOW_REINVOKED = SHOW_RESTARTED.replace("NRestarts=1", "NRestarts=0")
SHOW_STOPPED = """MainPID=0
ExecMainPID=41210
ExecMainCode=1
ExecMainStatus=0
Result=success
NRestarts=0
LoadState=loaded
ActiveState=inactive
SubState=dead
InvocationID=2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e
"""
SHOW_NEVER_STARTED = """MainPID=0
ExecMainPID=0
ExecMainCode=0
ExecMainStatus=0
Result=success
NRestarts=0
LoadState=loaded
ActiveState=inactive
SubState=dead
InvocationID=
"""
SHOW_NOT_FOUND = """MainPID=0
ExecMainPID=0
ExecMainCode=0
ExecMainStatus=0
Result=success
NRestarts=0
LoadState=not-found
ActiveState=inactive
SubState=dead
InvocationID=
"""
SHOW_START_PRE = SHOW_RUNNING.replace("ActiveState=active", "ActiveState=activating").replace("SubState=running", "SubState=start-pre")


def test_show_unit_reads_every_property_through_the_one_systemctl_reader():
    calls = []

    def run(argv, data=None):
        calls.append(argv)
        return 0, SHOW_FAILED_EXIT1, ""
    props, err = probe.show_unit("sglang.service", run)
    assert err is None and props["ActiveState"] == "failed" and props["ExecMainStatus"] == 1
    argv = calls[0]
    assert argv[:2] == ["systemctl", "show"] and argv[-1] == "sglang.service" and argv[-2] == "--"
    assert argv[argv.index("-p") + 1].split(",") == list(probe.UNIT_PROPERTIES)


def test_show_unit_failure_is_an_error_text_not_an_exception():
    props, err = probe.show_unit("sglang.service", lambda argv, data=None: (1, "", "Failed to connect to bus"))
    assert props == {} and "systemctl show sglang.service failed (rc=1)" in err and "Failed to connect to bus" in err


def _verdict(text, baseline_text=None):
    baseline = probe.unit_baseline(parse_show(baseline_text)) if baseline_text else None
    return probe.unit_verdict(parse_show(text), baseline)


@pytest.mark.parametrize("text, baseline, crashed, words, code", [
    (SHOW_RUNNING, None, False, None, None),
    (SHOW_RUNNING, SHOW_RUNNING, False, None, None),
    (SHOW_START_PRE, SHOW_START_PRE, False, None, None),
    (SHOW_FAILED_EXIT1, SHOW_RUNNING, True, "unit failed", 1),
    (SHOW_FAILED_EXIT1, None, True, "unit failed", 1),
    (SHOW_AUTO_RESTART_KILLED, SHOW_RUNNING, True, "about to restart", -9),
    (SHOW_RESTARTED, SHOW_RUNNING, True, "NRestarts 0 -> 1", None),
    (SHOW_REINVOKED, SHOW_RUNNING, True, "InvocationID 2f7c0b4c6d0e4b1a9c3e5f7a8b9c0d1e -> 9a8b", None),
    (SHOW_STOPPED, SHOW_RUNNING, True, "unit stopped", 0),
    (SHOW_NEVER_STARTED, None, True, "not running", None),
    (SHOW_NOT_FOUND, None, True, "not-found", None),
])
def test_unit_verdict(text, baseline, crashed, words, code):
    got_crashed, reason, exit_code = _verdict(text, baseline)
    assert got_crashed is crashed
    if words:
        assert words in reason
    else:
        assert reason is None
    assert exit_code == code


def test_restarted_unit_first_seen_is_not_a_restart():
    """NRestarts=1 at the first observation belongs to an earlier start; only growth during the wait counts."""
    assert _verdict(SHOW_RESTARTED, SHOW_RESTARTED) == (False, None, None)


def test_show_unit_uses_argv_and_reports_rc():
    calls = []

    def run(argv):
        calls.append(argv)
        return 1, "", "Failed to connect to bus: Host is down\n"

    props, err = probe.show_unit("sglang.service", run)
    assert props == {} and "Host is down" in err and "sglang.service" in err
    assert isinstance(calls[0], list)


JOURNAL_OUT = """[2026-06-11 05:10:02 TP0] Init torch distributed begin.
[2026-06-11 05:10:03 TP0] Load weight begin. avail mem=23.20 GB
-- cursor: s=6c0ea6ee3c9f4d0b8b1f1d0e0b6a8c11;i=1a2f;b=0f3e8a7c;m=2c1d0e;t=61e3d2c1b0a09;x=8c6f3e2d1b0a9f87
"""


def test_parse_journal_output_and_cursor():
    text, cursor = sources.parse_journal_output(JOURNAL_OUT)
    assert text.endswith("avail mem=23.20 GB\n") and text.count("\n") == 2
    assert cursor.startswith("s=6c0ea6ee") and cursor.endswith("x=8c6f3e2d1b0a9f87")
    assert sources.parse_journal_output("-- No entries --\n") == ("", None)
    assert sources.parse_journal_output("") == ("", None)


def test_journal_argv_after_cursor_and_invocation_match():
    argv = sources.journal_argv("2f7c0b4c", None)
    assert "_SYSTEMD_INVOCATION_ID=2f7c0b4c" in argv and "--after-cursor" not in argv
    assert ["-o", "cat"] == argv[argv.index("-o"):argv.index("-o") + 2] and "--show-cursor" in argv
    argv = sources.journal_argv("2f7c0b4c", "s=abc")
    assert argv[argv.index("--after-cursor") + 1] == "s=abc"


def test_read_journal_keeps_cursor_when_nothing_new():
    text, cursor, err = sources.read_journal("inv", "s=old", lambda argv: (0, "", ""))
    assert (text, cursor, err) == ("", "s=old", None)
    text, cursor, err = sources.read_journal("inv", None, lambda argv: (0, JOURNAL_OUT, ""))
    assert "Load weight begin" in text and cursor.startswith("s=6c0e") and err is None


# ------------------------------------------------------------------------------------------------ real processes

def test_pid_watch_real_child_exit_and_zombie():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    try:
        exited, reason, start = probe.pid_verdict(child.pid, None)
        assert exited is False and start is not None
        # not reaped yet: a zombie counts as exited (polled: the child's 0.3 s end can come late on a loaded machine)
        deadline = time.monotonic() + 15
        while True:
            exited, reason, _start_ticks = probe.pid_verdict(child.pid, start)
            if exited or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert exited is True and "state Z" in reason
    finally:
        child.wait()
    exited, reason, _start_ticks = probe.pid_verdict(child.pid, start)
    assert exited is True and str(child.pid) in reason


def test_pid_watch_detects_pid_reuse():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        alive, start, state = probe.pid_identity(child.pid)
        # D too: a child just started may be paging in its interpreter (CI run ci-f, load 8: state D); alive all three
        assert alive and state in ("S", "R", "D")
        exited, reason, _start_ticks = probe.pid_verdict(child.pid, start + 12345)
        assert exited is True and "reused" in reason
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()


# ------------------------------------------------------------------------------------------------ HTTP

class _SGLangLike(BaseHTTPRequestHandler):
    """Answers like SGLang 0.5.x: /health 503 (empty body) until `health_ok_after` calls, /v1/models needs the key."""

    def log_message(self, *args):  # keep pytest output clean
        pass

    def do_GET(self):
        srv = self.server
        srv.calls.append(self.path)
        if self.path.startswith("/health"):
            srv.health_calls += 1
            if srv.slow:
                time.sleep(srv.slow)
            code = 200 if srv.health_calls > srv.health_ok_after else 503
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if srv.api_key and self.headers.get("Authorization") != "Bearer %s" % srv.api_key:
            body = json.dumps({"error": "Unauthorized"}).encode()
            self.send_response(401)
        elif self.path == "/v1/models":
            model = {"id": srv.model, "object": "model", "created": 1764480000, "owned_by": "sglang", "root": srv.model,
                     "max_model_len": 65536}
            body = json.dumps({"object": "list", "data": [model]}).encode()
            self.send_response(200)
        else:
            body = b'{"detail":"Not Found"}'
            self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture()
def sglang_http():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _SGLangLike)
    srv.daemon_threads = True
    srv.calls, srv.health_calls, srv.health_ok_after, srv.api_key, srv.model, srv.slow = [], 0, 2, None, "glm-5", 0
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    srv.url = "http://127.0.0.1:%d" % srv.server_address[1]
    yield srv
    srv.shutdown()
    srv.server_close()


def test_health_503_then_200(sglang_http):
    got = [probe.http_get(sglang_http.url, "/health")["status"] for _attempt in range(3)]
    assert got == [503, 503, 200]
    res = probe.http_get(sglang_http.url, "/health")
    assert res["error"] is None and res["refused"] is False and res["elapsed_ms"] >= 0
    assert res["url"] == sglang_http.url + "/health"


def test_models_and_api_key(sglang_http):
    sglang_http.api_key = "sk-test"
    res = probe.http_get(sglang_http.url, "/v1/models")
    assert res["status"] == 401 and probe.is_auth_failure(res["status"])
    res = probe.http_get(sglang_http.url, "/v1/models", api_key="sk-test")
    assert res["status"] == 200 and probe.parse_models(res["body"]) == ["glm-5"]
    # /health stays open without the key
    assert probe.http_get(sglang_http.url, "/health")["status"] in (200, 503)


def test_connection_refused_is_not_listening():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    res = probe.http_get("http://127.0.0.1:%d" % port, "/health", timeout=1)
    assert res["status"] is None and res["refused"] is True and "refused" in res["error"].lower()


def test_slow_health_times_out_quickly(sglang_http):
    # a server 4 s slow, a 0.3 s timeout: the call ends long before the answer would (margins for a loaded machine)
    sglang_http.slow = 4.0
    t0 = time.monotonic()
    res = probe.http_get(sglang_http.url, "/health", timeout=0.3)
    assert time.monotonic() - t0 < 3.0
    assert res["status"] is None and "timed out" in str(res["error"])


def test_parse_models_rejects_other_json():
    assert probe.parse_models('{"detail": "Not Found"}') is None
    assert probe.parse_models("not json") is None
    assert probe.parse_models('{"data": [{"id": "a"}, {"id": "b"}, {"x": 1}]}') == ["a", "b"]


def test_https_refused_reports_error_without_raising():
    res = probe.http_get("https://127.0.0.1:1", "/health", validate_certs=False, timeout=0.5)
    assert res["status"] is None and res["refused"] is True and res["error"]


# `journalctl -o json --output-fields=MESSAGE` lines (systemd 252): __CURSOR and the timestamps are always printed; a
# message with control characters (a tqdm bar's carriage returns) is an array of byte values.
JSON_TEXT = ('{"__CURSOR":"s=6c0ea6ee3c9f4d0b8b1f1d0e0b6a8c11;i=1a2f;b=0f3e8a7c;m=2c1d0e;t=61e3d2c1b0a09;x=8c6f3e2d1b0a9f87",'
             '"__REALTIME_TIMESTAMP":"1781154602123456","__MONOTONIC_TIMESTAMP":"2900238","_BOOT_ID":"0f3e8a7c5b6d4e3f",'
             '"MESSAGE":"[2026-06-11 05:10:02 TP0] Init torch distributed begin."}')
BAR = "Loading 50%\rLoading 100%"
JSON_BYTES = ('{"__CURSOR":"s=6c0ea6ee3c9f4d0b8b1f1d0e0b6a8c11;i=1a30;b=0f3e8a7c;m=2c1d1f;t=61e3d2c1b0b1a;x=1d2c3b4a59687766",'
              '"__REALTIME_TIMESTAMP":"1781154602200000","__MONOTONIC_TIMESTAMP":"2977000","_BOOT_ID":"0f3e8a7c5b6d4e3f",'
              '"MESSAGE":%s}' % json.dumps(list(BAR.encode())))


def test_parse_journal_json_line():
    assert sources.parse_journal_json_line(JSON_TEXT) == (
        "[2026-06-11 05:10:02 TP0] Init torch distributed begin.",
        "s=6c0ea6ee3c9f4d0b8b1f1d0e0b6a8c11;i=1a2f;b=0f3e8a7c;m=2c1d0e;t=61e3d2c1b0a09;x=8c6f3e2d1b0a9f87")
    msg, cursor = sources.parse_journal_json_line(JSON_BYTES)
    assert msg == BAR and cursor.endswith("x=1d2c3b4a59687766")
    assert sources.parse_journal_json_line('{"__CURSOR":"s=1"}') == (None, "s=1")


def test_journal_follow_argv():
    argv = sources.journal_follow_argv("2f7c0b4c", "s=abc")
    assert "--follow" in argv and "--lines=all" in argv and argv[argv.index("-o") + 1] == "json"
    assert argv[argv.index("--after-cursor") + 1] == "s=abc" and argv[-1] == "_SYSTEMD_INVOCATION_ID=2f7c0b4c"
    assert "--after-cursor" not in sources.journal_follow_argv("2f7c0b4c")


def test_journal_stream_over_a_real_pipe_counts_only_complete_entries():
    rfd, wfd = os.pipe()
    stream = sources.JournalStream(rfd)
    try:
        assert stream.read() == ("", None, False)
        os.write(wfd, (JSON_TEXT + "\n" + JSON_BYTES[:40]).encode())
        text, cursor, ended = stream.read()
        assert text == "[2026-06-11 05:10:02 TP0] Init torch distributed begin.\n" and cursor.endswith("x=8c6f3e2d1b0a9f87")
        assert not ended
        os.write(wfd, (JSON_BYTES[40:] + "\n").encode())
        text, cursor, ended = stream.read()
        assert text == BAR + "\n" and cursor.endswith("x=1d2c3b4a59687766")
        os.close(wfd)
        wfd = None
        assert stream.read() == ("", None, True)
    finally:
        if wfd is not None:
            os.close(wfd)
        stream.close()


@pytest.mark.parametrize("url, loopback", [
    ("http://127.0.0.1:30000", True), ("http://127.8.9.1:30000", True), ("http://localhost:30000", True),
    ("http://[::1]:30000", True), ("http://0.0.0.0:30000", True), ("https://[::]:443", True),
    ("http://10.213.0.11:30000", False), ("http://gpu-node-1:30000", False), ("127.0.0.1:30000", True),
    ("http://[fe80::1]:30000", False),
])
def test_loopback_urls_bypass_proxies(url, loopback):
    assert probe.is_loopback(url) is loopback
