# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Throughput of the SGLang start-up log classifier (plugins/module_utils/_sglang_log.py).

Not a test: it prints MB/s so that regressions are visible. Run from the collection root:

    python3 benchmarks/classifier_throughput.py [--mb 200]

Three workloads, built from the recorded logs in tests/fixtures/sglang-logs/ (repeated to --mb):

* per-run: every case classified from its own start by a fresh classifier, cycling through the
  corpus (what the watcher does: one classifier per start, fed until ready/crash);
* worst case: the whole corpus concatenated, with the ready line and every decisive crash phrase
  defused, fed to ONE classifier, which therefore never reaches a verdict and must prefilter all of it;
* concatenated: the whole corpus concatenated and fed to one classifier as is (it stops reading
  lines after the first verdict, so this mostly measures line counting).

Each is compared with a naive classifier that runs re.search for every pattern on every line.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugins", "module_utils"))

import _sglang_log as sglang_log  # noqa: E402  pylint: disable=wrong-import-position

FIXTURES = os.path.join(HERE, "..", "tests", "fixtures", "sglang-logs")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from sglang_corpus import materialize  # noqa: E402  pylint: disable=wrong-import-position

materialize()  # the logs are stored gzipped (tests/sglang_corpus.py)

NAIVE_PATTERNS = (
    [regex for _stage, regex in sglang_log._STAGE_PATTERNS]
    + [regex for regex, _sig, _heads, _exit in sglang_log._CRASH_PHRASES]
    + [regex for _name, regex in sglang_log._CLASS_PATTERNS]
    + [sglang_log._FRAME_RE, sglang_log._HEADER_RE, sglang_log._EXC_RE]
)

DEFUSE = re.compile(
    r"fired up and ready|hit an exception|sigquit|SIGQUIT|Initialization failed|There appear to be|Killed"
    r"|Traceback|File \"|Error|xception|is dead|xit code")


def _clock():
    # CPU time of this process: the machine may be shared, wall-clock time would measure the neighbours.
    return time.process_time()


def load_cases():
    texts = []
    for name in sorted(os.listdir(FIXTURES)):
        path = os.path.join(FIXTURES, name, "server.log")
        if os.path.isfile(path):
            with open(path, "rb") as handle:
                texts.append(handle.read().decode("utf-8", "replace"))
    return texts


def naive(text):
    hits = 0
    for line in text.split("\n"):
        for regex in NAIVE_PATTERNS:
            if regex.search(line):
                hits += 1
    return hits


def timed(func, *args):
    start = _clock()
    func(*args)
    return _clock() - start


def per_run(texts, rounds):
    for _round in range(rounds):
        for text in texts:
            sglang_log.classify_text(text)


def one_classifier(text):
    classifier = sglang_log.LogClassifier()
    chunk = 8 * 1024 * 1024
    for pos in range(0, len(text), chunk):
        classifier.feed(text[pos:pos + chunk], now=0.0)
    classifier.flush(now=0.0)
    return classifier.result()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=200.0, help="size of each workload in MB (default 200)")
    parser.add_argument("--naive-mb", type=float, default=20.0, help="size for the naive baseline in MB (default 20)")
    args = parser.parse_args()

    texts = load_cases()
    corpus = "".join(texts)
    corpus_mb = len(corpus.encode("utf-8")) / 1e6
    rounds = max(1, int(round(args.mb / corpus_mb)))
    naive_rounds = max(1, int(round(args.naive_mb / corpus_mb)))
    print("timing: CPU time of this process (time.process_time)")
    print("corpus: %d cases, %.2f MB; workloads %.0f MB (naive baseline %.0f MB)"
          % (len(texts), corpus_mb, rounds * corpus_mb, naive_rounds * corpus_mb))

    big = corpus * rounds
    defused = DEFUSE.sub(lambda m: m.group(0)[0] + "_" + m.group(0)[1:], corpus)
    big_defused = defused * rounds
    big_naive = corpus * naive_rounds

    naive_time = timed(naive, big_naive)
    naive_rate = naive_rounds * corpus_mb / naive_time

    rows = []
    elapsed = timed(per_run, texts, rounds)
    rows.append(("per-run (fresh classifier per case)", rounds * corpus_mb / elapsed))
    result = {}
    start = _clock()
    result.update(one_classifier(big_defused))
    elapsed = _clock() - start
    rows.append(("worst case (no verdict, all prefiltered; status=%s)" % result["status"], rounds * corpus_mb / elapsed))
    start = _clock()
    result = one_classifier(big)
    elapsed = _clock() - start
    rows.append(("concatenated, one classifier (status=%s)" % result["status"], rounds * corpus_mb / elapsed))

    print("%-60s %9.1f MB/s" % ("naive re.search per line, all %d patterns" % len(NAIVE_PATTERNS), naive_rate))
    for label, rate in rows:
        print("%-60s %9.1f MB/s  (x%.0f naive)" % (label, rate, rate / naive_rate))
    return 0


if __name__ == "__main__":
    sys.exit(main())
