# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a server or the gateway says in its ``/metrics`` (Prometheus text format 0.0.4), and SGLang's ``/get_load``.

* SGLang (``--enable-metrics``): ``sglang:num_running_reqs`` (requests in the running batch) and
  ``sglang:num_queue_reqs`` (waiting) are gauges the scheduler sets, one series per label set (per DP rank, model);
  ``sglang:num_requests_total`` counts finished requests. ``/get_load`` answers a list, one entry per DP rank, whose
  ``num_reqs`` counts running plus waiting and ``num_waiting_reqs`` the waiting ones (``scheduler_metrics_mixin.get_load``).
* The gateway (``smg``, its Prometheus port): ``smg_worker_cb_state{worker=URL}`` is the circuit breaker per worker
  (0 closed, 1 open, 2 half open).

Pure functions over text; Python 3.9+, standard library only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

RUNNING = 'sglang:num_running_reqs'
QUEUED = 'sglang:num_queue_reqs'
FINISHED = 'sglang:num_requests_total'
CIRCUIT_METRIC = 'smg_worker_cb_state'
CIRCUIT_STATES = {0: 'closed', 1: 'open', 2: 'half_open'}

# name, optional {labels}, value (timestamps after the value are ignored)
_SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
_LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text: str) -> List[Tuple[str, Dict[str, str], float]]:
    """Every sample line as (name, labels, value); comments, blank lines and unreadable values are skipped."""
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith('#'):
            continue
        match = _SAMPLE_RE.match(line)
        if not match:
            continue
        try:
            value = float(match.group(4))
        except ValueError:
            continue
        labels = dict((k, v.replace('\\"', '"').replace('\\\\', '\\')) for k, v in _LABEL_RE.findall(match.group(3) or ''))
        out.append((match.group(1), labels, value))
    return out


def total(text: str, name: str) -> Optional[float]:
    """Sum of every series of ``name`` (all DP ranks, models); None when the text has no such series."""
    values = [value for sample, _labels, value in samples(text) if sample == name]
    return sum(values) if values else None


@dataclass(frozen=True)
class Load:
    """Requests a server has in flight: running in its batch, and waiting in its queue."""

    running: int
    queued: int

    @property
    def busy(self) -> int:
        return self.running + self.queued


def load_from_metrics(text: str) -> Optional[Load]:
    """The server's load from its ``/metrics``; None when it does not export ``sglang:num_running_reqs``."""
    running = total(text, RUNNING)
    if running is None:
        return None
    return Load(int(round(running)), int(round(total(text, QUEUED) or 0)))


def load_from_get_load(body: str) -> Optional[Load]:
    """The server's load from ``GET /get_load`` (a list of per-DP-rank dicts, or one dict); None when unreadable."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    ranks = data if isinstance(data, list) else [data]
    running = queued = 0
    for rank in ranks:
        if not isinstance(rank, dict) or not isinstance(rank.get('num_reqs'), int):
            return None
        waiting = rank.get('num_waiting_reqs') if isinstance(rank.get('num_waiting_reqs'), int) else 0
        running += rank['num_reqs'] - waiting
        queued += waiting
    return Load(running, queued) if ranks else None


def finished_requests(text: str) -> Optional[float]:
    """SGLang's counter of finished requests (every label set), None when not exported."""
    return total(text, FINISHED)


def circuits(text: str) -> Dict[str, str]:
    """The gateway's circuit-breaker state per worker URL: ``closed``, ``open`` or ``half_open``."""
    out = {}
    for name, labels, value in samples(text):
        if name == CIRCUIT_METRIC and labels.get('worker'):
            out[labels['worker']] = CIRCUIT_STATES.get(int(value), 'unknown')
    return out
