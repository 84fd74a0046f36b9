# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: how fast and how cheaply llmops.sglang.wait_for_sglang decides, side by side with the alternatives.

Replays real corpus logs (tests/fixtures/sglang-logs) into a temp file at their recorded pace, time-compressed by
--factor, while a local HTTP server answers like SGLang (port closed until the 'Uvicorn running on' line, /health 503
until the ready line, then 200). All waiters watch the same replay at the same time:

* wait_for_sglang, module_utils round in its own process (run_round, no Ansible around it)
* wait_for_sglang through real ansible-playbook (local connection, action plugin + module rounds)
* the operators' shell loop: for i in $(seq ..); do sleep 15; grep -q 'fired up' LOG && break; done
  (sleep scaled by 1/--factor; latencies are reported scaled and as raw equivalent = scaled x factor)
* ansible.builtin.wait_for with search_regex (its default sleep of 1 s, not scaled)
* ansible.builtin.uri with until/retries on /health (delay 10 s scaled by 1/--factor)

Measured: ready-detection latency (ready line written -> waiter returned; median over --trials), crash-detection
latency (first error line written -> returned), bytes read with a 1 GiB log already present (/proc/<pid>/io rchar;
a process's counters include its reaped children), CPU time during a long quiet wait (getrusage).

Usage: PYTHONPATH=<dir holding ansible_collections> python benchmarks/wait_latency.py [--trials 3] [--write-docs]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "tests" / "fixtures" / "sglang-logs"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from sglang_corpus import materialize  # noqa: E402  pylint: disable=wrong-import-position

materialize()  # the logs are stored gzipped (tests/sglang_corpus.py)
DOC = REPO / "docs" / "wait_for_sglang.md"
READY_CASE = "gb10-dflash-spec-decoding-ready"
CRASH_CASE = "rocm-tp2-oom-both-ranks-at-weight-init"
READY_LINE = b"The server is fired up and ready to roll!"
LISTEN_LINE = b"Uvicorn running on"
TS_RE = re.compile(rb"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")
PLAYBOOK_BIN = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable)) or shutil.which("ansible-playbook")

# Runs a command, then prints its own /proc/self/io rchar (which includes the reaped children) and children's CPU.
WRAPPER = r"""
import json, resource, subprocess, sys, time
out = sys.argv[1]
p = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
t_end = time.time()
io = dict(l.split(": ") for l in open("/proc/self/io").read().split("\n") if l)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
json.dump({"t_end": t_end, "rc": p.returncode, "rchar": int(io["rchar"]), "cpu": ru.ru_utime + ru.ru_stime,
           "stdout": p.stdout.decode("utf-8", "replace")[-20000:]}, open(out, "w"))
"""

# The module_utils round in its own process: measures only the wait (not the interpreter start-up).
RUNNER = r"""
import json, resource, sys, time
from ansible_collections.llmops.sglang.plugins.module_utils.wait._round import run_round
args = json.loads(sys.argv[1])
def rchar():
    return int([l for l in open("/proc/self/io") if l.startswith("rchar")][0].split()[1])
r0, ru0, w0 = rchar(), resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
res = run_round(args)
t_done = time.time()
r1, ru1, w1 = rchar(), resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
print("RUNNER " + json.dumps({"t_done": t_done, "status": res["status"], "elapsed": res["elapsed"],
      "rchar_wait": r1 - r0, "cpu_wait": (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime), "wall": w1 - w0}))
"""


# ---------------------------------------------------------------------------------------------------- replay + HTTP

