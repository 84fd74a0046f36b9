# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Line prefixes that the tools between SGLang and its log file add, for the start-up log classifier.

Private module_utils of llmops.sglang (runs on target hosts: Python 3.9+, standard library only).

A log read through ``docker compose logs``, ``kubectl logs --prefix``, ``journalctl -o short`` (or a syslog file),
``torchrun --tee`` or a process manager carries a prefix on every line that SGLang never wrote. The classifier reads
each line without it (the error line it reports stays the line as written). Two ways to know a prefix:

* the formats of the tools that add one (``TOOL_PREFIX_RE``), also on the very first (or only) line of a log;
* any other constant prefix: learned from SGLang's own lines (``[2025-12-24 01:14:28 TP0] ...``), which a process
  manager moves away from column 0: the text before such a line's timestamp, the same (digits aside) on two of them.

SGLang's own prefix (``[time DPn TPn EPn]``) is never one of them: it is part of the message the rules read.
"""

from __future__ import annotations

import re

_NAME = r"[A-Za-z0-9][\w.-]*"
_HOST_UNIT = r" \S+ [^\s:\[\]]+(?:\[\d+\])?: "    # journal/syslog: " host identifier[pid]: "
_RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
TOOL_PREFIX_RE = re.compile(
    r"(?:"
    # journalctl -o short / short-precise (and syslog files), -o short-iso / short-iso-precise, -o short-monotonic
    r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?" + _HOST_UNIT
    # journalctl -o short-full / with-unit ("Tue 2025-12-02 03:14:15 UTC host unit[pid]: ")
    + r"|[A-Z][a-z]{2} \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Z]{2,5}| [+-]\d{4})?" + _HOST_UNIT
    + r"|" + _RFC3339 + _HOST_UNIT
    + r"|\[ *\d+\.\d+\]" + _HOST_UNIT
    # docker compose logs / podman-compose ("name-1  | "), pm2 ("0|name  | "), foreman/honcho ("12:00:00 web.1  | ")
    + r"|(?:\d\d:\d\d:\d\d )?(?:\d+\|)?" + _NAME + r"\s+\|(?: |$)"
    # kubectl logs --prefix
    + r"|\[pod/[^\s/\]]+/[^\s\]]+\] "
    # --timestamps of docker, kubectl and compose (RFC 3339)
    + r"|" + _RFC3339 + r" "
    # torchrun --tee / --local-ranks-filter, torch's per-rank prefix ("[rank0]:[W...]" of its C++ log, and
    # "[rank0]: Traceback ..." with one space on every line of a rank's Python traceback)
    + r"|\[rank\d+\]: ?|\[default\d+\]:"
    # Ray workers
    + r"|\((?:[\w.-]+ )?pid=\d+(?:, ip=[\d.]+)?\) "
    r")")
# SGLang's own prefix: "[2025-12-24 01:14:28 DP10 TP10 EP10] ", "[2025-12-24 01:14:28] "; 0.2.x "[gpu=0] ".
_SGLANG_TS_RE = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\] |\[gpu(?:_id)?=\d+[^\]]*\] ")
_DIGIT_RE = re.compile(r"\d")
_NOT_A_PREFIX_RE = re.compile(r"%\||it/s|s/it|\r|Traceback|\[\d{4}-")
LEARN_MAX = 120     # longest prefix learned


def _norm(text):
    return _DIGIT_RE.sub("0", text)


class PrefixReader:
    """Strips the prefix of each line. ``learned`` (the digit-normalised constant prefix, or None) and ``seen`` (a
    candidate seen once) are its whole state, kept by the classifier's state."""

    def __init__(self, learned=None, seen=None):
        self.learned = learned
        self.seen = seen

    def strip(self, text):
        """The line without the prefixes the tools added (at most three, e.g. kubectl's name and timestamp)."""
        if text[:1] in (" ", "\t") or text.startswith("[20"):
            return text   # a traceback's frame or SGLang's own "[20YY-..." line: no tool writes either prefix
        for _round in range(3):
            match = TOOL_PREFIX_RE.match(text)
            if match is not None and match.end() > 0:
                text = text[match.end():]
                continue
            if self.learned is not None and len(text) > len(self.learned) \
                    and _norm(text[:len(self.learned)]) == self.learned:
                text = text[len(self.learned):]
                continue
            break
        return text

    def learn(self, text):
        """Learn a constant prefix from a line already stripped by strip(): the text before SGLang's own prefix when
        that is not at column 0, the same (digits aside) on two lines."""
        if self.learned is not None or text[:1] in ("[", " ", "\t", ""):
            return   # SGLang's own line, a traceback's frame: nothing before SGLang's prefix
        match = _SGLANG_TS_RE.search(text, 1, LEARN_MAX + 80)
        if match is None or match.start() > LEARN_MAX:
            return
        head = text[:match.start()]
        if _NOT_A_PREFIX_RE.search(head) or not head.strip():
            return
        key = _norm(head)
        if self.seen == key:
            self.learned, self.seen = key, None
        else:
            self.seen = key
