# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Live replay of every case of the SGLang log corpus through the real module, the way it runs.

A writer PROCESS appends the recorded log line by line (LINE_DELAY seconds a line) into a file while real
`ansible-playbook` runs llmops.sglang.wait_for_sglang on it; the writer starts only once the module is in its wait
loop. Two modes per case:

* ``log``: log_path alone (a server started with nohup, no pid passed);
* ``pid``: also the pid of the writer, which exits right after the last line of a crashed recording (SIGKILLs itself
  for a silent kill) and lives on for ready and stalled ones.

Each case must end with the recorded outcome, stage, signature and exact first error line. Detection latency (the
module's decision, seen as its process ending, minus the time the writer wrote the ready line or the last line of a
crash) is bounded per case here; with LLMOPS_REPLAY_RESULTS=<dir> every run writes its record there, and
``python tests/integration/test_wait_for_sglang_live_replay.py <dir>`` prints the matrix and the median latencies.

The replays run in batches of LLMOPS_REPLAY_BATCH (default 4) cases: one ansible-playbook per batch, one local host
alias per case with its own wait arguments and its own remote tmp dir (how its module process is told from the others'),
one fork per host; each case's writer starts when ITS module is following (docs/testing.md, Live replay in batches).

Run: PYTHONPATH=<dir holding ansible_collections> python -m pytest -n 2 tests/integration/test_wait_for_sglang_live_replay.py
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: wait_live (conftest does it under pytest)
import sglang_format_cases  # noqa: E402  pylint: disable=wrong-import-position
from wait_live import ModuleWatches, callback_env, module_following, read_results, wait_playbook  # noqa: E402  pylint: disable=wrong-import-position

try:
    import ansible_collections.llmops.sglang as collection
    COLLECTIONS_PATH = Path(list(collection.__path__)[0]).parents[2]
except ImportError:  # the summary (__main__) needs no collection
    COLLECTIONS_PATH = None

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "fixtures" / "sglang-logs"
CASES = sorted(p.name for p in CORPUS.iterdir() if (p / "expected.json").is_file())
PLAYBOOK_BIN = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable)) or shutil.which("ansible-playbook")
LINE_DELAY = 0.003
STALL_TIMEOUT = 4
READY_MARK = b"The server is fired up and ready to roll"

MODES = ("log", "pid")
# Cases replayed by one ansible-playbook run, one host (and fork) each: see docs/testing.md (Live replay in batches).
BATCH_SIZE = int(os.environ.get("LLMOPS_REPLAY_BATCH", "4"))

# One worker (--dist loadgroup) runs the whole file, batch after batch: each batch already runs BATCH_SIZE replays at
# once, and its tests' records come from the same run.
pytestmark = [pytest.mark.skipif(PLAYBOOK_BIN is None, reason="ansible-playbook is not installed next to this python"),
              pytest.mark.xdist_group("test_wait_for_sglang_live_replay")]

PLAYBOOK = wait_playbook()

# The writer: waits for a line on stdin (the module is following), appends the log line by line, records when it
# wrote the ready line and the last line, then ends as the recording did.
WRITER = r"""
import json, os, signal, sys, time
path, src, start, delay, end, times = sys.argv[1:7]
data = open(src, "rb").read()[int(start):]
sys.stdin.readline()
t = {"ready": None, "last": None}
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for line in data.splitlines(True):
    os.write(fd, line)
    if t["ready"] is None and b"The server is fired up and ready to roll" in line:
        t["ready"] = time.monotonic()
    time.sleep(float(delay))
t["last"] = time.monotonic()
os.close(fd)
with open(times + ".tmp", "w") as f:
    json.dump(t, f)
os.replace(times + ".tmp", times)
if end == "exit1":
    sys.exit(1)
if end == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(600)
"""


def expected(case, corpus=CORPUS):
    return json.loads((corpus / case / "expected.json").read_text())


def writer_end(exp):
    if exp["outcome"] != "crashed":
        return "hang"
    return "kill" if exp["signature"] == "silent_exit" else "exit1"


def playbook_env(tmp_path):
    """ansible-playbook's environment; each host's result is saved to tmp_path/results/<host>.json by the test-only
    callback (tests/callback_plugins/wait_results.py), not by a task of the play."""
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS_PATH), ANSIBLE_NOCOLOR="1",
                ANSIBLE_RETRY_FILES_ENABLED="False", ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-local"),
                ANSIBLE_REMOTE_TMP=str(tmp_path / "ansible-remote"), **callback_env(tmp_path / "results"))


