# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Throughput of the SGLang start-up log classifier on a long backlog, side by side with grep on the same file.

Not a test: it prints MiB/s and ratios measured in the same run. From the collection root:

    python3 benchmarks/classifier_throughput.py [--mib 256] [--baseline-rev 76ef5b6]

The backlog is ONE run's worth of real log lines and no verdict: every recorded log in
tests/fixtures/sglang-logs/ is cut before its first error line or ready line (the lines a watcher reads
while nothing is decided yet: stage lines of all ranks, progress bars, warnings, NCCL/Gloo lines, access
logs), the pieces are concatenated and repeated to --mib, and written to a file. Then, on that file:

* the classifier: the file read in 8 MiB pieces, decoded incrementally and fed to ONE LogClassifier, as
  wait_for_sglang reads a backlog (CPU time of this process; the classifier's own share is shown too);
* ``grep -c`` with one fixed string (``hit an exception``), the floor for reading the file at all;
* ``grep -c -F`` with every gate of the classifier's prefilter (the same literal search the classifier
  does before it reads a line);
* with --baseline-rev, the classifier of that git revision, loaded from ``git show`` (the same workload).

A second, gate-heavy backlog (--heavy-mib, default 32) holds only the lines of the first one that contain a
prefilter gate and decide nothing (frames of benign tracebacks, warnings naming an error, progress bars glued
to a warning): every line must be read in full, the classifier's worst case.
"""

from __future__ import annotations

import argparse
import codecs
import importlib.util
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


def backlog_lines(sglang_log):
    """Real lines a watcher reads before anything is decided, from every recorded log."""
    lines = []
    for name in sorted(os.listdir(FIXTURES)):
        path = os.path.join(FIXTURES, name, "server.log")
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "replace")
        res = sglang_log.classify_text(text)
        stop = res["error_lineno"]
        if res["status"] == "ready":
            stop = next(entry["lineno"] for entry in res["stages"] if entry["stage"] == "ready")
        case_lines = text.split("\n")
        lines.extend(case_lines[:(stop - 1) if stop else len(case_lines)])
    return [line for line in lines if "server_args=" not in line]


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


def baseline_module(rev):
    """The classifier module of git revision ``rev`` (older single-file layout or the current one)."""
    for path in ("plugins/module_utils/log/_classifier.py", "plugins/module_utils/_sglang_log.py"):  # before the packages
        shown = subprocess.run(["git", "-C", ROOT, "show", "%s:%s" % (rev, path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
        if shown.returncode == 0:
            break
    shown.check_returncode()
    source = shown.stdout
    path = os.path.join(tempfile.mkdtemp(prefix="llmops-bench-"), "baseline_sglang_log.py")
    with open(path, "wb") as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location("baseline_sglang_log", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--mib", type=float, default=256.0, help="size of the backlog file in MiB (default 256)")
    parser.add_argument("--baseline-rev", help="also time the classifier of this git revision (e.g. 76ef5b6)")
    parser.add_argument("--heavy-mib", type=float, default=32.0, help="size of the gate-heavy backlog in MiB (default 32)")
    parser.add_argument("--keep", help="write the backlog to this path and keep it")
    args = parser.parse_args()

    materialize()  # the logs are stored gzipped (tests/sglang_corpus.py)
    sglang_log, sglang_rules = import_collection()
    baseline = baseline_module(args.baseline_rev) if args.baseline_rev else None
    lines = backlog_lines(sglang_log)
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
        total, in_feed, res = classify_file(baseline, path)
        rows.append(("classifier at %s: read + decode + classify (status=%s)" % (baseline_rev, res["status"]), mib / total))
        rows.append(("classifier at %s: classify only (feed)" % baseline_rev, mib / in_feed))
    reference = rows[0][1]
    for label, rate in rows:
        print("%-66s %9.1f MiB/s  (x%.2f of the classifier)" % (label, rate, rate / reference))


if __name__ == "__main__":
    sys.exit(main())
