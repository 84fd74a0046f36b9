# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""End-to-end tests: real `ansible-playbook` (local connection) runs llmops.sglang.wait_for_sglang while a writer
appends a real corpus log line by line, a real child process exits, or the SGLang stand-in server
(tests/standin/sglang_standin.py: replays a recorded log and serves SGLang's HTTP status codes) runs.

Run: PYTHONPATH=<dir holding ansible_collections> python -m pytest tests/integration/test_wait_for_sglang_playbook.py
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import ansible_collections.llmops.sglang as collection
from wait_live import (PING_TASK_NAME, WAIT_TASK_NAME, ModuleWatch, ModuleWatches, callback_env, module_following,
                       read_results, read_seconds, wait_playbook)

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "fixtures" / "sglang-logs"
STANDIN = REPO / "tests" / "standin" / "sglang_standin.py"
COLLECTIONS_PATH = Path(list(collection.__path__)[0]).parents[2]
PLAYBOOK_BIN = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable)) or shutil.which("ansible-playbook")

# One worker (--dist loadgroup) runs the file: its batch (below) runs once.
pytestmark = [pytest.mark.skipif(PLAYBOOK_BIN is None, reason="ansible-playbook is not installed next to this python"),
              pytest.mark.xdist_group("test_wait_for_sglang_playbook")]

PLAYBOOK = wait_playbook()
TIMED_PLAYBOOK = wait_playbook(timed=True)  # a no-op task first, timed as the wait task is (tests/wait_live.py)


def expected(case):
    return json.loads((CORPUS / case / "expected.json").read_text())


def corpus(case):
    return (CORPUS / case / "server.log").read_bytes()


def run_playbook(tmp_path, wait_args, verbosity=0, check=False, timeout=180, inventory=None, playbook=PLAYBOOK):
    pb = tmp_path / "wait.yml"
    pb.write_text(playbook)
    extra = {"wait_args": wait_args, "ansible_python_interpreter": sys.executable}
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    # the host's result is saved to tmp_path/results/<host>.json by the test-only callback, not by a task of the play
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS_PATH), ANSIBLE_NOCOLOR="1",
               ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_RETRY_FILES_ENABLED="False",
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-local"), ANSIBLE_REMOTE_TMP=str(tmp_path / "ansible-remote"),
               **callback_env(tmp_path / "results"))
    if inventory:
        argv = [PLAYBOOK_BIN, "-i", str(inventory), str(pb), "-e", "@%s" % (tmp_path / "extra.json")]
    else:
        argv = [PLAYBOOK_BIN, "-i", "localhost,", "-c", "local", str(pb), "-e", "@%s" % (tmp_path / "extra.json")]
    if verbosity:
        argv.append("-" + "v" * verbosity)
    if check:
        argv.append("--check")
    t0 = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    took = time.monotonic() - t0
    if check:
        return proc, None, took
    results = read_results(tmp_path / "results")
    assert len(results) == 1, proc.stdout + proc.stderr  # the one host of the inventory (localhost, or node1 over ssh)
    return proc, next(iter(results.values())), took


class Writer(threading.Thread):
    """Appends a corpus log line by line (keeping CR progress bars and a missing final newline as they are)."""

    def __init__(self, path, data, start_after=0.0, line_delay=0.004, mode="ab", before=None, remote_tmp=None):
        super().__init__(daemon=True)
        self.remote_tmp = remote_tmp or (Path(path).parent / "ansible-remote")
        self.path, self.data, self.start_after, self.line_delay, self.mode, self.before = (
            path, data, start_after, line_delay, mode, before)
        self.followed = False  # a batch starts it once its host's module follows (Batch.run)

    def run(self):
        if self.start_after and not self.followed:
            # start writing only once the module is in its wait loop (its follower exists), whatever the load
            assert module_following(self.remote_tmp, timeout=60)
        time.sleep(self.start_after)
        if self.before:
            self.before()
        lines = self.data.splitlines(True)
        with open(self.path, self.mode) as f:
            for line in lines:
                f.write(line)
                f.flush()
                time.sleep(self.line_delay)


# The cases below run as the hosts of ONE ansible-playbook run (local host aliases, each with its own wait arguments, log
# and remote tmp dir, forks = one per case), as the live replays do (docs/testing.md, Live replay in batches); each
# case's writer starts when ITS module follows its log, and each test asserts its own host's result. One play instead of
# one per test: ansible-playbook's own start once, not 11 times; each host's result is saved by the test-only callback
# (tests/callback_plugins/wait_results.py), with no task in the play.
BATCH = {}