def start_playbook(tmp_path, wait_args):
    (tmp_path / "wait.yml").write_text(PLAYBOOK)
    extra = {"wait_args": wait_args, "ansible_python_interpreter": sys.executable}
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    argv = [PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", str(tmp_path / "wait.yml"), "-e", "@%s" % (tmp_path / "extra.json")]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=playbook_env(tmp_path))


class Replay:
    """One case in one mode, as one host of a batch's play: its log file, its writer process (waiting for "go" on its
    stdin), its own remote tmp dir (how its module process is told from the others') and its wait arguments."""

    def __init__(self, directory, corpus, case, mode):
        self.case, self.mode = case, mode
        self.exp = expected(case, corpus)
        directory.mkdir(parents=True)
        self.log, self.times, self.remote_tmp = directory / "server.log", directory / "times.json", directory / "ansible-remote"
        data = (corpus / case / "server.log").read_bytes()
        start = self.exp.get("new_run_offset_bytes") or 0
        self.log.write_bytes(data[:start])  # an earlier run appended to the same file (derived cases)
        self.args = {"log_path": str(self.log), "log_offset": self.exp.get("stale_offset_bytes") or start, "timeout": 90,
                     "stall_timeout": STALL_TIMEOUT}
        self.writer = subprocess.Popen([sys.executable, "-c", WRITER, str(self.log), str(corpus / case / "server.log"),
                                        str(start), str(LINE_DELAY), writer_end(self.exp), str(self.times)],
                                       stdin=subprocess.PIPE)
        if mode == "pid":
            self.args["pid"] = self.writer.pid
        self.started = False

    def host_vars(self):
        return {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                "ansible_remote_tmp": str(self.remote_tmp), "wait_args": self.args}

    def go(self):
        self.writer.stdin.write(b"go\n")
        self.writer.stdin.flush()
        self.started = True

    def stop(self):
        self.writer.kill()
        self.writer.wait()

    def record(self, res, last_seen):
        """What the case proves: the result against expected.json and the detection latency; None fields when the module
        never followed its log (``error`` says so)."""
        exp = self.exp
        t = json.loads(self.times.read_text()) if self.times.exists() else {}
        proof = t.get("ready") if exp["outcome"] == "ready" else t.get("last")
        latency = None if proof is None or last_seen is None else round(max(0.0, last_seen - proof), 3)
        res = res or {}
        record = {"case": self.case, "mode": self.mode,
                  "expected": {k: exp[k] for k in ("outcome", "stage", "signature", "first_error_line")},
                  "got": {"outcome": res.get("status"), "stage": res.get("stage"), "signature": res.get("signature"),
                          "first_error_line": res.get("error_line")},
                  "latency": latency, "msg": res.get("msg")}
        if not self.started:
            record["error"] = "the module never started following its log"
        out_dir = os.environ.get("LLMOPS_REPLAY_RESULTS")
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
            Path(out_dir, "%s-%s.json" % (self.case, self.mode)).write_text(json.dumps(record))
        return record


def run_batch(directory, jobs):
    """Replay the (corpus, case, mode) jobs as the hosts of ONE ansible-playbook run (forks = one per job); each writer
    starts once its own host's module is following. Returns {"<case>-<mode>": record}."""
    replays = {}
    try:
        for i, (corpus, case, mode) in enumerate(jobs):
            replays["replay%02d" % i] = Replay(directory / ("r%02d" % i), corpus, case, mode)
        inventory = {"all": {"hosts": {h: r.host_vars() for h, r in replays.items()}}}
        (directory / "inventory.json").write_text(json.dumps(inventory))
        (directory / "wait.yml").write_text(PLAYBOOK)
        env = dict(playbook_env(directory), ANSIBLE_FORKS=str(len(replays)))
        play = subprocess.Popen([PLAYBOOK_BIN, "-i", str(directory / "inventory.json"), str(directory / "wait.yml")],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        watch = ModuleWatches({h: r.remote_tmp for h, r in replays.items()})
        out = []
        reader = threading.Thread(target=lambda: out.append(play.stdout.read()), daemon=True)
        reader.start()
        t_end = time.monotonic() + 300
        while play.poll() is None and time.monotonic() < t_end:
            watch.tick()
            for host in watch.following:
                if not replays[host].started:
                    replays[host].go()
            time.sleep(0.01 if watch.known else 0.05)
        if play.poll() is None:
            play.kill()
        play.wait()
        reader.join()
        t_end = time.monotonic() + 30
        while any(r.started and r.exp["outcome"] != "stalled" and not r.times.exists() for r in replays.values()) \
                and time.monotonic() < t_end:
            time.sleep(0.05)
    finally:
        for r in replays.values():
            r.stop()
    results = read_results(directory / "results")
    records = {}
    for host, r in replays.items():
        record = r.record(results.get(host), watch.last_seen[host])
        if host not in results:
            record["error"] = "no result for %s" % host
        if "error" in record:
            record["error"] += "; ansible-playbook said:\n%s" % "".join(out)
        records["%s-%s" % (r.case, r.mode)] = record
    return records


class Batches:
    """The replays of one list of (case, mode) jobs in batches of BATCH_SIZE; each batch runs once per test session
    (the first test that asks for one of its cases runs it, under a lock in a directory every xdist worker of the session
    shares, so a plain ``-n N`` run without --dist loadgroup does not replay a batch twice)."""

    def __init__(self, shared, name, corpus, jobs):
        self.shared, self.name, self.corpus = shared, name, corpus
        self.jobs = list(jobs)

    def record(self, case, mode):
        index = self.jobs.index((case, mode)) // BATCH_SIZE
        done = self.shared / ("%s-%d.json" % (self.name, index))
        with open(self.shared / ("%s-%d.lock" % (self.name, index)), "w", encoding="ascii") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not done.exists():
                jobs = self.jobs[index * BATCH_SIZE:(index + 1) * BATCH_SIZE]
                # a directory of its own for each try: a batch whose run raised is run again by its next test
                attempt = Path(tempfile.mkdtemp(prefix="%s-%d-" % (self.name, index), dir=self.shared))
                records = run_batch(attempt, [(self.corpus, c, m) for c, m in jobs])
                done.write_text(json.dumps(records))
        return json.loads(done.read_text())["%s-%s" % (case, mode)]


def shared_dir(tmp_path_factory):
    """A directory of this test session that all its xdist workers share."""
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "live-replay-batches"
    shared.mkdir(exist_ok=True)
    return shared


@pytest.fixture(scope="module", name="recorded")
def recorded_batches(tmp_path_factory):
    return Batches(shared_dir(tmp_path_factory), "recorded", CORPUS, [(c, m) for c in CASES for m in MODES])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES)
def test_live_replay(recorded, case, mode):
    exp = expected(case)
    record = recorded.record(case, mode)
    assert "error" not in record, record.get("error")
    assert record["got"] == record["expected"], record["msg"]
    if exp["outcome"] == "crashed" and mode == "log" and "no process was watched" in record["msg"]:
        assert "pass pid (or unit)" in record["msg"]
    # Per case only a bound that load cannot break: a decisive line that arrives between two of the action plugin's
    # rounds waits for the next module process (seconds on a loaded 2-core machine). The medians are what
    # docs/wait_for_sglang.md reports (run the summary).
    if exp["outcome"] == "ready":
        assert record["latency"] is not None and record["latency"] < 6.0, record
    elif exp["outcome"] == "crashed":
        assert record["latency"] is not None and record["latency"] < 8.0, record


@pytest.fixture(scope="module", name="generated")
def generated_batches(tmp_path_factory):
    """The generated cases of tests/sglang_format_cases.py, written in the corpus layout (by each worker; they are
    the same), in batches."""
    directory = tmp_path_factory.mktemp("generated-cases")
    sglang_format_cases.write_cases(directory)
    return Batches(shared_dir(tmp_path_factory), "generated", directory,
                   [(c, m) for c in sglang_format_cases.case_names() for m in MODES])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sglang_format_cases.case_names())