class SGLangHTTP(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path.startswith("/health"):
            self.send_response(200 if self.server.ready else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"object": "list", "data": [{"id": "bench-model", "object": "model", "owned_by": "sglang"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class Replay(threading.Thread):
    """Writes a corpus log line by line at its recorded pace / factor (gaps capped), after a lead-in."""

    def __init__(self, case, path, port, factor, lead_in, max_gap=2.0, mark=None):
        super().__init__(daemon=True)
        self.data = (CORPUS / case / "server.log").read_bytes()
        self.path, self.port, self.factor, self.lead_in, self.max_gap = path, port, factor, lead_in, max_gap
        self.mark = mark or READY_LINE
        self.t_mark = None
        self.server = None
        self.done = threading.Event()

    def _listen(self):
        if self.server is None:
            self.server = ThreadingHTTPServer(("127.0.0.1", self.port), SGLangHTTP)
            self.server.daemon_threads = True
            self.server.ready = False
            threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def run(self):
        import datetime
        lines = self.data.splitlines(True)
        time.sleep(self.lead_in)
        prev = None
        with open(self.path, "ab") as f:
            for line in lines:
                m = TS_RE.match(line.lstrip(b"\r"))
                if m:
                    ts = datetime.datetime.strptime(m.group(1).decode(), "%Y-%m-%d %H:%M:%S").timestamp()
                    if prev is not None and ts > prev:
                        time.sleep(min(self.max_gap, (ts - prev) / self.factor))
                    prev = ts
                f.write(line)
                f.flush()
                if LISTEN_LINE in line or READY_LINE in line:
                    self._listen()
                if READY_LINE in line:
                    self.server.ready = True
                if self.t_mark is None and self.mark in line:
                    self.t_mark = time.time()
        self.done.set()

    def stop(self):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


# ---------------------------------------------------------------------------------------------------- waiters

def collections_path():
    import ansible_collections.llmops.sglang as coll
    return str(Path(list(coll.__path__)[0]).parents[2])


class Waiter:
    def __init__(self, name, argv, work, kind, extra_env=None):
        self.name, self.kind = name, kind
        self.out = work / ("%s.json" % re.sub(r"\W+", "_", name))
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path(), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_LOCAL_TEMP=str(work / "ansible-local"), ANSIBLE_REMOTE_TMP=str(work / "ansible-remote"),
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        env.update(extra_env or {})
        self.t_start = time.time()
        self.proc = subprocess.Popen([sys.executable, "-c", WRAPPER, str(self.out)] + argv, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def result(self, timeout):
        self.proc.wait(timeout)
        data = json.loads(self.out.read_text())
        out = data["stdout"]
        t_done = data["t_end"]
        m = re.search(r"T_DONE (\d+\.\d+)", out)
        if m:
            t_done = float(m.group(1))
        m = re.search(r"RUNNER (\{.*\})", out)
        runner = json.loads(m.group(1)) if m else None
        if runner:
            t_done = runner["t_done"]
        data.update(t_done=t_done, runner=runner)
        return data


def playbook(work, name, task_yaml):
    pb = work / ("%s.yml" % name)
    pb.write_text("""
- hosts: all
  gather_facts: false
  tasks:
%s
      ignore_errors: true
    - ansible.builtin.debug:
        msg: "T_DONE {{ now(fmt='%%s.%%f') }}"
""" % task_yaml)
    return [PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable, str(pb)]


def start_waiters(work, log, url, factor, timeout, methods, offset=None):
    ws = []
    if "round" in methods:
        args = {"log_path": str(log), "url": url, "timeout": timeout, "stall_timeout": 0}
        if offset is not None:
            args["log_offset"] = offset
        ws.append(Waiter("wait_for_sglang (module_utils round)", [sys.executable, "-c", RUNNER, json.dumps(args)], work, "round"))
    if "playbook" in methods:
        off = "" if offset is None else "\n        log_offset: %d" % offset
        ws.append(Waiter("wait_for_sglang (ansible-playbook)", playbook(work, "module", """    - llmops.sglang.wait_for_sglang:
        log_path: %s
        url: %s
        timeout: %d
        stall_timeout: 0%s""" % (log, url, timeout, off)), work, "playbook"))
    if "shell" in methods:
        sleep = 15.0 / factor
        n = int(timeout / sleep) + 1
        loop = "for i in $(seq 1 %d); do sleep %.3f; grep -q 'fired up' %s && break; done; echo T_DONE $(date +%%s.%%N)" % (n, sleep, log)
        ws.append(Waiter("shell loop: sleep 15; grep -q 'fired up'", ["/bin/bash", "-c", loop], work, "shell"))
    if "wait_for" in methods:
        ws.append(Waiter("ansible.builtin.wait_for search_regex", playbook(work, "wait_for", """    - ansible.builtin.wait_for:
        path: %s
        search_regex: fired up
        timeout: %d""" % (log, timeout)), work, "wait_for"))
    if "uri" in methods:
        delay = round(10.0 / factor, 3)
        ws.append(Waiter("ansible.builtin.uri until/retries", playbook(work, "uri", """    - ansible.builtin.uri:
        url: %s/health
        status_code: 200
      register: health
      until: health.status == 200
      retries: %d
      delay: %s""" % (url, int(timeout / delay) + 1, delay)), work, "uri"))
    return ws


def write_old_log(path, size):
    """An old log of earlier runs, already present: real text (a corpus run that never got ready, repeated; no
    'fired up' in it), not a sparse file (GNU grep skips holes)."""
    block = (CORPUS / "tp2-stuck-in-cuda-graph-capture" / "server.log").read_bytes()
    assert READY_LINE not in block and b"fired up" not in block
    block = block * (((1 << 20) // len(block)) + 1)
    with open(path, "wb") as f:
        left = size
        while left > 0:
            n = min(left, len(block))
            f.write(block[:n])
            left -= n


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


METHODS = ("round", "playbook", "shell", "wait_for", "uri")


def trial(work, case, factor, lead_in, timeout, mark=None, prefix_bytes=0, methods=METHODS, offset=None):
    work.mkdir(parents=True, exist_ok=True)
    log = work / "server.log"
    if prefix_bytes:
        write_old_log(log, prefix_bytes)
    else:
        log.write_bytes(b"")
    port = free_port()
    url = "http://127.0.0.1:%d" % port
    rep = Replay(case, log, port, factor, lead_in, mark=mark)
    ws = start_waiters(work, log, url, factor, timeout, methods, offset=offset)
    rep.start()
    results = {}
    try:
        for w in ws:
            results[w.kind] = dict(w.result(timeout + 120), name=w.name, t_start=w.t_start)
    finally:
        rep.done.wait(timeout)
        rep.stop()
    for r in results.values():
        r["latency"] = (r["t_done"] - rep.t_mark) if rep.t_mark else None
    return results, rep


# ---------------------------------------------------------------------------------------------------- main

def fmt_s(x):
    return "n/a" if x is None else ("%.2f s" % x if x < 100 else "%.0f s" % x)


def fmt_b(x):
    if x is None:
        return "n/a"
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(x) >= div:
            return "%.1f %s" % (x / div, unit)
    return "%d B" % x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--factor", type=float, default=30.0, help="time compression of the replay (default 30)")
    ap.add_argument("--trials", type=int, default=3, help="ready-latency trials (default 3)")
    ap.add_argument("--long-wait", type=float, default=120.0, help="seconds of the quiet long wait for CPU (default 120)")
    ap.add_argument("--big", type=int, default=1 << 30, help="size of the log already present, bytes (default 1 GiB)")
    ap.add_argument("--write-docs", action="store_true", help="write the table into docs/wait_for_sglang.md")
    args = ap.parse_args(argv)
    if PLAYBOOK_BIN is None:
        sys.exit("ansible-playbook not found next to %s" % sys.executable)
    work = Path(tempfile.mkdtemp(prefix="wait-latency-"))
    names = {}
    ready = {k: [] for k in METHODS}
    try:
        # 0. what a trivial ansible-playbook run costs (start-up), to tell it apart from the waiting itself
        bdir = work / "baseline"
        bdir.mkdir()
        bpb = bdir / "noop.yml"
        bpb.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n    - ansible.builtin.debug:\n        msg: noop\n")
        base = Waiter("noop", [PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", "-e",
                               "ansible_python_interpreter=%s" % sys.executable, str(bpb)], bdir, "noop").result(120)
        print("ansible-playbook start-up: %.2f s CPU, %s read" % (base["cpu"], fmt_b(base["rchar"])), flush=True)
        # 1. ready latency
        for i in range(args.trials):
            res, _rep = trial(work / ("ready-%d" % i), READY_CASE, args.factor, lead_in=8.0, timeout=60)
            for k, r in res.items():
                names[k] = r["name"]
                ready[k].append(r)
            print("ready trial %d: %s" % (i + 1, ", ".join("%s %.2fs" % (k, r["latency"]) for k, r in res.items())), flush=True)
        # 2. crash latency (the alternatives can only time out)
        crash_exp = json.loads((CORPUS / CRASH_CASE / "expected.json").read_text())
        crash_timeout = 20
        crash, _rep = trial(work / "crash", CRASH_CASE, args.factor, lead_in=8.0, timeout=crash_timeout,
                            mark=crash_exp["first_error_line"].encode())
        print("crash trial: %s" % ", ".join("%s %.2fs" % (k, r["latency"]) for k, r in crash.items()), flush=True)
        # 3. bytes read with a big log already present (the waiters start at its end: default log_offset)
        big, _rep = trial(work / "big", READY_CASE, args.factor, lead_in=8.0, timeout=60, prefix_bytes=args.big,
                          methods=("round", "playbook", "shell", "wait_for"))
        print("1 GiB trial: %s" % ", ".join("%s %s" % (k, fmt_b(r["rchar"])) for k, r in big.items()), flush=True)
        # 4. CPU during a long quiet wait (stage load_weights, nothing new for --long-wait seconds)
        quiet = work / "quiet"
        quiet.mkdir()
        qlog = quiet / "server.log"
        qlog.write_bytes(b"[2026-06-11 05:10:02 TP0] Init torch distributed begin.\n"
                         b"[2026-06-11 05:10:04 TP0] Load weight begin. avail mem=78.20 GB\n")
        lw = int(args.long_wait)
        ws = start_waiters(quiet, qlog, "http://127.0.0.1:%d" % free_port(), 1.0, lw, ("round", "playbook", "shell", "wait_for"),
                           offset=0)
        # the same module playbook with ansible's internal_poll_interval raised from 0.001 s to 0.05 s (ansible.cfg;
        # the controller's strategy loop polls its workers at that interval during every task)
        pdir = quiet / "poll"
        pdir.mkdir()
        (pdir / "ansible.cfg").write_text("[defaults]\ninternal_poll_interval = 0.05\n")
        ws.append(Waiter("wait_for_sglang (ansible-playbook, internal_poll_interval = 0.05)", playbook(pdir, "module", """    - llmops.sglang.wait_for_sglang:
        log_path: %s
        log_offset: 0
        timeout: %d
        stall_timeout: 0""" % (qlog, lw)), pdir, "playbook_poll", extra_env={"ANSIBLE_CONFIG": str(pdir / "ansible.cfg")}))
        cpu = dict((w.kind, dict(w.result(lw + 120), name=w.name)) for w in ws)
        print("long wait: %s" % ", ".join("%s %.2fs cpu" % (k, r["cpu"]) for k, r in cpu.items()), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    base_ready = statistics.median(r["latency"] for r in ready["playbook"])
    rows = []
    for k in METHODS:
        lat = statistics.median(r["latency"] for r in ready[k])
        scaled = k in ("shell", "uri")
        lat_txt = fmt_s(lat)
        if scaled:
            lat_txt += " scaled = %s raw" % fmt_s(lat * args.factor)
        ratio = "x%.1f" % ((lat * (args.factor if scaled else 1.0)) / base_ready) if base_ready > 0 else "-"
        c = crash.get(k)
        if k in ("round", "playbook"):
            crash_txt = fmt_s(c["latency"])
        else:
            crash_txt = "never (returned at its %d s timeout, %s after the crash line)" % (crash_timeout, fmt_s(c["latency"]))
        b = big.get(k)
        small = ready[k][0]
        if b is None:
            b_txt = cpu_big = "n/a (reads no log)"
        else:
            if k == "round":
                b_txt = "%s (%s with an empty log)" % (fmt_b(b["runner"]["rchar_wait"]), fmt_b(small["runner"]["rchar_wait"]))
                cpu_big = "%+.2f s" % (b["runner"]["cpu_wait"] - small["runner"]["cpu_wait"])
            else:
                b_txt = "%s (%s with an empty log)" % (fmt_b(b["rchar"]), fmt_b(small["rchar"]))
                if k == "wait_for":
                    b_txt += "; + an mmap scan of the whole file every 1 s, which rchar does not count"
                cpu_big = "%+.2f s" % (b["cpu"] - small["cpu"])
        cp = cpu.get(k)
        if cp is None:
            cpu_txt = "n/a"
        elif k == "round":
            cpu_txt = "%.2f%% (%.2f s)" % (100.0 * cp["runner"]["cpu_wait"] / lw, cp["runner"]["cpu_wait"])
        elif k in ("playbook", "wait_for"):
            steady = cp["cpu"] - base["cpu"]
            cpu_txt = "%.2f%% (%.2f s; %.2f%% after the %.2f s ansible-playbook start-up)" % (
                100.0 * cp["cpu"] / lw, cp["cpu"], 100.0 * steady / lw, base["cpu"])
        else:
            cpu_txt = "%.2f%% (%.2f s)" % (100.0 * cp["cpu"] / lw, cp["cpu"])
        rows.append((names.get(k, k), lat_txt, ratio, crash_txt, b_txt, cpu_big, cpu_txt))

    cp = cpu["playbook_poll"]
    rows.insert(2, (cp["name"], "", "", "", "", "", "%.2f%% (%.2f s; %.2f%% after the start-up)" % (
        100.0 * cp["cpu"] / lw, cp["cpu"], 100.0 * (cp["cpu"] - base["cpu"]) / lw)))
    header = ("| waiter | ready latency (median of %d) | vs. wait_for_sglang via ansible-playbook (raw) | crash latency | bytes read, %s old log present | "
              "extra CPU with that log | CPU in a %d s quiet wait |" % (args.trials, fmt_b(args.big), lw))
    lines = [header, "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s |" % " | ".join(r))
    table = "\n".join(lines)
    meta = ("Measured %s on %d cores, ansible-core from %s, replay of `%s` (ready) and `%s` (crash) compressed x%g; "
            "the shell loop's `sleep 15` and uri's `delay: 10` are scaled by 1/%g and also given as raw equivalent; "
            "wait_for keeps its default 1 s poll." % (
                time.strftime("%Y-%m-%d"), os.cpu_count(), PLAYBOOK_BIN, READY_CASE, CRASH_CASE, args.factor, args.factor))
    print()
    print(table)
    print()
    print(meta)
    if args.write_docs:
        text = DOC.read_text() if DOC.exists() else ""
        block = "<!-- BEGIN wait_latency -->\n%s\n\n%s\n<!-- END wait_latency -->" % (table, meta)
        if "<!-- BEGIN wait_latency -->" in text:
            text = re.sub(r"<!-- BEGIN wait_latency -->.*?<!-- END wait_latency -->", lambda m: block, text, flags=re.S)
        else:
            text += "\n" + block + "\n"
        DOC.write_text(text)
        print("written to %s" % DOC)
    return 0


if __name__ == "__main__":
    sys.exit(main())