def batched(prepare):
    """Register PREPARE(directory, host) -> (wait_args, writer or None) as a case of the batch, under its name."""
    BATCH[prepare.__name__] = prepare
    return prepare


class Batch:
    """The batch's cases, their stand-in processes, and after run() each host's result and the play's output."""

    def __init__(self, directory):
        self.directory, self.procs, self.writers, self.args = directory, [], {}, {}
        self.results, self.out, self.rc = {}, "", None

    def standin(self, directory, case, api_key=None, served="Qwen/Qwen3-8B", max_seconds=3.0):
        """Start the SGLang stand-in (a real process replaying a recorded log to its stderr = the log file, serving HTTP)."""
        port = _free_port()
        log = directory / ("standin-%d.log" % port)
        argv = [sys.executable, str(STANDIN), "--recording", str(CORPUS / case), "--max-seconds", str(max_seconds),
                "--host", "127.0.0.1", "--port", str(port), "--served-model-name", served]
        if api_key:
            argv += ["--api-key", api_key]
        with open(log, "ab") as f:
            p = subprocess.Popen(argv, stderr=f, stdout=subprocess.DEVNULL)
        self.procs.append(p)
        return p, log, "http://127.0.0.1:%d" % port

    def run(self):
        hosts = {}
        try:
            for host, prepare in BATCH.items():
                directory = self.directory / host
                directory.mkdir()
                self.args[host], writer = prepare(self, directory)
                if writer is not None:
                    writer.followed = True
                    self.writers[host] = writer
                hosts[host] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                               "ansible_remote_tmp": str(directory / "ansible-remote"), "wait_args": self.args[host]}
            self._play(hosts)
        finally:
            for writer in self.writers.values():
                if writer.is_alive():
                    writer.join(30)
            for p in self.procs:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def _play(self, hosts):
        inventory = {"all": {"hosts": hosts}}
        (self.directory / "inventory.json").write_text(json.dumps(inventory))
        (self.directory / "wait.yml").write_text(PLAYBOOK)
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS_PATH), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_RETRY_FILES_ENABLED="False", ANSIBLE_LOCAL_TEMP=str(self.directory / "ansible-local"),
                   ANSIBLE_FORKS=str(len(hosts)), **callback_env(self.directory / "results"))
        play = subprocess.Popen([PLAYBOOK_BIN, "-i", str(self.directory / "inventory.json"), str(self.directory / "wait.yml")],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        out = []
        reader = threading.Thread(target=lambda: out.append(play.stdout.read()), daemon=True)
        reader.start()
        watch = ModuleWatches(dict((host, Path(h["ansible_remote_tmp"])) for host, h in hosts.items() if host in self.writers))
        t_end = time.monotonic() + 300
        while play.poll() is None and time.monotonic() < t_end:
            watch.tick()
            for host in watch.following:
                if self.writers[host].ident is None:
                    self.writers[host].start()
            time.sleep(0.01 if watch.known else 0.05)
        if play.poll() is None:
            play.kill()
        self.rc = play.wait()
        reader.join()
        self.out = "".join(out)
        self.results = read_results(self.directory / "results")

    def result(self, host):
        """(the host's registered result, the play's output); the play itself ran to its end."""
        assert self.rc == 0 and self.results.get(host) is not None, self.out
        return self.results[host], self.out


@pytest.fixture(scope="module", name="batch")
def batch_fixture(tmp_path_factory):
    done = Batch(tmp_path_factory.mktemp("batch"))
    done.run()
    return done


def recap(out, host):
    """The host's PLAY RECAP line."""
    return next(line for line in out.splitlines() if line.startswith(host + " ") and " : ok=" in line)


@batched
def ready_case(_batch, directory):
    log = directory / "server.log"
    writer = Writer(log, corpus("gb10-dflash-spec-decoding-ready"), start_after=1.0, line_delay=0.01)
    return {"log_path": str(log), "log_offset": 0, "timeout": 60, "stall_timeout": 30}, writer


def test_ready_case_prints_progress_and_succeeds(batch):
    res, out = batch.result("ready_case")
    assert "failed=0" in recap(out, "ready_case") and "ignored=0" in recap(out, "ready_case"), out
    assert res["status"] == "ready" and res["ready"] is True and res["stage"] == "ready"
    progress = [ln for ln in out.splitlines() if ln.startswith("ready_case: ")]
    assert progress and progress[-1].startswith("ready_case: ready (")
    assert [s["stage"] for s in res["stages"]][-1] == "ready"


@batched
def crash_case(_batch, directory):
    log = directory / "server.log"
    writer = Writer(log, corpus("rocm-tp2-oom-both-ranks-at-weight-init"), start_after=1.0)
    return {"log_path": str(log), "log_offset": 0, "timeout": 60}, writer


def test_crash_case_fails_with_signature_and_error_line(batch):
    exp = expected("rocm-tp2-oom-both-ranks-at-weight-init")
    res, out = batch.result("crash_case")
    assert "ignored=1" in recap(out, "crash_case"), out
    assert res["failed"] is True and res["status"] == "crashed"
    assert (res["signature"], res["stage"], res["error_line"]) == (exp["signature"], exp["stage"], exp["first_error_line"])
    assert "crash_case: crashed at %s: %s (" % (exp["stage"], exp["signature"]) in out
    assert res["msg"].startswith("SGLang on crash_case crashed after ")


@batched
def late_file(_batch, directory):
    log = directory / "logs" / "server.log"
    log.parent.mkdir()
    writer = Writer(log, corpus("rocm-tp2-multimodal-ready-no-cuda-graph"), start_after=0.3)
    return {"log_path": str(log), "timeout": 60, "stall_timeout": 30}, writer


def test_file_appearing_late(batch):
    res, out = batch.result("late_file")
    assert "ignored=0" in recap(out, "late_file"), out
    assert res["status"] == "ready" and res["log_reset"] == "appeared" and res["elapsed"] >= 0.3


@batched
def truncated(_batch, directory):
    """An old run's log is present (its ready line must not count); the file is truncated (copytruncate) and the new
    run crashes."""
    log = directory / "server.log"
    log.write_bytes(corpus("gb10-dflash-spec-decoding-ready"))

    def truncate():
        with open(log, "r+b") as f:
            f.truncate(0)

    writer = Writer(log, corpus("warmup-502-initialization-failed-killed"), start_after=1.0, before=truncate)
    return {"log_path": str(log), "timeout": 60}, writer


def test_truncation_of_an_old_log_mid_wait(batch):
    exp = expected("warmup-502-initialization-failed-killed")
    res, _out = batch.result("truncated")
    assert res["status"] == "crashed" and res["signature"] == exp["signature"] and res["log_reset"] == "truncated"
    assert res["error_line"] == exp["first_error_line"]


@batched
def rotated(_batch, directory):
    log = directory / "server.log"
    log.write_bytes(corpus("gb10-dflash-spec-decoding-ready"))

    def rotate():
        os.rename(log, str(log) + ".1")

    writer = Writer(log, corpus("rtx3090-marlin-check-failure-in-piecewise-capture"), start_after=1.0, before=rotate)
    return {"log_path": str(log), "timeout": 60}, writer


def test_rotation_to_a_new_file_mid_wait(batch):
    exp = expected("rtx3090-marlin-check-failure-in-piecewise-capture")
    res, _out = batch.result("rotated")
    assert res["status"] == "crashed" and res["log_reset"] in ("replaced", "appeared")
    assert (res["signature"], res["error_line"]) == (exp["signature"], exp["first_error_line"])


@batched
def appended(_batch, directory):
    case = "appended-crash-then-ready-same-host"
    data = corpus(case)
    offset = expected(case)["new_run_offset_bytes"]
    log = directory / "server.log"
    log.write_bytes(data[:offset])  # the earlier run crashed; its traceback is in the file
    return {"log_path": str(log), "log_offset": offset, "timeout": 60}, Writer(log, data[offset:], start_after=1.0)


def test_appended_earlier_run_with_log_offset(batch):
    res, out = batch.result("appended")
    assert "ignored=0" in recap(out, "appended"), out
    assert res["status"] == "ready" and res["signature"] is None
    assert res["log_offset_end"] <= len(corpus("appended-crash-then-ready-same-host"))


@batched
def stale_offset(_batch, directory):
    case = "rotated-log-stale-offset-beyond-eof"
    log = directory / "server.log"
    writer = Writer(log, corpus(case), start_after=1.0)
    return {"log_path": str(log), "log_offset": expected(case)["stale_offset_bytes"], "timeout": 60}, writer


def test_stale_offset_beyond_eof_reads_from_zero(batch):
    exp = expected("rotated-log-stale-offset-beyond-eof")
    res, _out = batch.result("stale_offset")
    assert res["status"] == "crashed" and (res["signature"], res["error_line"]) == (exp["signature"], exp["first_error_line"])


@batched
def nccl_stall(_batch, directory):
    log = directory / "server.log"
    log.write_bytes(corpus("gb200-two-node-hang-after-nccl-version"))
    return {"log_path": str(log), "log_offset": 0, "timeout": 60, "stall_timeout": 2}, None


def test_stall_at_nccl_init(batch):
    res, _out = batch.result("nccl_stall")
    assert res["status"] == "stalled" and res["stage"] == "init_distributed" and "NCCL" in res["msg"]


@batched
def standin_key(batch, directory):
    proc_s, log, url = batch.standin(directory, "gb10-dflash-spec-decoding-ready", api_key="sk-test")
    return {"log_path": str(log), "log_offset": 0, "pid": proc_s.pid, "url": url, "api_key": "sk-test",
            "served_model_name": "Qwen/Qwen3-8B", "timeout": 60}, None


def test_http_ready_with_api_key_through_standin(batch):
    res, out = batch.result("standin_key")
    assert "ignored=0" in recap(out, "standin_key"), out
    assert res["status"] == "ready" and res["models"] == ["Qwen/Qwen3-8B"]
    assert res["http"]["health"]["status"] == 200 and "sk-test" not in out + json.dumps(res)


@batched
def standin_401(batch, directory):
    proc_s, log, url = batch.standin(directory, "gb10-dflash-spec-decoding-ready", api_key="sk-test", max_seconds=2.0)
    return {"log_path": str(log), "log_offset": 0, "pid": proc_s.pid, "url": url, "timeout": 60}, None


def test_http_401_without_api_key_fails_at_once(batch):
    res, _out = batch.result("standin_401")
    assert res["status"] == "error" and "HTTP 401" in res["msg"] and "api_key" in res["msg"]
    assert res["elapsed"] < 15


@batched
def standin_crash(batch, directory):
    proc_s, log, url = batch.standin(directory, "warmup-502-initialization-failed-killed", max_seconds=2.0)
    return {"log_path": str(log), "log_offset": 0, "pid": proc_s.pid, "url": url, "timeout": 60}, None


def test_standin_crash_exits_and_is_reported(batch):
    res, _out = batch.result("standin_crash")
    assert res["status"] == "crashed" and res["signature"] == expected("warmup-502-initialization-failed-killed")["signature"]


def test_real_child_process_exit_with_pid_watch(tmp_path):
    log = tmp_path / "server.log"
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "f = open(sys.argv[1], 'a')\n"
        "f.write('[2026-06-11 05:10:02 TP0] Init torch distributed begin.\\n'); f.flush()\n"
        "sys.stdin.readline()\n"
        "time.sleep(1)\n"
        "sys.exit(1)\n"), str(log)], stdin=subprocess.PIPE)
    exit_time = []

    def exit_once_followed():  # the child exits 1 s after the module follows its log, whatever the load
        assert module_following(tmp_path / "ansible-remote")
        child.stdin.write(b"go\n")
        child.stdin.flush()
        child.wait()
        exit_time.append(time.monotonic())

    waiter = threading.Thread(target=exit_once_followed, daemon=True)
    waiter.start()
    done = threading.Event()
    watch = ModuleWatch(tmp_path / "ansible-remote")
    poller = threading.Thread(target=watch.run_until, args=(done.is_set,), daemon=True)
    poller.start()
    try:
        _proc, res, _took = run_playbook(tmp_path, {"log_path": str(log), "log_offset": 0, "pid": child.pid, "timeout": 60})
    finally:
        done.set()
        child.wait()
        waiter.join()
        poller.join()
    assert res["status"] == "crashed" and res["signature"] == "process_exited" and res["stage"] == "init_distributed"
    # decided within about one probe interval (sleep 0.25 s) of the exit, however long ansible-playbook took to start
    assert res["exited"]["by"] == "pid" and watch.last_seen - exit_time[0] < 2.0


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_check_mode_reports_without_failing(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(corpus("tp2-stuck-in-cuda-graph-capture"))
    proc, _res, took = run_playbook(tmp_path, {"log_path": str(log), "log_offset": 0, "timeout": 900}, check=True)
    assert proc.returncode == 0 and "failed=0" in proc.stdout and took < 30


def test_verbose_shows_new_log_lines(tmp_path):
    case = "warmup-502-initialization-failed-killed"
    log = tmp_path / "server.log"
    w = Writer(log, corpus(case), start_after=1.0)
    w.start()
    proc, res, _took = run_playbook(tmp_path, {"log_path": str(log), "log_offset": 0, "timeout": 60}, verbosity=1)
    w.join()
    assert res["status"] == "crashed"
    assert "<localhost> " in proc.stdout and "Uvicorn running on" in proc.stdout


# ------------------------------------------------------------------------------------------------ over real SSH

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)


