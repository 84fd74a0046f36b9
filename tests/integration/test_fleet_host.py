# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""tests/infra/fleet.sh itself, on a real test host: a host booted again over its own leftovers comes up (fleet.sh runs
with errexit, and stopping the leftovers records the CPU of a node whose cgroup is gone), and each stopped host's CPU
over its life is recorded once in host-cpu.tsv (tests/run-all.sh prints the biggest)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: nvidia_fleet_host (conftest does it under pytest)
import nvidia_fleet_host as th  # noqa: E402  pylint: disable=wrong-import-position


def recorded(name):
    """host-cpu.tsv's lines for NAME: (CPU seconds, epoch seconds) each."""
    path = Path(th.fleet_dir()) / 'host-cpu.tsv'
    lines = path.read_text(encoding='utf-8').splitlines() if path.exists() else []
    return [(int(usec) / 1e6, int(when)) for host, usec, when in (line.split('\t') for line in lines) if host == name]


def test_a_host_booted_over_its_leftovers_comes_up_and_each_stop_records_its_cpu(tmp_path):
    name = 'fleetcpu%d' % (os.getpid() % 100000)
    nodes = Path(th.fleet_dir()) / 'nodes'
    nodes.mkdir(parents=True, exist_ok=True)
    # what a host killed with its controller leaves: its pid file, no process, no cgroup
    (nodes / (name + '.pid')).write_text('999999\n', encoding='utf-8')
    try:
        node = th.boot(name, tmp_path)
        assert node['leader']
    finally:
        th.down(name)
    lines = recorded(name)
    # the leftovers' stop found no cgroup (nothing recorded), the real host's stop recorded what its boot used
    assert len(lines) == 1, lines
    assert 0.05 < lines[0][0] < 60
