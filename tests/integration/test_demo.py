# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""README's first command, `bash demo/run.sh`, as a newcomer runs it, on the controller Python a stock Debian 12
has: /usr/bin/python3.11 (ansible-core 2.19, through tests/infra/controller-venv.sh), when this machine has it.

Holds: the first host's start shows its stages as they come, every host serves, the second deploy of the same
hosts takes the no-change path (every row unchanged, changed=0 in every recap), the run ends with one table per
playbook, and nothing of the demo's hosts is left behind (network namespaces; the hub goes with the last host).

Run:  python -m pytest tests/integration/test_demo.py   (root; PyPI and the Debian archive reachable)
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NODES = ['demo1', 'demo2', 'demo3']
DEBIAN_PYTHON = '/usr/bin/python3.11'


def _netns():
    return subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True, check=False).stdout


def test_demo_ready_then_unchanged():
    env = dict(os.environ, LLMOPS_DEMO_NODES=' '.join(NODES))
    if os.path.exists(DEBIAN_PYTHON):
        env['LLMOPS_CONTROLLER_PYTHON'] = DEBIAN_PYTHON
    proc = subprocess.run(['bash', str(REPO / 'demo' / 'run.sh')], env=env, capture_output=True, text=True,
                          timeout=1500, check=False)
    out = proc.stdout
    assert proc.returncode == 0, out[-6000:] + proc.stderr[-3000:]
    if os.path.exists(DEBIAN_PYTHON):
        assert re.search(r'^ansible \[core 2\.19\.', out, re.M), out[:3000]
    first, rest = out.split('== ansible-playbook llmops.sglang.deploy again', 1)
    second, check = rest.split('== ansible-playbook llmops.sglang.check', 1)
    # live progress on the paced host: stage lines before its ready line
    progress = re.findall(r'^demo1: ([a-z_]+)(?: \d+%)? \(\d+\.\ds\)$', first, re.M)
    assert progress and progress[-1] == 'ready', first[-4000:]
    assert len(progress) >= 2, progress  # at least one stage seen live before ready, however loaded the machine
    # the first deploy started every host; the second changed nothing
    assert re.search(r'^llmops\.sglang deploy: 3 hosts, 3 ready$', first, re.M), first[-3000:]
    assert re.search(r'^llmops\.sglang deploy: 3 hosts, 3 ready \(3 unchanged\)$', second, re.M), second[-3000:]
    for node in NODES:
        assert re.search(r"^%s\s+ready\s+unchanged\s+ready\s+unchanged since " % node, second, re.M), second[-3000:]
        recap = re.search(r'^%s\s+: ok=(\d+)\s+changed=0\s+unreachable=0\s+failed=0\s+skipped=(\d+)\s' % node, second, re.M)
        assert recap, second[-3000:]
        # the no-change path is one module run per host (the deployment check) and 7 tasks in all, skipped ones
        # included (8 on the host that prints the table); each task costs a worker per host, so this holds the time
        # on any machine, however loaded
        assert int(recap.group(1)) + int(recap.group(2)) <= 8, recap.group(0)
    assert len(re.findall(r'^TASK \[', second, re.M)) <= 8, second[-3000:]
    took = float(re.search(r'^second deploy finished in ([0-9.]+)s$', second, re.M).group(1))
    assert took < 60, took  # 2-3x a one-ping playbook (docs/benchmarks.md); bounded loosely for a loaded CI machine
    # one table per playbook run
    assert first.count('HOST ') == 1 and second.count('HOST ') == 1 and check.count('HOST ') == 1
    # nothing left behind: the demo hosts' namespaces, and the hub when no other host is on it
    names = _netns()
    assert not any(re.search(r'-%s\b' % node, names) for node in NODES), names
    if not re.search(r'^llmops-(?!hub)', names, re.M):
        assert 'llmops-hub' not in names
