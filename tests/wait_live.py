# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers for tests that run llmops.sglang.wait_for_sglang the way it runs: find the module's process, know when
it is following its log (so a writer starts only then), and see when it ends (the decision)."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

_WAIT_TASK = """
    - name: Wait for the server
      llmops.sglang.wait_for_sglang: "{{ wait_args }}"
      ignore_errors: true  # the test reads the result (saved by the wait_results callback)
"""
# Before the wait, a task that does nothing (ansible.builtin.ping): what Ansible itself costs a task on this machine at
# this load, beside the wait task's own time; the callback times both the same way (read_seconds).
_PING_TASK = """
    - name: Do nothing
      ansible.builtin.ping:
"""
WAIT_TASK_NAME, PING_TASK_NAME = "Wait for the server", "Do nothing"
CALLBACK_PLUGINS = Path(__file__).resolve().parent / "callback_plugins"


def wait_playbook(timed=False):
    """A playbook that runs wait_for_sglang on every host with the host's var ``wait_args``; run it with
    callback_env(directory) and read each host's result with read_results(directory). ``timed`` runs a task that does
    nothing first (read_seconds gives both tasks' times)."""
    head = "- name: Wait for SGLang\n  hosts: all\n  gather_facts: false\n  tasks:\n"
    return head + (_PING_TASK if timed else "") + _WAIT_TASK


def callback_env(results_dir):
    """The environment that enables the test-only callback tests/callback_plugins/wait_results.py for an ansible-playbook
    run: each host's wait_for_sglang result is saved to RESULTS_DIR/<host>.json when its task ends, in the controller's
    main process (no copy task: that was a module run per play or per case)."""
    return {"ANSIBLE_CALLBACK_PLUGINS": str(CALLBACK_PLUGINS), "ANSIBLE_CALLBACKS_ENABLED": "wait_results",
            "LLMOPS_WAIT_RESULTS": str(results_dir)}


def read_results(results_dir):
    """{host: its wait_for_sglang result, as register would hold it} saved by the callback (hosts whose wait task never
    ended are missing)."""
    found = {}
    for path in sorted(Path(results_dir).glob("*.json")):
        if not path.name.endswith(".seconds.json"):
            found[path.name[:-len(".json")]] = json.loads(path.read_text())
    return found


def read_seconds(results_dir, host):
    """{task name: seconds from the task's start for HOST to its result} for each task HOST ran (written by the callback
    at the end of the play)."""
    return json.loads((Path(results_dir) / ("%s.seconds.json" % host)).read_text())


# clock_nanosleep and nanosleep: a module process sleeping in one of these runs its wait loop (imports, argument
# parsing and the follower's creation are done; none of them sleeps).
_SLEEP_SYSCALLS = {"x86_64": ("230", "35"), "aarch64": ("115", "101")}.get(platform.machine(), ())


def module_pids(marker):
    """Pids of python processes running this test's wait_for_sglang module (marker: a path only this test's module
    command line holds, e.g. its remote tmp dir or its argument file's directory)."""
    return module_pids_by_marker([marker]).get(str(marker), [])


def module_pids_by_marker(markers):
    """{marker: pids} of the python processes running wait_for_sglang whose command line holds that marker (markers
    that no process holds are left out), from one scan of /proc.

    It reads every process's command line, so it is what the watchers below cost: os.open/os.read and a byte search
    before any split (half the CPU of a file object per process; the live replays scan /proc thousands of times)."""
    wanted = [(str(m), str(m).encode()) for m in markers]
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fd = os.open("/proc/%s/cmdline" % pid, os.O_RDONLY)
        except OSError:
            continue
        try:
            data = os.read(fd, 1 << 20)
        except OSError:
            continue
        finally:
            os.close(fd)
        if b"wait_for_sglang" not in data or not any(pair[1] in data for pair in wanted):
            continue
        argv = data.split(b"\0")
        line = b" ".join(argv[1:])
        if len(argv) < 2 or argv[0].endswith(b"sh") or b"wait_for_sglang" not in line:
            continue
        for name, marker in wanted:
            if marker in line:
                found.setdefault(name, []).append(int(pid))
    return found


