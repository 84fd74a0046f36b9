# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: the no-change deploy of the demo (its second `ansible-playbook llmops.sglang.deploy`), this tree against
a baseline revision, on the same hosts in the same run.

Needs the demo's hosts up and deployed once (the first deploy of demo/run.sh):

    LLMOPS_DEMO_KEEP=1 bash demo/run.sh
    python3 benchmarks/no_change_deploy.py [--baseline-rev main~1] [--runs 5] [--markdown]

Both collections run the same playbook, inventory and controller venv (demo/run.sh's), alternately (baseline, this
tree, baseline, ...) so that a change of the machine's load hits both alike. Every run must be the no-change path:
changed=0 on every host and every row of the table "unchanged" (else the script stops: the two trees would not be
measuring the same thing, e.g. when the baseline's module code differs and its record does not match).

The floor, measured alternately too: a playbook with one ansible.builtin.ping task per host (one module run per host,
which the no-change path also is at best). Printed per collection and for the floor: median wall seconds, median CPU
seconds of the controller (ansible-playbook and its reaped children: workers, ssh) and of the hosts (their cgroups),
the tasks each host ran (ok + skipped in the PLAY RECAP: each costs a worker per host, skipped or not) and, for this
tree, the time split by task (median per task). The
ratios baseline/this are the result; the wall seconds depend on the machine's load, the CPU seconds and the task
count hardly do.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# one place for running a step with a timeout, reading the recap and the hosts' CPU, and the per-task timer
from fleet_deploy import REPO, TIMER_CALLBACK, BenchError, cgroup_roots, host_cpu, recap, run  # noqa: E402  pylint: disable=wrong-import-position

UNCHANGED_SUMMARY = 'deploy: %d hosts, %d ready (%d unchanged)'


def log(msg: str) -> None:
    print(f"[no_change_deploy {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def demo_hosts(fleet: Path) -> list[str]:
    """The hosts of the inventory demo/run.sh wrote, in its order."""
    path = fleet / 'demo-hosts-ready.yml'
    if not path.is_file():
        raise BenchError(f'{path} is missing: run LLMOPS_DEMO_KEEP=1 bash demo/run.sh first (its hosts stay up)')
    names, in_hosts = [], False
    for line in path.read_text().splitlines():
        if line.strip() == 'hosts:':
            in_hosts = True
        elif in_hosts and line.startswith('        ') and not line.startswith('         ') and line.strip().endswith(':'):
            names.append(line.strip()[:-1])
        elif in_hosts and line.strip() == 'vars:':
            break
    if not names:
        raise BenchError(f'no hosts found in {path}')
    return names


def collection_path(tree: Path, work: Path, label: str) -> Path:
    path = work / label / 'ansible_collections' / 'llmops'
    path.mkdir(parents=True, exist_ok=True)
    (path / 'sglang').symlink_to(tree)
    return work / label


def baseline_tree(rev: str, work: Path) -> Path:
    tree = work / 'baseline-tree'
    subprocess.run(['git', '-C', str(REPO), 'worktree', 'add', '--detach', str(tree), rev], check=True,
                   capture_output=True, timeout=120)
    return tree


def controller_env(fleet: Path, collections: Path, callback_dir: Path, times: Path) -> dict[str, str]:
    """demo/run.sh's controller settings."""
    env = dict(os.environ)
    env.update({
        'PATH': f"{fleet / 'controller-venv' / 'bin'}:{env['PATH']}",
        'ANSIBLE_COLLECTIONS_PATH': str(collections),
        'ANSIBLE_HOST_KEY_CHECKING': 'False',
        'ANSIBLE_SSH_CONTROL_PATH_DIR': str(fleet / 'cp'),
        'ANSIBLE_PIPELINING': 'True',
        'ANSIBLE_SSH_RETRIES': '3',
        'ANSIBLE_FORKS': '10',
        'ANSIBLE_STDOUT_CALLBACK': 'ansible.builtin.default',
        'ANSIBLE_NOCOLOR': '1',
        'LLMOPS_DEMO_WHEELHOUSE': str(fleet / 'wheelhouse'),
        'ANSIBLE_CALLBACK_PLUGINS': str(callback_dir),
        'ANSIBLE_CALLBACKS_ENABLED': 'fleet_bench_timer',
        'FLEET_BENCH_TIMES': str(times),
    })
    env.pop('ANSIBLE_CONFIG', None)
    return env


# The floor: a playbook with one module run per host (ansible.builtin.ping), same controller, hosts and connections.
PING_PLAYBOOK = """\
- name: One module run per host
  hosts: sglang
  gather_facts: false
  tasks:
    - name: Ping
      ansible.builtin.ping:
"""


def one_run(env: dict[str, str], fleet: Path, hosts: list[str], label: str, log_file: Path) -> dict:
    if label == 'ping':
        cmd = ['ansible-playbook', str(Path(env['FLEET_BENCH_TIMES']).parent / 'ping.yml'), '-i', str(fleet / 'demo-hosts-ready.yml')]
    else:
        cmd = ['ansible-playbook', 'llmops.sglang.deploy', '-i', str(fleet / 'demo-hosts-ready.yml'), '-i',
               str(REPO / 'demo' / 'inventory.yml'), '-e', 'llmops_demo=ready']
    roots = cgroup_roots(fleet)
    cpu0 = host_cpu(hosts, roots)
    step = run(cmd, timeout=300, env=env, log_file=log_file)
    hosts_cpu = host_cpu(hosts, roots) - cpu0
    counts = recap(step.out, hosts, label)
    summary = UNCHANGED_SUMMARY % (len(hosts), len(hosts), len(hosts))
    if any(c['changed'] for c in counts.values()) or (label != 'ping' and summary not in step.out):
        raise BenchError(f'{label}: not the no-change path (changed>0 or not every host unchanged); see {log_file}')
    times = json.loads(Path(env['FLEET_BENCH_TIMES']).read_text())
    return {'wall': step.wall, 'cpu': step.controller_cpu, 'hosts_cpu': hosts_cpu,
            'tasks': max(c['ok'] + c['skipped'] for c in counts.values()), 'times': times}


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def task_split(runs: list[dict]) -> list[tuple[str, float]]:
    by_task: dict[str, list[float]] = {}
    for r in runs:
        for name, secs in r['times']:
            by_task.setdefault(name, []).append(secs)
    return sorted(((name, statistics.median(v)) for name, v in by_task.items()), key=lambda x: -x[1])


def report(results: dict[str, list[dict]], args: argparse.Namespace, hosts: list[str]) -> str:
    base, this, ping = results['baseline'], results['this'], results['ping']
    rows = [('baseline ' + args.baseline_rev, base), ('this tree', this), ('one ping per host (floor)', ping)]
    out = [f'no-change deploy of {len(hosts)} demo hosts, {args.runs} runs each (alternating), medians; '
           f'load average {os.getloadavg()[0]:.1f} at the end', '']
    head = ['collection', 'wall s', 'controller CPU s', 'hosts CPU s', 'tasks per host']
    lines = [head] + [[name, '%.2f' % median(r, 'wall'), '%.2f' % median(r, 'cpu'), '%.2f' % median(r, 'hosts_cpu'),
                       '%d' % median(r, 'tasks')] for name, r in rows]
    lines.append(['baseline / this', '%.2fx' % (median(base, 'wall') / median(this, 'wall')),
                  '%.2fx' % (median(base, 'cpu') / median(this, 'cpu')),
                  '%.2fx' % (median(base, 'hosts_cpu') / max(median(this, 'hosts_cpu'), 1e-6)),
                  '%.2fx' % (median(base, 'tasks') / median(this, 'tasks'))])
    lines.append(['this / floor', '%.2fx' % (median(this, 'wall') / median(ping, 'wall')),
                  '%.2fx' % (median(this, 'cpu') / median(ping, 'cpu')),
                  '%.2fx' % (median(this, 'hosts_cpu') / max(median(ping, 'hosts_cpu'), 1e-6)),
                  '%.2fx' % (median(this, 'tasks') / median(ping, 'tasks'))])
    if args.markdown:
        out += ['| ' + ' | '.join(r) + ' |' for r in lines[:1]] + ['|' + ' --- |' * len(head)]
        out += ['| ' + ' | '.join(r) + ' |' for r in lines[1:]]
    else:
        widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
        out += ['  '.join(c.ljust(w) for c, w in zip(r, widths)) for r in lines]
    out += ['', 'this tree, wall seconds by task (median; a task runs on every host at once):']
    out += ['  %6.2f  %s' % (secs, name) for name, secs in task_split(this)]
    return '\n'.join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--baseline-rev', default='main', help='git revision to compare with (default: main)')
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--markdown', action='store_true')
    args = parser.parse_args()
    fleet = Path(os.environ.get('LLMOPS_FLEET_DIR', '/var/tmp/llmops-fleet'))
    hosts = demo_hosts(fleet)
    with tempfile.TemporaryDirectory(prefix='llmops-no-change-') as tmp:
        work = Path(tmp)
        callback_dir = work / 'callback_plugins'
        callback_dir.mkdir()
        (callback_dir / 'fleet_bench_timer.py').write_text(TIMER_CALLBACK)
        (work / 'ping.yml').write_text(PING_PLAYBOOK)
        tree = baseline_tree(args.baseline_rev, work)
        try:
            envs = {'baseline': controller_env(fleet, collection_path(tree, work, 'baseline'), callback_dir, work / 't.json'),
                    'this': controller_env(fleet, collection_path(REPO, work, 'this'), callback_dir, work / 't.json')}
            envs['ping'] = envs['this']
            results: dict[str, list[dict]] = {'baseline': [], 'this': [], 'ping': []}
            # one warm-up each: SSH ControlMaster connections, page cache
            for label in envs:
                one_run(envs[label], fleet, hosts, label, work / f'{label}-warmup.log')
            for i in range(args.runs):
                for label in envs:
                    results[label].append(one_run(envs[label], fleet, hosts, label, work / f'{label}-{i}.log'))
                    log('%s run %d: %.2f s wall, %.2f s controller CPU' % (label, i + 1, results[label][-1]['wall'],
                                                                           results[label][-1]['cpu']))
        finally:
            subprocess.run(['git', '-C', str(REPO), 'worktree', 'remove', '--force', str(tree)], check=False,
                           capture_output=True, timeout=120)
    print(report(results, args, hosts))
    return 0


if __name__ == '__main__':
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f'no_change_deploy: {exc}', file=sys.stderr)
        sys.exit(1)
