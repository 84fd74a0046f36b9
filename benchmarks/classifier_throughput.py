# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Throughput of the SGLang start-up log classifier on a long backlog, side by side with grep on the same file.

Not a test: it prints MiB/s and ratios measured in the same run. From the collection root:

    python3 benchmarks/classifier_throughput.py [--mib 256] [--baseline-rev 76ef5b6]

The backlog is ONE run's worth of real log lines and no verdict: every recorded log in
tests/fixtures/sglang-logs/ (or, with --cases-of REV, those of that revision) is cut before its recorded first error
line or ready line (expected.json; the lines a watcher reads
while nothing is decided yet: stage lines of all ranks, progress bars, warnings, NCCL/Gloo lines, access
logs), the pieces are concatenated and repeated to --mib, and written to a file. Then, on that file:

* the classifier: the file read in 8 MiB pieces, decoded incrementally and fed to ONE LogClassifier, as
  wait_for_sglang reads a backlog (CPU time of this process; the classifier's own share is shown too);
* ``grep -c`` with one fixed string (``hit an exception``), the floor for reading the file at all;
* ``grep -c -F`` with every gate of the classifier's prefilter (the same literal search the classifier
  does before it reads a line);
* with --baseline-rev, the classifier of that git revision (its plugins/module_utils from ``git archive``, run in a
  child process; the same workload). Its verdict is shown: a baseline that decides a crash on a line this tree reads
  as benign only scans for a post-ready crash from there, which is not the same work.

A second, gate-heavy backlog (--heavy-mib, default 32) holds only the lines of the first one that contain a
prefilter gate and decide nothing (frames of benign tracebacks, warnings naming an error, progress bars glued
to a warning): every line must be read in full, the classifier's worst case.
"""

from __future__ import annotations

import argparse
import codecs
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "sglang-logs")
PIECE = 8 * 1024 * 1024   # what the log follower reads per call
READY = "The server is fired up and ready to roll"

sys.path.insert(0, os.path.join(ROOT, "tests"))
from sglang_corpus import materialize  # noqa: E402  pylint: disable=wrong-import-position


def import_collection():
    """The collection's classifier modules, through a temporary ansible_collections/llmops/sglang link when
    PYTHONPATH does not already provide one."""
    try:
        from ansible_collections.llmops.sglang.plugins.module_utils.log import _classifier, _rules  # pylint: disable=import-outside-toplevel
    except ImportError:
        base = tempfile.mkdtemp(prefix="llmops-bench-")
        os.makedirs(os.path.join(base, "ansible_collections", "llmops"))
        os.symlink(ROOT, os.path.join(base, "ansible_collections", "llmops", "sglang"))
        sys.path.insert(0, base)
        from ansible_collections.llmops.sglang.plugins.module_utils.log import _classifier, _rules  # pylint: disable=import-outside-toplevel
    return _classifier, _rules


def backlog_lines(cases=None):
    """Real lines a watcher reads before anything is decided, from every recorded log (or the named ``cases``): each
    cut before its recorded first error line or its ready line (expected.json), so no correct classifier decides on
    them, whichever revision it is."""
    lines = []
    for name in sorted(os.listdir(FIXTURES)):
        path = os.path.join(FIXTURES, name, "server.log")
        if not os.path.isfile(path) or (cases is not None and name not in cases):
            continue
        with open(os.path.join(FIXTURES, name, "expected.json"), encoding="utf-8") as handle:
            expected = json.load(handle)
        with open(path, "rb") as handle:
            # derived cases: the run the expectation is about starts at new_run_offset_bytes
            case_lines = handle.read()[expected.get("new_run_offset_bytes") or 0:].decode("utf-8", "replace").split("\n")
        stop = len(case_lines)
        for number, line in enumerate(case_lines):
            if line == expected["first_error_line"] or (expected["outcome"] == "ready" and READY in line):
                stop = number
                break
        lines.extend(case_lines[:stop])
    return [line for line in lines if "server_args=" not in line]


def cases_of(rev):
    """The recorded cases of git revision ``rev`` (a workload an older classifier knows too)."""
    out = subprocess.run(["git", "-C", ROOT, "ls-tree", "--name-only", rev, "tests/fixtures/sglang-logs/"],
                         stdout=subprocess.PIPE, check=True)
    return set(os.path.basename(line) for line in out.stdout.decode().split())


def gate_heavy_lines(sglang_log, lines):
    """The lines a classifier that reached the last stage before ready must still read in full."""
    gate = sglang_log._gate_re("warmup", ())   # pylint: disable=protected-access
    return [line for line in lines if gate.search(line)]


def write_backlog(path, lines, mib):
    body = ("\n".join(lines) + "\n").encode("utf-8")
    rounds = max(1, int(mib * 1024 * 1024 // len(body)))
    with open(path, "wb") as handle:
        for _round in range(rounds):
            handle.write(body)
    return rounds * len(body)


def classify_file(module, path):
    """(CPU seconds in total, CPU seconds inside feed(), result) for one classifier reading the whole file."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    classifier = module.LogClassifier()
    in_feed = 0.0
    start = time.process_time()
    with open(path, "rb") as handle:
        while True:
            data = handle.read(PIECE)
            if not data:
                break
            text = decoder.decode(data)
            before = time.process_time()
            classifier.feed(text, now=0.0)
            in_feed += time.process_time() - before
    total = time.process_time() - start
    return total, in_feed, classifier.result()