def _sleeping(pid):
    try:
        with open("/proc/%d/syscall" % pid, encoding="ascii") as f:
            return f.read().split(" ", 1)[0] in _SLEEP_SYSCALLS
    except OSError:
        return False


def module_following(marker, timeout=120.0, gone=None, poll=0.1):
    """Wait until this test's module process is in its wait loop (sleeping between looks at the log); False after
    `timeout` or as soon as gone() says the command running the module has ended. Each look scans /proc
    (module_pids): every `poll` seconds, so the writer a test starts then begins at most that much later."""
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end and not (gone is not None and gone()):
        pids = module_pids(marker)
        if pids and (not _SLEEP_SYSCALLS or any(_sleeping(p) for p in pids)):
            return True
        time.sleep(poll)
    return False


class ModuleWatch:
    """Polls for this test's module processes; ``last_seen`` is the monotonic time a module process was last seen
    alive, so after the task ended it is the time of the decision (to within one poll).

    A known process is looked at every ``poll`` seconds (one stat of /proc/PID). Without one (between the action's
    rounds, and after the last until the play ends) it scans /proc for the next every ``search_poll`` seconds: a round's
    module process lives far longer than that (Python's start, the module's imports, a look at the log), so none is
    missed, and its last sight, which is what last_seen keeps, is still taken every ``poll``."""

    def __init__(self, marker, poll=0.01, search_poll=0.05):
        self.marker, self.poll, self.search_poll = marker, poll, search_poll
        self.known = None
        self.last_seen = None

    def tick(self):
        if self.known is not None and os.path.exists("/proc/%d" % self.known):
            self.last_seen = time.monotonic()
            return
        pids = module_pids(self.marker)
        self.known = pids[0] if pids else None
        if pids:
            self.last_seen = time.monotonic()

    def run_until(self, done):
        """Poll until done() is true."""
        while not done():
            self.tick()
            time.sleep(self.poll if self.known is not None else self.search_poll)


def _holds_a_tmp_dir(remote_tmp):
    try:
        with os.scandir(remote_tmp) as entries:
            return any(e.name.startswith("ansible-tmp-") for e in entries)
    except OSError:
        return False


class ModuleWatches:
    """ModuleWatch and module_following for the modules of several hosts of one play at once (each host's module
    found by its own marker, e.g. its ansible_remote_tmp), from one scan of /proc for all of them.

    ``following`` holds the keys whose module has been seen in its wait loop (see module_following), ``last_seen``
    the monotonic time each key's module process was last seen alive (see ModuleWatch). tick() looks at each known
    process (one stat, and while not yet following one read of its syscall). A scan of /proc costs about 7 ms of CPU
    with 400 processes, so it scans only for a key that has no known process while its task runs: the marker is that
    host's remote tmp dir, and the action plugin holds its own tmp dir (ansible-tmp-*) in it from its first module
    round until the task ends. So there is no scan while ansible-playbook starts, none for a host whose wait has
    ended, and at most one every ``search_poll`` seconds for all hosts that are between two rounds."""

    def __init__(self, markers, search_poll=0.05):
        self.markers = dict(markers)
        self.search_poll = search_poll
        self.known = {}
        self.following = set()
        self.last_seen = dict.fromkeys(self.markers)
        self._scanned = 0.0

    def tick(self):
        now = time.monotonic()
        for key, pid in list(self.known.items()):
            if not os.path.exists("/proc/%d" % pid):
                del self.known[key]
                continue
            self.last_seen[key] = now
            if key not in self.following and (not _SLEEP_SYSCALLS or _sleeping(pid)):
                self.following.add(key)
        if len(self.known) == len(self.markers) or now - self._scanned < self.search_poll:
            return
        self._scanned = now
        searched = {k: m for k, m in self.markers.items() if k not in self.known and _holds_a_tmp_dir(m)}
        if not searched:
            return
        by_marker = module_pids_by_marker(searched.values())
        for key, marker in searched.items():
            pids = by_marker.get(str(marker))
            if pids:
                self.known[key] = pids[0]
                self.last_seen[key] = now
