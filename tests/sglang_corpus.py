# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The SGLang log corpus is stored as tests/fixtures/sglang-logs/<case>/server.log.gz.

The recorded logs keep their CRLF line endings, carriage-return progress bars and the odd invalid UTF-8
byte exactly as published; stored as plain text they would fail ansible-test's line-endings and
no-smart-quotes sanity tests, which do not apply to binary files. materialize() writes each
server.log (git-ignored) beside its .gz, byte for byte, for the tests and benchmarks to read.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "fixtures" / "sglang-logs"


def materialize(corpus: Path = CORPUS) -> int:
    """Write every missing or outdated <case>/server.log from its server.log.gz; returns how many were written."""
    written = 0
    for gz in sorted(corpus.glob("*/server.log.gz")):
        log = gz.with_suffix("")
        if log.exists() and log.stat().st_mtime >= gz.stat().st_mtime:
            continue
        data = gzip.decompress(gz.read_bytes())
        tmp = log.with_name(".server.log.%d.tmp" % os.getpid())
        tmp.write_bytes(data)
        os.replace(tmp, log)  # atomic: parallel pytest workers may do this at the same time
        written += 1
    return written


if __name__ == "__main__":
    print("materialized %d log(s) under %s" % (materialize(), CORPUS))