def test_live_replay_generated(generated, case, mode):
    """Each error format (a realistic surrounding log, the format's lines, then silence or the exit) and each tool's
    line prefix over recorded cases, through the real module the same way as the recorded cases."""
    exp = expected(case, generated.corpus)
    record = generated.record(case, mode)
    assert "error" not in record, record.get("error")
    assert record["got"] == record["expected"], record["msg"]
    if exp["outcome"] == "crashed":
        assert record["latency"] is not None and record["latency"] < 8.0, record


# Issue 10 fault 5: a long 16-rank log (own synthetic lines) whose file, when the wait starts at the default offset,
# ends inside rank 0's crash line; the writer appends the rest of it and the following lines one by one.
MID_LINE_WRITER = r"""
import os, sys, time
path, rest, delay = sys.argv[1:4]
sys.stdin.readline()
fd = os.open(path, os.O_WRONLY | os.O_APPEND)
for line in open(rest, "rb").read().splitlines(True):
    os.write(fd, line)
    time.sleep(float(delay))
os.close(fd)
sys.exit(1)
"""


def test_default_offset_inside_a_crash_line_reports_a_whole_line(tmp_path):
    lines = ["[2026-06-11 05:10:%02d TP%d] Load weight end. type=Qwen3ForCausalLM, avail mem=61.%02d GB\n"
             % (i % 60, i % 16, i % 100) for i in range(3000)]
    crash = ["[2026-06-11 05:11:58 TP%d] Scheduler hit an exception: Traceback (most recent call last):\n" % r
             for r in range(16)]
    data = "".join(lines + crash + ["RuntimeError: boom\n"]).encode()
    cut = data.index(crash[0].encode()) + 30   # inside rank 0's line, after "...TP0] Sc"
    log, rest = tmp_path / "server.log", tmp_path / "rest.log"
    log.write_bytes(data[:cut])
    rest.write_bytes(data[cut:])
    writer = subprocess.Popen([sys.executable, "-c", MID_LINE_WRITER, str(log), str(rest), str(LINE_DELAY)],
                              stdin=subprocess.PIPE)
    try:
        play = start_playbook(tmp_path, {"log_path": str(log), "pid": writer.pid, "timeout": 90,
                                         "stall_timeout": STALL_TIMEOUT})
        if not module_following(tmp_path / "ansible-remote", gone=lambda: play.poll() is not None):
            play.kill()
            pytest.fail("the module never started following its log:\n%s" % play.communicate()[0])
        writer.stdin.write(b"go\n")
        writer.stdin.flush()
        out = play.communicate(timeout=240)[0]
    finally:
        writer.kill()
        writer.wait()
    results = read_results(tmp_path / "results")
    assert list(results) == ["localhost"], out
    res = results["localhost"]
    assert res["status"] == "crashed" and res["error_line"] == crash[1].rstrip("\n"), res["msg"]


