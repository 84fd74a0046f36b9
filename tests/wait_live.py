# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Helpers for tests that run llmops.sglang.wait_for_sglang the way it runs: find the module's process, know when
it is following its log (so a writer starts only then), and see when it ends (the decision)."""

from __future__ import annotations

import os
import platform
import time

_WAIT_TASKS = """
    - name: Wait for the server
      llmops.sglang.wait_for_sglang: "{{ wait_args }}"
      register: sglang_wait
      ignore_errors: true  # the test reads the registered result

    - name: Save the result for the test
      ansible.builtin.copy:
        content: "%(saved)s"
        dest: "{{ result_file }}"
        mode: "0644"
%(once)s"""
# what the copy task saves: this host's result, or every host's of the play ({inventory_hostname: result}, run once)
_ONE_HOST = "{{ sglang_wait%s | to_json }}"
_ALL_HOSTS = ("{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars)\n"
              "          | map(attribute='sglang_wait', default=None))) | to_json }}")

# Before the wait, a task that does nothing (ansible.builtin.ping), timed the same way: what Ansible itself costs a task
# on this machine at this load, beside the wait task's own time (from its start to the next task's).
_TIMING_TASKS = """
    - name: Note when the task that does nothing begins
      ansible.builtin.set_fact:
        ping_began: "{{ now().timestamp() }}"

    - name: Do nothing
      ansible.builtin.ping:

    - name: Note when the wait task begins
      ansible.builtin.set_fact:
        ping_seconds: "{{ now().timestamp() - (ping_began | float) }}"
        wait_began: "{{ now().timestamp() }}"
"""
_TIMES = (" | combine({'task_seconds': now().timestamp() - (wait_began | float), "
          "'ping_seconds': ping_seconds | float})")


def wait_playbook(timed=False, all_hosts=False):
    """A playbook that runs wait_for_sglang with the var ``wait_args`` and saves its result as JSON to ``result_file``;
    ``timed`` adds ``task_seconds`` and ``ping_seconds`` (see _TIMING_TASKS) to the result; ``all_hosts`` saves one
    file for all hosts of the play, ``{inventory_hostname: result}``, with one copy task run once."""
    head = "- name: Wait for SGLang\n  hosts: all\n  gather_facts: false\n  tasks:\n"
    saved = _ALL_HOSTS if all_hosts else _ONE_HOST % (_TIMES if timed else "")
    tasks = _WAIT_TASKS % {"saved": saved, "once": "      run_once: true\n" if all_hosts else ""}
    return head + (_TIMING_TASKS if timed else "") + tasks


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
