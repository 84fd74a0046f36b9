# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""README's demo, as a newcomer runs it: `bash demo/run.sh`, `bash demo/run.sh crash`, `bash demo/run.sh tune` and
`bash demo/run.sh guard`, each run once, on the controller Python a stock Debian 12 has: /usr/bin/python3.11 (ansible-core 2.19, through
tests/infra/controller-venv.sh), when this machine has it. The three tests boot their own hosts (different names)
and can run at once (the demo does its set-up one run at a time).

Each holds, from that one run:
- the screen fits its budget (lines, counted from a playbook's `==` line to its `finished` line, or the whole run):
  first deploy of 3 hosts at most 80, second deploy and check at most 20 each, crash mode at most 40, tune at most 60;
- README's example output of the mode (the blocks after `<!-- demo output: MODE -->`) says what the demo prints:
  every line of it is a line of the run (numbers, host names and the state directory aside), and the stages of a
  progress line were reported for that host;
- each failure is said once, with its reason, and no `fatal:` or `[ERROR]` block reaches the screen; the full log
  (whose path the demo prints first and last) keeps every task and result;
- the ready mode: live progress of the paced host, every host serving, the second deploy on the no-change path
  (every row unchanged, changed=0, at most 8 tasks per host), one table per playbook;
- the crash mode: every host crashed with the root cause of its recording, exit code 2;
- the tune mode on hosts not named node1: the variants rolled back as the seeds were, exit code 0; with
  LLMOPS_DEMO_KEEP=1, the commands it prints reach the kept host and stop it;
- the guard mode: one line per event (a hang decided within two intervals and restarted once, a crash loop stopped, the
  Xid of the server's GPU stopping it), a stop while loading within its bound, the deploy after the Xid refused with
  NVIDIA's meaning of it, the guard's summary; exit code 0, at most GUARD_BUDGET lines;
- nothing of the demo's hosts is left behind (network namespaces; the hub goes with the last host).

The ready mode runs once per suite: tests/run-all.sh's stock-debian step runs README's command in a fresh stock Debian 12
(tests/infra/stock-debian.sh, LLMOPS_STOCK_SAVE) and saves what it printed, its exit code, its full log and the network
namespaces left after it; LLMOPS_DEMO_READY_RUN=<that directory> makes the ready test hold the same assertions on that
run instead of running the demo again (the pytest lane deselects it; the stock-debian step runs it).

Run:  python -m pytest tests/integration/test_demo.py   (root; PyPI and the Debian archive reachable)
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
DEBIAN_PYTHON = '/usr/bin/python3.11'
NODES = {'ready': ['demo1', 'demo2', 'demo3'], 'crash': ['demo4', 'demo5', 'demo6'], 'tune': ['demo7'], 'guard': ['demo8']}
README_NODES = ['node1', 'node2', 'node3']
FLEET_DIR = os.environ.get('LLMOPS_FLEET_DIR', '/var/tmp/llmops-fleet')
FINISHED = re.compile(r'^== (.+) finished in ([0-9.]+) s with exit code (\d+)$')
# "node1: init_distributed, load_weights 100% (1.1s)", "node1: ready (2.8s), watching it for stable_for=15s"
PROGRESS = re.compile(r'^(\S+): ((?:[a-z_]+(?: \d+%)?)(?:, [a-z_]+(?: \d+%)?)*) \(\d+\.\ds\)(?:, watching it for stable_for=\d+s)?$')

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='the demo boots systemd-nspawn hosts: root only')


def _netns():
    return subprocess.run(['ip', 'netns', 'list'], capture_output=True, text=True, check=False).stdout


@dataclass
class DemoRun:
    """One run of the demo: what it printed and where it kept its state. ``log`` is the full log's copy to read (the
    run printed ``fleet_dir``/demo-MODE.log); ``netns_after`` the network namespaces right after it (None: look now)."""

    rc: int
    lines: List[str]
    nodes: List[str]
    fleet_dir: str
    log: Path
    netns_after: Optional[str] = None
    debian_python: bool = os.path.exists(DEBIAN_PYTHON)


def saved_run(directory, mode):
    """The run tests/infra/stock-debian.sh saved (LLMOPS_STOCK_SAVE): README's command as written, so README's host
    names, on stock Debian's Python 3.11."""
    saved = Path(directory)
    screen = saved / 'screen.txt'
    assert screen.is_file(), 'LLMOPS_DEMO_READY_RUN=%s holds no screen.txt: no saved run of the demo there' % directory
    return DemoRun(rc=int((saved / 'rc').read_text().strip()), lines=screen.read_text(encoding='utf-8').splitlines(),
                   nodes=list(README_NODES), fleet_dir=(saved / 'fleet-dir.txt').read_text().strip(),
                   log=saved / ('demo-%s.log' % mode), netns_after=(saved / 'netns-after.txt').read_text(), debian_python=True)


def run_demo(mode, keep=False):
    env = dict(os.environ, LLMOPS_DEMO_NODES=' '.join(NODES[mode]))
    for key in ('ANSIBLE_VERBOSITY', 'ANSIBLE_STDOUT_CALLBACK', 'LLMOPS_DEMO_KEEP'):
        env.pop(key, None)
    if keep:
        env['LLMOPS_DEMO_KEEP'] = '1'
    if os.path.exists(DEBIAN_PYTHON):
        env['LLMOPS_CONTROLLER_PYTHON'] = DEBIAN_PYTHON
    args = ['bash', str(REPO / 'demo' / 'run.sh')] + ([] if mode == 'ready' else [mode])
    # the screen: stdout and stderr (warnings) as they interleave
    # from the checkout, as README says
    proc = subprocess.run(args, env=env, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=1800, check=False)
    return proc.returncode, proc.stdout.splitlines()


def playbooks(lines):
    """{label: lines from the playbook's `== ansible-playbook` line to its `== label finished` line}."""
    out, current = {}, None
    for line in lines:
        if line.startswith('== ansible-playbook '):
            current = [line]
        elif current is not None:
            current.append(line)
            match = FINISHED.match(line)
            if match:
                out[match.group(1)] = current
                current = None
    return out


def renamed(line, nodes, fleet_dir=FLEET_DIR):
    """A line of the run with README's host names and state directory."""
    for readme_name, name in zip(README_NODES, nodes):
        line = re.sub(r'\b%s\b' % re.escape(name), readme_name, line)
    return line.replace(fleet_dir, '/var/tmp/llmops-fleet')


def normal(line):
    """A line with its numbers (times, counts, versions, timestamps; not the digits of a name such as node1) and its
    spacing left out: what README can hold of it."""
    line = re.sub(r'\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ', '#', line)
    return ' '.join(re.sub(r'(?<![A-Za-z])\d+(?:\.\d+)*', '#', line).split())


def stages_by_host(lines, nodes):
    seen = {}
    for line in lines:
        match = PROGRESS.match(line)
        if match:
            host = renamed(match.group(1), nodes)
            seen.setdefault(host, set()).update(word.split(' ')[0] for word in match.group(2).split(', '))
    return seen


# the table's right-aligned columns (plugins/plugin_utils/_run_report.py and _run_rows.py: Column(..., right=True))
RIGHT = ('TIME', 'TTFT')


def table(lines):
    """The rows of the run's table (llmops.sglang.sglang_run_report) as {column header: cell}, read by the header's
    column positions: a left-aligned cell starts under its header, a right-aligned one ends under its header's end."""
    start = next(i for i, line in enumerate(lines) if line.startswith('HOST '))
    header = lines[start]
    spans = [m.span() for m in re.finditer(r'\S+(?: \S+)?(?= {2}|$)', header)]
    names = [header[a:b] for a, b in spans]
    rows = []
    for line in lines[start + 1:]:
        if not line.strip() or line.startswith(('PLAY RECAP', 'query ')):
            break
        cells, starts = {}, {}
        for name, (a, b) in zip(names, spans):
            if name in RIGHT:  # the word that ends where the header ends, if any
                match = re.search(r'(\S+)$', line[:b]) if b <= len(line) and line[b - 1:b] != ' ' else None
                cells[name] = match.group(1) if match else ''
                starts[name] = match.start(1) if match else b
        for i, (name, (a, b)) in enumerate(zip(names, spans)):
            if name in RIGHT:
                continue
            end = None
            if i + 1 < len(names):
                end = starts.get(names[i + 1], spans[i + 1][0])
            cells[name] = line[a:end].strip()
        rows.append(dict((name, cells[name]) for name in names))
    return rows


def readme_example(mode):
    text = (REPO / 'README.md').read_text(encoding='utf-8')
    blocks = re.findall(r'^<!-- demo output: %s -->\n```text\n(.*?)^```' % mode, text, re.M | re.S)
    assert blocks, 'README.md has no example output of the %s mode' % mode
    return [line for block in blocks for line in block.splitlines() if line.strip() and line.strip() != '...']


def assert_readme_says_what_the_demo_prints(mode, lines, nodes=None, fleet_dir=FLEET_DIR):
    nodes = nodes or NODES[mode]
    printed = {normal(renamed(line, nodes, fleet_dir)) for line in lines}
    stages = stages_by_host(lines, nodes)
    for line in readme_example(mode):
        match = PROGRESS.match(line)
        if match and not line.endswith('(one probe, check mode)'):
            # how many stages share a line depends on the machine's pace; which stages a host reports does not
            said = {word.split(' ')[0] for word in match.group(2).split(', ')}
            assert said <= stages.get(match.group(1), set()), (line, stages)
        else:
            assert normal(line) in printed, 'README says %r; the demo printed:\n%s' % (line, '\n'.join(lines))


def assert_the_run_is_logged(lines, mode, fleet_dir=FLEET_DIR, copy=None):
    """COPY: where the log is read when it is not at the path the run printed (a saved run's copy)."""
    log = Path(fleet_dir) / ('demo-%s.log' % mode)
    assert lines[0].endswith('the full log: %s' % log) and lines[-1].endswith('the full log: %s' % log), (lines[0], lines[-1])
    text = (copy or log).read_text(encoding='utf-8', errors='replace')
    assert 'TASK [' in text and 'PLAY RECAP' in text and '== Booting' in text
    # one line per set-up phase on the screen, each with its time
    phases = [line for line in lines if line.startswith('== ') and ' ... ' in line]
    assert len(phases) >= 5 and all(re.search(r'(?:\d+\.\d s|, \d+\.\d s)$', line) for line in phases), phases
    return text


def node_namespace(node, fleet_dir=FLEET_DIR):
    """The network namespace tests/infra/fleet.sh gives NODE in FLEET_DIR (another state directory, such as a CI run's,
    may use the same node names under its own prefix)."""
    path = os.path.realpath(fleet_dir)
    if path == '/var/tmp/llmops-fleet':
        return 'llmops-n-' + node
    return 'llmops-x%s-%s' % (hashlib.sha256((path + '\n').encode()).hexdigest()[:6], node)


def assert_nothing_left_behind(nodes, fleet_dir=FLEET_DIR, names=None):
    names = _netns() if names is None else names
    assert not any(re.search(r'^%s\b' % re.escape(node_namespace(node, fleet_dir)), names, re.M) for node in nodes), names
    if not re.search(r'^llmops-(?!hub)', names, re.M):
        assert 'llmops-hub' not in names


def assert_no_failure_block(lines):
    assert not [line for line in lines if line.startswith(('fatal:', '[ERROR]', 'FAILED - RETRYING'))], '\n'.join(lines)


def ready_run():
    """The ready mode's run: the one the stock-debian step saved (LLMOPS_DEMO_READY_RUN), else one now."""
    saved = os.environ.get('LLMOPS_DEMO_READY_RUN')
    if saved:
        return saved_run(saved, 'ready')
    rc, lines = run_demo('ready')
    return DemoRun(rc=rc, lines=lines, nodes=NODES['ready'], fleet_dir=FLEET_DIR, log=Path(FLEET_DIR) / 'demo-ready.log')


def test_demo_ready_then_unchanged():
    run = ready_run()
    rc, lines, nodes = run.rc, run.lines, run.nodes
    out = '\n'.join(lines)
    assert rc == 0, out[-6000:]
    if run.debian_python:
        assert re.search(r'\.\.\. ansible-core 2\.19\.\d+, ', out), out[:3000]
    runs = playbooks(lines)
    assert list(runs) == ['first deploy', 'second deploy', 'check'], list(runs)
    for label, budget in (('first deploy', 80), ('second deploy', 20), ('check', 20)):
        assert len(runs[label]) <= budget, '%s: %d lines, budget %d:\n%s' % (label, len(runs[label]), budget, '\n'.join(runs[label]))
    first, second, check = ('\n'.join(runs[k]) for k in ('first deploy', 'second deploy', 'check'))
    # live progress on the paced host: stages before its ready line
    progress = stages_by_host(runs['first deploy'], nodes).get('node1', set())
    assert 'ready' in progress and len(progress) >= 3, progress
    # the first deploy started every host; the second changed nothing
    assert re.search(r'^llmops\.sglang deploy: 3 hosts, 3 ready$', first, re.M), first
    assert re.search(r'^llmops\.sglang deploy: 3 hosts, 3 ready \(3 unchanged\)$', second, re.M), second
    for row in table(runs['second deploy']):
        assert row['STATUS'] == 'ready' and row['REASON'].startswith('unchanged since '), row
        assert 'unchanged' in (row.get('RUN'), row.get('SIGNATURE')), row
    for node in nodes:
        recap = re.search(r'^%s\s+: ok=(\d+)\s+changed=0\s+unreachable=0\s+failed=0\s+skipped=(\d+)\s' % node, second, re.M)
        assert recap, second
        # the no-change path is one module run per host (the deployment check) and 3 tasks in all, the skipped driver
        # include included (4 on the host that prints the table): the role ends after its plan and the hosts that
        # serve end after the table with meta tasks, which fork no worker; each task costs a worker per host, so this
        # holds the time on any machine, however loaded
        assert int(recap.group(1)) + int(recap.group(2)) <= 4, recap.group(0)
    took = float(FINISHED.match(runs['second deploy'][-1]).group(2))
    assert took < 60, took  # 2-3x a one-ping playbook (docs/benchmarks.md); bounded loosely for a loaded CI machine
    # one table per playbook run
    assert first.count('\nHOST ') == 1 and second.count('\nHOST ') == 1 and check.count('\nHOST ') == 1
    assert_no_failure_block(lines)
    log = assert_the_run_is_logged(lines, 'ready', run.fleet_dir, run.log)
    second_log = log.split('== ansible-playbook llmops.sglang.deploy again', 1)[1].split('== ansible-playbook', 1)[0]
    # the 4 tasks and the two meta tasks (the role's end, the play's end for the hosts that serve)
    assert len(re.findall(r'\| TASK \[', second_log)) <= 6, second_log[-3000:]
    assert_readme_says_what_the_demo_prints('ready', lines, nodes, run.fleet_dir)
    assert_nothing_left_behind(nodes, run.fleet_dir, run.netns_after)


# The crash mode's budget (issue 23: at most 40 lines); a host's passed pre-flight and SM120 patch state are -v lines
CRASH_BUDGET = 40


def test_demo_crash_says_each_failure_once():
    rc, lines = run_demo('crash')
    out = '\n'.join(lines)
    assert rc == 2, out[-6000:]
    assert len(lines) <= CRASH_BUDGET, '%d lines, budget %d:\n%s' % (len(lines), CRASH_BUDGET, out)
    rows = dict((row['HOST'], row) for row in table(lines))
    assert {host: (row['STATUS'], row['SIGNATURE'], row['STAGE']) for host, row in rows.items()} == {
        'demo4': ('crashed', 'cuda_oom', 'cuda_graph'), 'demo5': ('crashed', 'import_error', 'start'),
        'demo6': ('crashed', 'nccl_error', 'init_distributed')}
    # the root cause of each recording is its row's reason, on the screen once
    assert rows['demo6']['REASON'] == 'RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)'
    for row in rows.values():
        assert sum(row['REASON'] in line for line in lines) == 1, row
    assert [line for line in lines if line.startswith('failed: ')] == [
        'failed: [demo4, demo5, demo6] Fail the hosts that are not serving: not serving; its row in the table above says why']
    assert_no_failure_block(lines)
    log = assert_the_run_is_logged(lines, 'crash')
    # the detail is in the full log: each host's failure as the role failed it, with the stage and signature of its row
    # (and its log's line), and the lines the screen leaves to -v
    for host, row in rows.items():
        failed = re.findall(r"^.*\| fatal: \[%s\]: FAILED! => \n\s+changed: false\n\s+msg: '?(crashed at stage (\S+): (\S+);[^\n]*)"
                            % host, log, re.M)
        assert [(stage, signature) for _msg, stage, signature in failed] == [(row['STAGE'], row['SIGNATURE'])], (host, failed)
        assert re.search(r'^.*\| %s: pre-flight ok: ' % host, log, re.M), host
        assert re.search(r'^.*\| %s: SM120 patches present, SGLang 0\.5\.9: ' % host, log, re.M), host
    assert_readme_says_what_the_demo_prints('crash', lines)
    assert_nothing_left_behind(NODES['crash'])


def test_demo_tune_rolls_back_without_failure_blocks():
    try:
        rc, lines = run_demo('tune', keep=True)
        out = '\n'.join(lines)
        assert rc == 0, out[-6000:]
        # the kept host: the demo says how to reach it and how to stop it, and both commands work as printed
        reach, stop = (re.search(r'^(?:== The hosts stay up \(LLMOPS_DEMO_KEEP=1\)\. Reach one|   Stop them): (.+)$', line)
                       for line in lines[-3:-1])
        assert reach and stop, lines[-3:]
        prefix = '' if FLEET_DIR == '/var/tmp/llmops-fleet' else 'LLMOPS_FLEET_DIR=%s ' % FLEET_DIR
        assert reach.group(1) == '%sbash tests/infra/fleet.sh ssh demo7 systemctl status sglang' % prefix
        assert stop.group(1) == '%sbash tests/infra/fleet.sh down demo7' % prefix
        status = subprocess.run(['bash', '-c', reach.group(1)], cwd=str(REPO), capture_output=True, text=True, timeout=120,
                                check=False)
        assert status.returncode == 0 and 'active (running)' in status.stdout, status.stdout + status.stderr
        assert subprocess.run(['bash', '-c', stop.group(1)], cwd=str(REPO), timeout=300, check=False).returncode == 0
        assert_nothing_left_behind(NODES['tune'])
        lines = lines[:-3] + lines[-1:]  # the budget is the demo's own lines, not the kept hosts' two
        assert len(lines) <= 60, '%d lines, budget 60:\n%s' % (len(lines), out)
        table = dict((m.group(1), m.group(2)) for m in re.finditer(r'^(baseline\*?|sm120-fusion|nccl-tree)\s+(\S+)', out, re.M))
        assert table == {'baseline*': 'first', 'sm120-fusion': 'regressed', 'nccl-tree': 'crashed'}, out
        assert re.search(r'^demo7 runs baseline$', out, re.M), out
        assert_no_failure_block(lines)
        assert_the_run_is_logged(lines, 'tune')
        assert_readme_says_what_the_demo_prints('tune', lines)
    finally:
        subprocess.run(['bash', str(REPO / 'tests' / 'infra' / 'fleet.sh'), 'down'] + NODES['tune'], capture_output=True,
                       timeout=300, check=False)


# The guard mode's screen (measured: 55 lines with the set-up, 2026-12-02)
GUARD_BUDGET = 60
# a guard event's line: "<host>: <time> <kind> -> <action>: <reason>; <outcome>"
EVENT = re.compile(r'^demo8: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (hung|crash_loop|gpu_fault) -> (restart|stop): (.*)$')


def test_demo_guard_one_line_per_event():
    rc, lines = run_demo('guard')
    out = '\n'.join(lines)
    assert rc == 0, out[-6000:]
    assert len(lines) <= GUARD_BUDGET, '%d lines, budget %d:\n%s' % (len(lines), GUARD_BUDGET, out)
    runs = playbooks(lines)
    assert list(runs) == ['deploy', 'faults', 'deploy after the Xid', 'summary'], list(runs)
    events = [EVENT.match(line) for line in runs['faults']]
    events = [(m.group(1), m.group(2), m.group(3)) for m in events if m]
    assert [(kind, action) for kind, action, _text in events] == [('hung', 'restart'), ('crash_loop', 'stop'), ('gpu_fault', 'stop')], out
    hung, loop, fault = (text for _kind, _action, text in events)
    decided = re.search(r'^generation failed while GET /health answered 200, 2 rounds in a row; restarted in [0-9.]+s, ready after '
                        r'[0-9.]+s, a generation request answered \[decided ([0-9.]+) s after the first hung request\]$', hung)
    assert decided and float(decided.group(1)) <= 2 * 5 + 4, hung
    assert re.search(r'^systemd (restarted it \d+ times within 600s|gave up restarting it).*held stopped; no process of the server '
                     r'holds its GPUs$', loop), loop
    assert fault.startswith('GPU 0000:9b:00: Xid 119 (GSP RPC Timeout; NVIDIA: RESET_GPU) x5; stopped in '), fault
    stop = [line for line in runs['faults'] if line.startswith('demo8: stop while loading')]
    ended = re.search(r'ended in ([0-9.]+) s, TimeoutStopUSec=8s then SIGKILL to the whole cgroup; no process holds the GPU$', stop[0])
    assert len(stop) == 1 and ended and 7.5 <= float(ended.group(1)) <= 10, stop
    # the deploy after the Xid: refused by the pre-flight with the GPU and the Xid (its table cell ends there; the summary
    # says NVIDIA's meaning), nothing started
    refused = ' '.join(runs['deploy after the Xid'])
    assert re.search(r'pre-flight for sglang.service failed \(gpu_health\), nothing was started: gpu_health: GPU 4 '
                     r'\(0000:9b:00, GPU-[0-9a-f-]+\) has Xid 119', refused), refused
    assert runs['deploy after the Xid'][-1].endswith('exit code 2'), runs['deploy after the Xid'][-1]
    summary = [line for line in runs['summary'] if line.startswith('demo8: guard summary: ')]
    refusal = [line for line in runs['summary'] if line.startswith('demo8: the next start is refused: ')]
    assert len(refusal) == 1 and 'Xid 119 (GSP RPC Timeout; NVIDIA: RESET_GPU)' in refusal[0] \
        and 'needs a reset or the host a reboot' in refusal[0], refusal
    assert len(summary) == 1 and re.search(r'events hung 1, crash_loop 1, gpu_fault 1; holding it stopped; actions restart, stop, '
                                           r'stop; sglang.service stopped, held: gpu_fault: GPU 0000:9b:00: Xid 119 ',
                                           summary[0]), summary
    assert_no_failure_block(lines)
    assert_the_run_is_logged(lines, 'guard')
    assert_readme_says_what_the_demo_prints('guard', lines)
    assert_nothing_left_behind(NODES['guard'])
