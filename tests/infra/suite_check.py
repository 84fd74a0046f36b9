# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the test suite left on the machine: tests/run-all.sh's last step.

  suite_check.py snapshot FILE                  before the suite: listeners, network namespaces, mounts, test hosts
  suite_check.py check FILE --cgroups DIR       after it: what is there now that was not, and who left it
  suite_check.py kill FILE --cgroups DIR        stop what is still in the steps' cgroups (the run's exit trap)

tests/run-all.sh runs every step in a cgroup of its own under DIR (cgroup v2), so a process a step started is found
there however it was started (daemons, re-parented children): ``check`` names each one with its step, names new
listeners (with their process and its step), network namespaces, mounts and test hosts, kills the processes it names,
and exits 1 when anything was left. Standard library only (runs on the CI's controller Python).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import signal
import sys
import time

SOCKET_STATES_LISTEN = '0A'


def listeners():
    """{'addr:port': inode} of TCP sockets in LISTEN state in this network namespace."""
    found = {}
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(table, encoding='ascii') as handle:
                next(handle)
                for line in handle:
                    fields = line.split()
                    if fields[3] == SOCKET_STATES_LISTEN:
                        address, port = fields[1].split(':')
                        found['%s:%d' % (address, int(port, 16))] = fields[9]
        except OSError:
            continue
    return found


def fleet_prefix(fleet_dir):
    """The network-namespace prefix tests/infra/fleet.sh gives the test hosts of ``fleet_dir``."""
    real = os.path.realpath(fleet_dir)
    if real == '/var/tmp/llmops-fleet':
        return 'llmops-n-'
    return 'llmops-x%s-' % hashlib.sha256((real + '\n').encode()).hexdigest()[:6]


def foreign(name, fleet_dir):
    """A namespace of another fleet state directory (a demo or another run on a shared machine), not this suite's."""
    mine = fleet_prefix(fleet_dir)
    return not name.startswith(mine) and re.match(r'llmops-(n-|x[0-9a-f]{6}-)', name) is not None


def namespaces():
    try:
        return sorted(os.listdir('/run/netns'))
    except OSError:
        return []


def mounts():
    with open('/proc/self/mountinfo', encoding='utf-8', errors='replace') as handle:
        return sorted({line.split()[4] for line in handle})


def test_hosts(fleet_dir):
    return sorted(os.path.basename(path)[:-4] for path in glob.glob(os.path.join(fleet_dir, 'nodes', '*.pid')))


def snapshot(fleet_dir):
    return {'listeners': sorted(listeners()), 'namespaces': namespaces(), 'mounts': mounts(),
            'test_hosts': test_hosts(fleet_dir)}


def cmdline(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as handle:
            words = [w for w in handle.read().split(b'\0') if w]
        return b' '.join(words).decode('utf-8', 'replace')[:240]
    except OSError:
        return '(exited)'


def step_of(pid, cgroup_dir):
    """The run-all step whose cgroup holds ``pid`` (from /proc/PID/cgroup), or None."""
    rel = cgroup_dir.split('/sys/fs/cgroup/unified', 1)[-1].split('/sys/fs/cgroup', 1)[-1]
    try:
        with open('/proc/%d/cgroup' % pid, encoding='ascii') as handle:
            for line in handle:
                if line.startswith('0::') and line[3:].strip().startswith(rel + '/'):
                    return line[3:].strip()[len(rel) + 1:].split('/')[0]
    except OSError:
        pass
    return None


def step_processes(cgroup_dir):
    """{step: [pid, ...]} of every process still in a step's cgroup (and its sub-cgroups)."""
    left = {}
    if not os.path.isdir(cgroup_dir):
        return left
    for step in sorted(os.listdir(cgroup_dir)):
        top = os.path.join(cgroup_dir, step)
        if not os.path.isdir(top):
            continue
        for directory, _subdirs, files in os.walk(top):
            if 'cgroup.procs' in files:
                with open(os.path.join(directory, 'cgroup.procs'), encoding='ascii') as handle:
                    left.setdefault(step, []).extend(int(w) for w in handle.read().split())
    return {step: pids for step, pids in left.items() if pids}


def socket_owners():
    """{socket inode: pid} over every process's open files."""
    owners = {}
    for fd_dir in glob.glob('/proc/[0-9]*/fd'):
        pid = int(fd_dir.split('/')[2])
        try:
            for fd in os.listdir(fd_dir):
                target = os.readlink(os.path.join(fd_dir, fd))
                if target.startswith('socket:['):
                    owners.setdefault(target[8:-1], pid)
        except OSError:
            continue
    return owners


def in_scope(path, scope):
    """A mount the suite could have made: under one of the ``scope`` directories (every directory when none given)."""
    return not scope or any(path == s or path.startswith(s.rstrip('/') + '/') for s in scope)


# iproute2 makes /run/netns a mount of its own at the first `ip netns add` after a boot and keeps it until the next:
# set-up of the machine (as the packages `fleet.sh deps` installs), not a leftover; a namespace's own mount below it is
MACHINE_MOUNTS = ('/run/netns',)


def new_mounts(before, now, scope, fleet_dir):
    """The mount points in NOW that were not in BEFORE, that the suite could have made and that are its own."""
    return [path for path in now if path not in before and path not in MACHINE_MOUNTS and in_scope(path, scope)
            and not foreign(os.path.basename(path), fleet_dir)]


def findings(before, cgroup_dir, fleet_dir, me, scope=()):
    """Every leftover as a (kind, what, step) tuple; step is None when no step's cgroup holds it."""
    out = []
    for step, pids in step_processes(cgroup_dir).items():
        out.extend(('process', '%d: %s' % (pid, cmdline(pid)), step) for pid in pids if pid not in me)
    now = listeners()
    owners = socket_owners() if set(now) - set(before['listeners']) else {}
    for address in sorted(set(now) - set(before['listeners'])):
        pid = owners.get(now[address])
        what = '%s (%s)' % (address, ('%d: %s' % (pid, cmdline(pid))) if pid else 'no process')
        out.append(('listener', what, step_of(pid, cgroup_dir) if pid else None))
    out.extend(('network namespace', name, None) for name in namespaces()
               if name not in before['namespaces'] and not foreign(name, fleet_dir))
    out.extend(('mount', path, None) for path in new_mounts(before['mounts'], mounts(), scope, fleet_dir))
    out.extend(('test host', name, None) for name in test_hosts(fleet_dir) if name not in before['test_hosts'])
    return out


def kill_steps(cgroup_dir, me):
    for _attempt in range(50):
        pids = [pid for pids in step_processes(cgroup_dir).values() for pid in pids if pid not in me]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('action', choices=('snapshot', 'check', 'kill'))
    parser.add_argument('file')
    parser.add_argument('--cgroups', default='', help="the directory of the steps' cgroups")
    parser.add_argument('--scope', action='append', default=[],
                        help='a directory the suite works in: only mounts below these count (all when none is given)')
    parser.add_argument('--also', default='', help='a file of leftovers recorded during the run, one per line')
    parser.add_argument('--fleet-dir', default=os.environ.get('LLMOPS_FLEET_DIR', '/var/tmp/llmops-fleet'))
    args = parser.parse_args(argv)
    if args.action == 'snapshot':
        with open(args.file, 'w', encoding='utf-8') as handle:
            json.dump(snapshot(args.fleet_dir), handle)
        return 0
    me = {os.getpid(), os.getppid()}
    if args.action == 'kill':
        kill_steps(args.cgroups, me)
        return 0
    with open(args.file, encoding='utf-8') as handle:
        before = json.load(handle)
    left = findings(before, args.cgroups, args.fleet_dir, me, [os.path.realpath(s) for s in args.scope])
    if args.also and os.path.isfile(args.also):
        with open(args.also, encoding='utf-8') as handle:
            left.extend(('', line.strip(), None) for line in handle if line.strip())
    for kind, what, step in left:
        print('left running: %s%s' % (' '.join(w for w in (kind, what) if w), ', started by step %s' % step if step else ''))
    kill_steps(args.cgroups, me)
    print('leftovers: %d (processes, listeners, network namespaces, mounts and test hosts the suite started and did '
          'not stop)' % len(left))
    return 1 if left else 0


if __name__ == '__main__':
    sys.exit(main())
