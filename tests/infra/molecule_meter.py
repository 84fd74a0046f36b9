# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What one molecule scenario costs, per molecule step: wall seconds, the controller's CPU and the test hosts' CPU.

    python3 tests/infra/molecule_meter.py SCENARIO [OUT_DIR]     # root, from the collection root, venv bin on PATH

Runs ``molecule test -s SCENARIO`` in a cgroup (v2) of its own and marks each step molecule starts (its
``[SCENARIO > step] Executing`` line): the seconds since the last mark, the CPU of that cgroup (molecule, every
ansible-playbook it runs, nested runs, ssh; not the hosts) and the CPU of the fleet state directory's cgroup parent
(``.../llmops-fleet-<tag>``: every test host of LLMOPS_FLEET_DIR; a child directory kept in it keeps its count across
the scenario's destroy). Prints one line per step and the total; OUT_DIR (default ``/tmp/molecule-meter/SCENARIO``)
gets molecule's output and ``steps.json``. The hosts' count includes any other host of the same state directory: use
one of your own (LLMOPS_FLEET_DIR), and run one scenario at a time.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time

STEP = re.compile(r'\[\S+ > (\w+)\] Executing')


def cgroup_root() -> str:
    return '/sys/fs/cgroup/unified' if os.path.isdir('/sys/fs/cgroup/unified') else '/sys/fs/cgroup'


def hosts_cgroup() -> str:
    """The cgroup parent of this state directory's hosts (tests/infra/fleet.sh: its own prefix unless the default)."""
    fleet = os.path.realpath(os.environ.get('LLMOPS_FLEET_DIR', '/var/tmp/llmops-fleet'))
    name = 'llmops-fleet' if fleet == '/var/tmp/llmops-fleet' else 'llmops-fleet-' + hashlib.sha256((fleet + '\n').encode()).hexdigest()[:6]
    return os.path.join(cgroup_root(), name)


def cpu_seconds(cgroup: str) -> float:
    try:
        with open(os.path.join(cgroup, 'cpu.stat'), encoding='ascii') as stat:
            for line in stat:
                if line.startswith('usage_usec '):
                    return int(line.split()[1]) / 1e6
    except FileNotFoundError:
        pass
    return 0.0


def main(argv: list) -> int:
    scenario = argv[1]
    out = argv[2] if len(argv) > 2 else os.path.join('/tmp/molecule-meter', scenario)
    os.makedirs(out, exist_ok=True)
    hosts = hosts_cgroup()
    os.makedirs(os.path.join(hosts, 'molecule-meter'), exist_ok=True)
    own = os.path.join(cgroup_root(), 'molecule-meter-%d' % os.getpid())
    os.makedirs(own)
    marks = [('start', time.time(), 0.0, cpu_seconds(hosts))]
    cmd = 'echo $$ > %s/cgroup.procs && exec molecule test -s %s' % (own, scenario)
    with open(os.path.join(out, 'molecule.log'), 'w', encoding='utf-8') as log:
        with subprocess.Popen(['bash', '-c', cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              errors='replace') as proc:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                match = STEP.search(line)
                if match:
                    marks.append((match.group(1), time.time(), cpu_seconds(own), cpu_seconds(hosts)))
            rc = proc.wait()
    marks.append(('end', time.time(), cpu_seconds(own), cpu_seconds(hosts)))
    rows = [{'step': a[0], 'wall': round(b[1] - a[1], 1), 'controller_cpu': round(b[2] - a[2], 1),
             'hosts_cpu': round(b[3] - a[3], 1)} for a, b in zip(marks, marks[1:])]
    rows.append({'step': 'total', 'wall': round(marks[-1][1] - marks[0][1], 1), 'controller_cpu': round(marks[-1][2], 1),
                 'hosts_cpu': round(marks[-1][3] - marks[0][3], 1), 'rc': rc})
    with open(os.path.join(out, 'steps.json'), 'w', encoding='utf-8') as steps:
        json.dump(rows, steps, indent=1)
    for row in rows:
        print('%-12s %7.1f s  controller %6.1f CPU-s  hosts %6.1f CPU-s'
              % (row['step'], row['wall'], row['controller_cpu'], row['hosts_cpu']))
    os.rmdir(own)
    for empty in (os.path.join(hosts, 'molecule-meter'), hosts):
        try:
            os.rmdir(empty)
        except OSError:
            pass  # hosts still up in the state directory (or their cgroups): fleet.sh down removes it
    return rc


if __name__ == '__main__':
    sys.exit(main(sys.argv))
