# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Backlog throughput of wait_for_sglang through the real module, beside grep and an older revision, on one file.

Not a test: it prints MiB/s measured in the same run. From the collection root, with ansible on PATH:

    python3 benchmarks/wait_backlog_throughput.py [--mib 256] [--timeout 10] [--baseline-rev 76ef5b6]

The backlog is the one of benchmarks/classifier_throughput.py (one run's real lines, no verdict, repeated to
--mib). Each reader gets the same file:

* ``ansible-playbook`` running llmops.sglang.wait_for_sglang with ``log_offset: 0`` and ``timeout`` (the action plugin's
  rounds, one module process per round, as a user runs it): MiB read (``log_offset_end``) per second of the result's
  ``elapsed``, and per CPU second of ansible-playbook and its module processes. A module that stops at its timeout
  has read only part of the file; one that reads all of it first (the old revision) is timed to its end;
* the same for the collection at --baseline-rev (from ``git archive``);
* this tree's WaitRound in the benchmark's own process (CPU time: the module's work without Ansible's start-up);
* ``grep -c -F 'hit an exception'``, the floor for reading the file at all.

Wall-clock figures on a shared machine: print ``os.getloadavg()`` with them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import classifier_throughput as ct  # noqa: E402  pylint: disable=wrong-import-position


def collection_path(rev, base):
    """An ANSIBLE_COLLECTIONS_PATH holding the collection: this tree (rev None) or git revision ``rev``."""
    path = os.path.join(base, rev or "worktree")
    target = os.path.join(path, "ansible_collections", "llmops")
    os.makedirs(target)
    if rev is None:
        os.symlink(ROOT, os.path.join(target, "sglang"))
    else:
        os.makedirs(os.path.join(target, "sglang"))
        archive = subprocess.run(["git", "-C", ROOT, "archive", rev], stdout=subprocess.PIPE, check=True).stdout
        subprocess.run(["tar", "-x", "-C", os.path.join(target, "sglang")], input=archive, check=True)
    return path


PLAYBOOK = """
- name: Wait for SGLang on a backlog
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Wait
      llmops.sglang.wait_for_sglang: "{{ wait_args }}"
      register: sglang_wait
      ignore_errors: true  # a timeout is the expected end
    - name: Save the result
      ansible.builtin.copy:
        content: "{{ sglang_wait | to_json }}"
        dest: "{{ result_file }}"
        mode: "0644"
"""


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_module(collections, log, timeout, base):
    """(result dict, wall seconds, CPU seconds of ansible-playbook and its module processes) of one
    ansible-playbook task llmops.sglang.wait_for_sglang (action plugin + module rounds)."""
    with open(os.path.join(base, "wait.yml"), "w", encoding="utf-8") as handle:
        handle.write(PLAYBOOK)
    result_file = os.path.join(base, "result.json")
    extra = {"wait_args": {"log_path": log, "log_offset": 0, "timeout": timeout, "stall_timeout": 0},
             "result_file": result_file, "ansible_python_interpreter": sys.executable}
    with open(os.path.join(base, "extra.json"), "w", encoding="utf-8") as handle:
        json.dump(extra, handle)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="False")
    playbook = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable)) or "ansible-playbook"
    argv = [playbook, "-i", "localhost,", "-c", "local", os.path.join(base, "wait.yml"),
            "-e", "@" + os.path.join(base, "extra.json")]
    start, cpu = time.monotonic(), children_cpu()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    wall, cpu = time.monotonic() - start, children_cpu() - cpu
    with open(result_file, encoding="utf-8") as handle:
        result = json.load(handle)
    os.unlink(result_file)
    return result, wall, cpu


def run_round_in_process(log, timeout):
    """(MiB read, CPU seconds) of this tree's WaitRound run in this process: the module's own work, no Ansible."""
    from ansible_collections.llmops.sglang.plugins.module_utils.wait._round import WaitParams, WaitRound  # pylint: disable=import-outside-toplevel
    cpu = time.process_time()
    res = WaitRound(WaitParams(log_path=log, log_offset=0, timeout=timeout, stall_timeout=0)).run(None)
    return res["log_offset_end"] / (1024.0 * 1024.0), time.process_time() - cpu


def grep_times(path):
    """(wall, CPU) seconds of grep -c -F 'hit an exception' on the file."""
    start, cpu = time.monotonic(), children_cpu()
    subprocess.run(["grep", "-c", "-F", "hit an exception", path], stdout=subprocess.PIPE, check=False,
                   env=dict(os.environ, LC_ALL="C"))
    return time.monotonic() - start, children_cpu() - cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--mib", type=float, default=256.0, help="size of the backlog in MiB (default 256)")
    parser.add_argument("--timeout", type=int, default=10, help="the module's timeout in seconds (default 10)")
    parser.add_argument("--baseline-rev", help="also run the collection of this git revision (e.g. 76ef5b6)")
    args = parser.parse_args()

    ct.materialize()
    sglang_log, _rules = ct.import_collection()
    base = tempfile.mkdtemp(prefix="llmops-bench-")
    log = os.path.join(base, "backlog.log")
    size = ct.write_backlog(log, ct.backlog_lines(sglang_log), args.mib)
    mib = size / (1024.0 * 1024.0)
    print("backlog: %.1f MiB, timeout %d s, load average before %s" % (mib, args.timeout, os.getloadavg()))
    wall, cpu = grep_times(log)
    rows = [("grep -c -F 'hit an exception'", mib, wall, cpu, "")]
    for rev in [None] + ([args.baseline_rev] if args.baseline_rev else []):
        res, wall, cpu = run_module(collection_path(rev, base), log, args.timeout, base)
        read = (res.get("log_offset_end") or 0) / (1024.0 * 1024.0)
        rows.append(("ansible-playbook, wait_for_sglang at %s" % (rev or "this tree"), read, res.get("elapsed") or wall, cpu,
                     "status=%s, playbook wall %.1f s" % (res.get("status"), wall)))
    read, cpu = run_round_in_process(log, args.timeout)
    rows.append(("WaitRound of this tree in-process", read, float("nan"), cpu, "the module's work without Ansible"))
    print("%-46s %8s %9s %8s %8s %10s" % ("reader", "MiB read", "elapsed s", "MiB/s", "CPU s", "MiB/CPU s"))
    for label, read, secs, cpu, note in rows:
        print("%-46s %8.1f %9.1f %8.1f %8.2f %10.1f  %s" % (label, read, secs, read / secs, cpu, read / cpu, note))
    print("load average after %s" % (os.getloadavg(),))
    shutil.rmtree(base)
    return 0


if __name__ == "__main__":
    sys.exit(main())