def summary(results_dir):
    """The matrix (right out of N per field and mode) and the median latencies."""
    records = [json.loads(p.read_text()) for p in sorted(Path(results_dir).glob("*.json"))]
    for mode in ("log", "pid"):
        rs = [r for r in records if r["mode"] == mode]
        if not rs:
            continue
        right = dict((k, sum(1 for r in rs if r["got"][k] == r["expected"][k]))
                     for k in ("outcome", "stage", "signature", "first_error_line"))
        false_ready = sum(1 for r in rs if r["got"]["outcome"] == "ready" and r["expected"]["outcome"] != "ready")
        false_crash = sum(1 for r in rs if r["got"]["outcome"] == "crashed" and r["expected"]["outcome"] != "crashed")
        lat = [r["latency"] for r in rs if r["latency"] is not None and r["expected"]["outcome"] != "stalled"]
        lat_ready = [r["latency"] for r in rs if r["latency"] is not None and r["expected"]["outcome"] == "ready"]
        lat_crash = [r["latency"] for r in rs if r["latency"] is not None and r["expected"]["outcome"] == "crashed"]
        print("%s: %d cases; right: %s; false ready %d, false crash %d; median latency %.2fs (ready %.2fs, crashed %.2fs)"
              % (mode, len(rs), right, false_ready, false_crash, statistics.median(lat) if lat else -1,
                 statistics.median(lat_ready) if lat_ready else -1, statistics.median(lat_crash) if lat_crash else -1))
        for r in rs:
            if r["got"] != r["expected"]:
                print("  WRONG %s: got %s expected %s" % (r["case"], r["got"], r["expected"]))


if __name__ == "__main__":
    summary(sys.argv[1])