def grep_count(args, path):
    """(CPU seconds of the grep child, count) for ``grep -c ARGS path``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(["grep", "-c"] + args + [path], stdout=subprocess.PIPE, check=False, env=dict(os.environ, LC_ALL="C"))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, int(out.stdout.decode().strip() or 0)


_BASELINE_TIMER = """
import json, sys
sys.path.insert(0, sys.argv[1])
try:
    from ansible_collections.llmops.sglang.plugins.module_utils.log import _classifier as module
except ImportError:   # before the domain packages
    from ansible_collections.llmops.sglang.plugins.module_utils import _sglang_log as module
sys.path.insert(0, sys.argv[3])
from classifier_throughput import classify_file
total, in_feed, res = classify_file(module, sys.argv[2])
print(json.dumps({"total": total, "in_feed": in_feed, "status": res["status"]}))
"""


def baseline_tree(rev):
    """A directory holding the collection's plugins/ as of git revision ``rev`` (ansible_collections/llmops/sglang),
    so the baseline runs its own rules, traceback reader and classifier together."""
    base = tempfile.mkdtemp(prefix="llmops-bench-")
    coll = os.path.join(base, "ansible_collections", "llmops", "sglang")
    os.makedirs(coll)
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev, "plugins/module_utils"], stdout=subprocess.PIPE, check=True)
    subprocess.run(["tar", "-x", "-C", coll], input=archive.stdout, check=True)
    for package in ("ansible_collections", "ansible_collections/llmops", "ansible_collections/llmops/sglang",
                    "ansible_collections/llmops/sglang/plugins"):
        init = os.path.join(base, package, "__init__.py")
        if not os.path.exists(init):
            with open(init, "w", encoding="utf-8"):
                pass
    return base


def classify_file_at(tree, path):
    """classify_file() with the classifier of a baseline tree, in a child process of its own (its modules have the
    same names as this tree's). CPU time is measured inside the child, as for this tree."""
    out = subprocess.run([sys.executable, "-c", _BASELINE_TIMER, tree, path, HERE], stdout=subprocess.PIPE, check=True,
                         env=dict(os.environ, PYTHONPATH=""))
    data = json.loads(out.stdout.decode())
    return data["total"], data["in_feed"], {"status": data["status"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--mib", type=float, default=256.0, help="size of the backlog file in MiB (default 256)")
    parser.add_argument("--baseline-rev", help="also time the classifier of this git revision (e.g. 76ef5b6)")
    parser.add_argument("--heavy-mib", type=float, default=32.0, help="size of the gate-heavy backlog in MiB (default 32)")
    parser.add_argument("--keep", help="write the backlog to this path and keep it")
    parser.add_argument("--cases-of", metavar="REV", help="build the backlogs from the recorded cases of this git revision only")
    args = parser.parse_args()

    materialize()  # the logs are stored gzipped (tests/sglang_corpus.py)
    sglang_log, sglang_rules = import_collection()
    baseline = baseline_tree(args.baseline_rev) if args.baseline_rev else None
    lines = backlog_lines(cases_of(args.cases_of) if args.cases_of else None)
    print("timing: CPU time (this process for the classifier, the child for grep); machine load does not count")
    workloads = (("backlog", lines, args.mib, args.keep), ("gate-heavy backlog", gate_heavy_lines(sglang_log, lines), args.heavy_mib, None))
    for title, workload, size_mib, keep in workloads:
        path = keep or os.path.join(tempfile.mkdtemp(prefix="llmops-bench-"), "backlog.log")
        mib = write_backlog(path, workload, size_mib) / (1024.0 * 1024.0)
        print("\n%s: %d real lines from %s repeated to %.1f MiB" % (title, len(workload), FIXTURES, mib))
        compare(sglang_log, sglang_rules, baseline, args.baseline_rev, path, mib)
        if not keep:
            os.unlink(path)
    return 0


def compare(sglang_log, sglang_rules, baseline, baseline_rev, path, mib):
    """Print the classifier, grep and the baseline on one file, as MiB/s and ratios to the classifier."""
    rows = []
    total, in_feed, res = classify_file(sglang_log, path)
    print("classifier verdict: status=%s stage=%s lines=%d" % (res["status"], res["stage"], res["lines_seen"]))
    rows.append(("classifier: read + decode + classify", mib / total))
    rows.append(("classifier: classify only (feed)", mib / in_feed))
    gates = sglang_rules.gates_after("start")
    seconds, count = grep_count(["-F", "hit an exception"], path)
    rows.append(("grep -c -F 'hit an exception' (%d lines)" % count, mib / seconds))
    gate_args = []
    for gate in gates:
        gate_args += ["-e", gate.strip("\n")]
    seconds, count = grep_count(["-F"] + gate_args, path)
    rows.append(("grep -c -F with the %d prefilter gates (%d lines)" % (len(gates), count), mib / seconds))
    if baseline is not None:
        total, in_feed, res = classify_file_at(baseline, path)
        rows.append(("classifier at %s: read + decode + classify (status=%s)" % (baseline_rev, res["status"]), mib / total))
        rows.append(("classifier at %s: classify only (feed)" % baseline_rev, mib / in_feed))
    reference = rows[0][1]
    for label, rate in rows:
        print("%-66s %9.1f MiB/s  (x%.2f of the classifier)" % (label, rate, rate / reference))


if __name__ == "__main__":
    sys.exit(main())
