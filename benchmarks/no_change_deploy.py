# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: the no-change deploy (a second `ansible-playbook llmops.sglang.deploy` that changes nothing), this tree
against a baseline revision and against a one-ping playbook, in the same run.

    python3 benchmarks/no_change_deploy.py [--baseline-rev main] [--hosts 1] [--runs 5] [--markdown]

Each collection gets its own fresh test hosts (tests/infra/fleet.sh; names <prefix>b1.. for the baseline, <prefix>t1..
for this tree, unique to this benchmark), deployed once with that collection (benchmarks/fleet_deploy.py's settings: the
demo's configuration, every host replaying the same recorded start): the deployment record the no-change check compares
with is the collection's own, so both trees measure their no-change path. Then the runs alternate (baseline, this tree,
one ping per host on this tree's hosts, ...) so that a change of the machine's load hits all three alike. Every deploy
run must be the no-change path: changed=0 on every host and every row "unchanged".

Printed per collection and for the floor: median wall seconds, median CPU seconds of the controller (ansible-playbook and
its reaped children: workers, ssh) and of the hosts (their cgroups), the tasks each host ran (ok + skipped in the PLAY
RECAP) and, for this tree, the time split by task. The ratios are the result; the wall seconds depend on the machine's
load, the CPU seconds and the task count hardly do. Run as root, one instance at a time; the hosts are stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# one place for booting hosts, running a step with a timeout, reading the recap and the hosts' CPU, the per-task timer
from fleet_deploy import (  # noqa: E402  pylint: disable=wrong-import-position
    FLEET, BenchError, add_poll_interval_option, baseline_tree, cgroup_roots, collection_path, host_cpu, prepare, recap,
    run)

UNCHANGED_SUMMARY = 'deploy: %d host%s, %d ready (%d unchanged)'

# The floor: a playbook with one module run per host (ansible.builtin.ping), same controller, hosts and connections.
PING_PLAYBOOK = """\
- name: One module run per host
  hosts: sglang
  gather_facts: false
  tasks:
    - name: Ping
      ansible.builtin.ping:
"""


def log(msg: str) -> None:
    print(f"[no_change_deploy {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def boot(names: list[str], work: Path, env: dict[str, str], label: str) -> Path:
    run(["bash", str(FLEET), "up", *names], timeout=240, env=env)
    for name in names:  # a real host resolves its own name (fleet_deploy.py: fact gathering would wait 10 s for DNS)
        run(["bash", str(FLEET), "ssh", name, f"grep -qw {name} /etc/hosts || echo '127.0.1.1 {name}' >> /etc/hosts"],
            timeout=30, env=env)
    inventory = work / f"hosts-{label}.yml"
    run(["bash", str(FLEET), "inventory", "--group", "sglang", str(inventory), *names], timeout=30, env=env)
    return inventory


def one_run(aenv: dict[str, str], work: Path, inventory: Path, hosts: list[str], label: str, log_file: Path, fleet: Path) -> dict:
    times = work / 'times.json'
    if label == 'ping':
        cmd = ['ansible-playbook', str(work / 'ping.yml'), '-i', str(inventory)]
    else:
        cmd = ['ansible-playbook', 'llmops.sglang.deploy', '-i', str(inventory), '-i', str(work / 'vars.yml')]
    roots = cgroup_roots(fleet)
    cpu0 = host_cpu(hosts, roots)
    step = run(cmd, timeout=300, env=aenv | {'FLEET_BENCH_TIMES': str(times)}, log_file=log_file)
    hosts_cpu = host_cpu(hosts, roots) - cpu0
    counts = recap(step.out, hosts, label)
    n = len(hosts)
    summary = UNCHANGED_SUMMARY % (n, '' if n == 1 else 's', n, n)
    if any(c['changed'] for c in counts.values()) or (label != 'ping' and summary not in step.out):
        raise BenchError(f'{label}: not the no-change path (changed>0 or not every host unchanged); see {log_file}')
    return {'wall': step.wall, 'cpu': step.controller_cpu, 'hosts_cpu': hosts_cpu,
            'tasks': max(c['ok'] + c['skipped'] for c in counts.values()), 'times': json.loads(times.read_text())}


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def task_split(runs: list[dict]) -> list[tuple[str, float]]:
    by_task: dict[str, list[float]] = {}
    for r in runs:
        for name, secs in r['times']:
            by_task.setdefault(name, []).append(secs)
    return sorted(((name, statistics.median(v)) for name, v in by_task.items()), key=lambda x: -x[1])


def report(results: dict[str, list[dict]], args: argparse.Namespace) -> str:
    base, this, ping = results['baseline'], results['this'], results['ping']
    rows = [('baseline ' + args.baseline_rev, base), ('this tree', this), ('one ping per host (floor)', ping)]
    out = [f'no-change deploy of {args.hosts} host(s) per collection, {args.runs} runs each (alternating), medians; '
           f'load average {os.getloadavg()[0]:.1f} at the end', '']
    head = ['collection', 'wall s', 'controller CPU s', 'hosts CPU s', 'tasks per host']
    lines = [head] + [[name, '%.2f' % median(r, 'wall'), '%.2f' % median(r, 'cpu'), '%.2f' % median(r, 'hosts_cpu'),
                       '%d' % median(r, 'tasks')] for name, r in rows]
    for label, a, b in (('baseline / this', base, this), ('this / floor', this, ping)):
        lines.append([label] + ['%.2fx' % (median(a, k) / max(median(b, k), 1e-6)) for k in ('wall', 'cpu', 'hosts_cpu', 'tasks')])
    if args.markdown:
        out += ['| ' + ' | '.join(lines[0]) + ' |', '|' + ' --- |' * len(head)]
        out += ['| ' + ' | '.join(r) + ' |' for r in lines[1:]]
    else:
        widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
        out += ['  '.join(c.ljust(w) for c, w in zip(r, widths)) for r in lines]
    out += ['', 'this tree, wall seconds by task (median; a task runs on every host at once):']
    out += ['  %6.2f  %s' % (secs, name) for name, secs in task_split(this)]
    return '\n'.join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with the settings fleet_deploy.prepare() reads (its deploy's settings, fixed here)."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--baseline-rev', default='main', help='git revision to compare with (default: main)')
    parser.add_argument('--hosts', type=int, default=1, help='test hosts per collection (default 1)')
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--prefix', default='nochg', help='host name prefix, unique to this benchmark')
    parser.add_argument('--work-dir', default='/var/tmp/llmops-bench-no-change')
    parser.add_argument('--markdown', action='store_true')
    add_poll_interval_option(parser)
    args = parser.parse_args(argv)
    args.wait_timeout, args.max_seconds, args.recording = 300, 8, 'rocm-tp2-multimodal-ready-no-cuda-graph'
    args.forks = max(10, args.hosts)
    return args


def main() -> int:
    args = parse_args()
    env = dict(os.environ)
    env.setdefault('LLMOPS_FLEET_DIR', '/var/tmp/llmops-fleet')
    fleet = Path(env['LLMOPS_FLEET_DIR'])
    work = Path(args.work_dir)
    (work / 'tmp').mkdir(parents=True, exist_ok=True)
    (work / 'ping.yml').write_text(PING_PLAYBOOK)
    names = {'baseline': [f'{args.prefix}b{i}' for i in range(1, args.hosts + 1)],
             'this': [f'{args.prefix}t{i}' for i in range(1, args.hosts + 1)]}
    everyone = names['baseline'] + names['this']
    try:
        aenv = prepare(args, work, env)
        envs = {'this': aenv,
                'baseline': dict(aenv, ANSIBLE_COLLECTIONS_PATH=str(collection_path(baseline_tree(args.baseline_rev, work),
                                                                                    work / 'collections-baseline')))}
        inventories = {}
        for label in ('baseline', 'this'):
            inventories[label] = boot(names[label], work, env, label)
            log(f'{label}: first deploy of {" ".join(names[label])}')
            run(['ansible-playbook', 'llmops.sglang.deploy', '-i', str(inventories[label]), '-i', str(work / 'vars.yml')],
                timeout=900, env=envs[label], log_file=work / f'first-{label}.log')
        plan = [('baseline', 'baseline'), ('this', 'this'), ('ping', 'this')]
        results: dict[str, list[dict]] = {'baseline': [], 'this': [], 'ping': []}
        for label, hosts_of in plan:  # one warm-up each: SSH ControlMaster connections, page cache
            one_run(envs[hosts_of], work, inventories[hosts_of], names[hosts_of], label, work / f'{label}-warmup.log', fleet)
        for i in range(args.runs):
            for label, hosts_of in plan:
                results[label].append(one_run(envs[hosts_of], work, inventories[hosts_of], names[hosts_of], label,
                                              work / f'{label}-{i}.log', fleet))
                log('%s run %d: %.2f s wall, %.2f s controller CPU' % (label, i + 1, results[label][-1]['wall'],
                                                                       results[label][-1]['cpu']))
    finally:
        run(['bash', str(FLEET), 'down', *everyone], timeout=120, env=env, check=False)
        run(['git', '-C', str(Path(__file__).resolve().parents[1]), 'worktree', 'remove', '--force', str(work / 'baseline-tree')],
            timeout=120, env=env, check=False)
    print(report(results, args))
    return 0


if __name__ == '__main__':
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f'no_change_deploy: {exc}', file=sys.stderr)
        sys.exit(1)