@pytest.fixture(scope="module")
def ssh_host(tmp_path_factory):
    """A real sshd on 127.0.0.1 (own config, keys and port), reached by Ansible's ssh connection."""
    with sshd_host(tmp_path_factory.mktemp("sshd")) as inventory:
        yield inventory


@contextlib.contextmanager
def sshd_host(d):
    """sshd on 127.0.0.1 with its files in D; yields the inventory; stops everything it started at the end."""
    if SSHD is None or shutil.which("ssh-keygen") is None or shutil.which("ssh") is None or os.geteuid() != 0:
        pytest.skip("needs root, sshd, ssh and ssh-keygen (apt-get install openssh-server openssh-client)")
    d.mkdir(exist_ok=True)
    for name in ("hostkey", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    shutil.copy(d / "client.pub", d / "authorized_keys")
    port = _free_port()
    (d / "sshd_config").write_text(
        "Port %d\nListenAddress 127.0.0.1\nHostKey %s\nPidFile %s\nAuthorizedKeysFile %s\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        "UsePAM no\nStrictModes no\n" % (port, d / "hostkey", d / "sshd.pid", d / "authorized_keys"))
    os.makedirs("/run/sshd", exist_ok=True)
    subprocess.run([SSHD, "-f", str(d / "sshd_config"), "-E", str(d / "sshd.log")], check=True)
    t_end = time.monotonic() + 10
    while time.monotonic() < t_end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.1)
    inv = d / "inventory.ini"
    # the connection's ControlPersist masters in a directory of this host's own, closed at the end; a short one under
    # /tmp: a socket path has at most 108 bytes, and ssh's temporary one under pytest's tmp_path
    # (/tmp/pytest-of-root/pytest-140/popen-gw1/test_over_ssh_host_leaves_noth0/sshd/cp/<hash>.<16 random>) was 108
    control_dir = Path(tempfile.mkdtemp(prefix="cp-", dir="/tmp"))
    inv.write_text(
        "node1 ansible_host=127.0.0.1 ansible_port=%d ansible_user=root ansible_connection=ssh "
        "ansible_ssh_private_key_file=%s ansible_python_interpreter=%s ansible_control_path_dir=%s "
        "ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'\n"
        % (port, d / "client", sys.executable, control_dir))
    try:
        yield inv
    finally:
        _stop_sshd(d / "sshd.pid", control_dir)
        shutil.rmtree(control_dir, ignore_errors=True)


def _stop_sshd(pid_file, control_dir):
    """Close the ssh masters under CONTROL_DIR, then stop the listener and every session it forked: a persisted master
    keeps its session (sshd: root@notty) alive after the listener is gone, both left on the machine otherwise."""
    for sock in control_dir.iterdir():
        subprocess.run(["ssh", "-o", "ControlPath=%s" % sock, "-O", "exit", "node1"], capture_output=True, check=False,
                       timeout=10)
    try:
        listener = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    sessions = subprocess.run(["pgrep", "-P", str(listener)], capture_output=True, text=True, check=False).stdout.split()
    for pid in [listener] + [int(p) for p in sessions]:
        try:
            os.kill(pid, 15)
        except OSError:
            pass


def _pids_of(pattern):
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    return {int(p) for p in found.stdout.split()}


def test_over_ssh_host_leaves_nothing_running(tmp_path):
    """The host's end closes the connection's persisted master and the session it holds (CI's leftovers step found
    both alive after the listener was stopped)."""
    log = tmp_path / "server.log"
    log.write_bytes(corpus("rocm-tp2-multimodal-ready-no-cuda-graph"))
    with sshd_host(tmp_path / "sshd") as inventory:
        proc, res, _took = run_playbook(tmp_path, {"log_path": str(log), "log_offset": 0, "timeout": 30},
                                        inventory=inventory)
        assert res["status"] == "ready", proc.stdout + proc.stderr
        control_dir = inventory.read_text().split("ansible_control_path_dir=", 1)[1].split()[0]
        masters = _pids_of(control_dir)
        listener = int((tmp_path / "sshd" / "sshd.pid").read_text())
        sessions = {int(p) for p in subprocess.run(["pgrep", "-P", str(listener)], capture_output=True, text=True,
                                                   check=False).stdout.split()}
        assert masters and sessions, (masters, sessions)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(os.path.exists("/proc/%d" % p) for p in masters | sessions | {listener}):
        time.sleep(0.1)
    assert [p for p in masters | sessions | {listener} if os.path.exists("/proc/%d" % p)] == []


def test_over_ssh_ready_and_progress(tmp_path, ssh_host):
    case = "rocm-tp2-multimodal-ready-no-cuda-graph"
    log = tmp_path / "server.log"
    w = Writer(log, corpus(case), start_after=0.5, line_delay=0.01)
    w.start()
    proc, res, _took = run_playbook(tmp_path, {"log_path": str(log), "log_offset": 0, "timeout": 60, "stall_timeout": 30},
                                    inventory=ssh_host)
    w.join()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert res["status"] == "ready" and "node1: ready (" in proc.stdout


def test_over_ssh_crash_with_pid_watch(tmp_path, ssh_host):
    case = "nccl-unhandled-system-error-unindented-traceback"
    exp = expected(case)
    log = tmp_path / "server.log"
    child = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "time.sleep(3)\n"
        "open(sys.argv[1], 'ab').write(open(sys.argv[2], 'rb').read())\n"
        "sys.exit(1)\n"), str(log), str(CORPUS / case / "server.log")])
    try:
        _proc, res, _took = run_playbook(tmp_path, {"log_path": str(log), "log_offset": 0, "pid": child.pid, "timeout": 60},
                                         inventory=ssh_host)
    finally:
        child.wait()
    assert res["status"] == "crashed" and (res["signature"], res["error_line"]) == (exp["signature"], exp["first_error_line"])
    assert res["msg"].startswith("SGLang on node1 crashed after ")


def big_backlog(path, size):
    """A log of one run that never gets ready: the stage lines of a real recording, then its loading and capture
    lines repeated up to `size` bytes (what a long multi-rank start with chatty progress bars leaves)."""
    lines = corpus("tp2-stuck-in-cuda-graph-capture").splitlines(True)
    body = b"".join(ln for ln in lines if b"ready to roll" not in ln)
    with open(path, "wb") as f:
        written = 0
        while written < size:
            f.write(body)
            written += len(body)


def test_timeout_holds_over_a_256_mib_backlog(tmp_path):
    """log_offset=0 on a 256 MiB log with timeout=10: the wait reads the backlog in bounded chunks, checks its deadline
    between them and returns within timeout + 2 s, however much is left unread."""
    log = tmp_path / "server.log"
    big_backlog(log, 256 * 1024 * 1024)
    proc, res, _took = run_playbook(tmp_path, {"log_path": str(log), "log_offset": 0, "timeout": 10, "stall_timeout": 0},
                                    playbook=TIMED_PLAYBOOK)
    assert res["status"] == "timeout", proc.stdout
    # elapsed counts from the task's start (controller, transfer and module start-up included)
    assert 10 <= res["elapsed"] <= 10 + 2, res["elapsed"]
    # and the task as the user sees it (the callback's time from the task's start for the host to its result):
    # timeout + 2 s beyond what a task that does nothing costs in the same run, timed the same way (at idle ~0.4 s;
    # 1.5-3.4 s on this 2-core machine at load 11-13). Before the start-up counted: 12.1-14.0 s at load 6.
    seconds = read_seconds(tmp_path / "results", "localhost")
    assert seconds[WAIT_TASK_NAME] <= 10 + 2 + seconds[PING_TASK_NAME], seconds
    assert 0 < res["log_offset_end"] <= log.stat().st_size
