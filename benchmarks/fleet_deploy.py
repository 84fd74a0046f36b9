# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: llmops.sglang.deploy on a fleet of 1, 2, 4, 8 systemd-nspawn test hosts over real SSH.

For every fleet size N this boots N fresh hosts with tests/infra/fleet.sh (names <prefix>1..<prefix>N, unique to
this benchmark; only those are ever stopped), then runs with the ansible-core 2.21 controller venv of demo/run.sh:

1. ansible-playbook llmops.sglang.deploy, first run: copy the wheelhouse, create the venv, pip install SGLang
   (--no-deps), apply the SM120 patches, read the release's server flags, write the unit and environment files,
   start the unit, wait until llmops.sglang.wait_for_sglang sees the ready line and HTTP 200. Every host's unit
   runs the SGLang stand-in replaying the SAME real recorded startup (--recording, fixed --max-seconds).
   Must end with failed=0 unreachable=0 and changed>0 on every host.
2. The same playbook again with nothing changed: must report changed=0 on every host (asserted from the
   PLAY RECAP), must not restart the unit (its systemd InvocationID is the same before and after) and must have
   passed the role's no-change check (llmops.sglang.sglang_deploy_stamp) on every host.
   The alternative, in the same run: the same no-change deploy with sglang_service_skip_unchanged=false (every
   install/configure task runs and finds nothing to do, then the readiness wait); must report changed=0 too.
3. ansible -m ansible.builtin.ping over the same hosts (--ping-rounds rounds; the median is reported).

Every ansible run reads an ansible.cfg with the README's internal_poll_interval = 0.01 (--internal-poll-interval;
'core' runs with ansible-core's default of 1 ms, as this benchmark did before 2026-12-03 22:00 UTC; 0.05 from then
until 2026-12-04 22:00 UTC).

Reported per N: wall times, parallel efficiency wall1(1)/wall1(N) (target: wall1(8) <= 1.1 x wall1(1)), second
run / ping (target < 2), the CPU seconds the controller (ansible + ssh, reaped children) and the hosts (their
cgroups' cpu.stat) used during the first run, the controller's CPU seconds per host of the first and the second run,
the load average and the other test hosts running on the machine.

With --baseline-rev REV, every size is measured for that revision too (a git worktree of it), on fresh hosts, in the
same run, alternately (baseline, this tree) so that the machine's load hits both alike; the ratios baseline / this
are printed per size.

Run as root, one instance at a time (a lock file enforces it), from the repository:

    python3.12 benchmarks/fleet_deploy.py [--sizes 1,2,4,8] [--prefix bench] [--max-seconds 8] [--markdown]

Every run is bounded by a timeout; the hosts are stopped in a finally block (also on Ctrl-C / SIGTERM).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLEET = REPO / "tests" / "infra" / "fleet.sh"
CONTROLLER_VENV = REPO / "tests" / "infra" / "controller-venv.sh"
REQUIREMENTS = REPO / "tests" / "requirements-demo.txt"
RECORDINGS = REPO / "tests" / "fixtures" / "sglang-logs"
SGLANG_VERSION = "0.5.9"
CGROUP_ROOTS = (Path("/sys/fs/cgroup/unified/llmops-fleet"), Path("/sys/fs/cgroup/llmops-fleet"))
RECAP_RE = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)\s+"
    r"failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)",
    re.MULTILINE,
)
# the wait's progress line "<host>: ready (<s>s)" (the "ready after <s>s of waiting" detail line is printed with -v only)
WAIT_RE = re.compile(r"^([A-Za-z0-9-]+): ready (?:\(([0-9.]+)s\)|after ([0-9.]+)s of waiting)", re.MULTILINE)
UNCHANGED_RE = re.compile(r"([A-Za-z0-9-]+): unchanged since ")
PING_RE = re.compile(r"^(\S+) \| SUCCESS", re.MULTILINE)

# Settings of demo/inventory.yml, except that every host replays the same recording.
VARS_INVENTORY = """\
# written by benchmarks/fleet_deploy.py: the demo's settings, every host replays the same recording
all:
  children:
    sglang:
      vars:
        nvidia_driver_enabled: false
        sglang_service_version: "{version}"
        sglang_service_pip_extra_args: [--no-deps]
        sglang_service_wheelhouse: "{wheelhouse}"
        sglang_service_sm120_patch: present
        sglang_service_args:
          model-path: zai-org/GLM-5-FP8
          tp-size: 8
          mem-fraction-static: 0.85
          trust-remote-code: true
        sglang_service_environment:
          NCCL_P2P_DISABLE: "0"
          SGLANG_ENABLE_JIT_DEEPGEMM: "0"
          CUDA_VISIBLE_DEVICES: "0,1,2,3,4,5,6,7"
        sglang_service_secret_environment:
          HF_TOKEN: hf_bench_not_a_real_token
        sglang_service_wait_timeout: {wait_timeout}
        sglang_service_stall_timeout: {stall_timeout}
        sglang_service_launch_command:
          - /usr/bin/python3
          - /opt/llmops-standin/sglang_standin.py
          - --max-seconds
          - "{max_seconds}"
          - --recording
          - /opt/llmops-standin/recordings/{recording}
"""

# Benchmark-only stdout-less callback: wall time per task (task start -> next task start), written as JSON to
# $FLEET_BENCH_TIMES at the end of the playbook. ansible-core has no profile_tasks (that is ansible.posix).
TIMER_CALLBACK = """\
from __future__ import annotations
import json, os, time
from ansible.plugins.callback import CallbackBase

class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "fleet_bench_timer"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.rows, self.cur, self.t = [], None, None

    def _close(self):
        if self.cur is not None:
            self.rows.append([self.cur, time.monotonic() - self.t])
        self.cur, self.t = None, None

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._close()
        self.cur, self.t = task.get_name(), time.monotonic()

    def v2_playbook_on_handler_task_start(self, task):
        self.v2_playbook_on_task_start(task, False)

    def v2_playbook_on_stats(self, stats):
        self._close()
        path = os.environ.get("FLEET_BENCH_TIMES")
        if path:
            with open(path, "w") as f:
                json.dump(self.rows, f)
"""


class BenchError(Exception):
    """A step of the benchmark failed; the message says which and where its output is."""


@dataclass
class Step:
    wall: float
    rc: int
    out: str
    controller_cpu: float
    log: Path


@dataclass
class SizeResult:
    n: int
    tree: str = "this"
    first: float = 0.0
    second: float = 0.0
    second_full: float = 0.0
    pings: list[float] = field(default_factory=list)
    first_changed: dict[str, int] = field(default_factory=dict)
    second_changed: dict[str, int] = field(default_factory=dict)
    wait_max: float = 0.0
    controller_cpu: float = 0.0
    hosts_cpu: float = 0.0
    up_wall: float = 0.0
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    other_hosts: int = 0
    first_tasks: list[list] = field(default_factory=list)
    second_tasks: list[list] = field(default_factory=list)
    error: str = ""

    second_cpu: float = 0.0

    @property
    def ping(self) -> float:
        return statistics.median(self.pings) if self.pings else 0.0

    @property
    def cpu_per_host(self) -> float:
        return self.controller_cpu / self.n

    @property
    def second_cpu_per_host(self) -> float:
        return self.second_cpu / self.n


def one_at_a_time(work: Path, name: str):
    """The benchmark's lock on ``work`` (kept open for the whole run), or None (said why) when another run holds it."""
    lock = open(work / ".lock", "w")  # noqa: SIM115 - the caller keeps it for the whole run
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"another {name} holds {work / '.lock'}: one benchmark at a time", file=sys.stderr)
        lock.close()
        return None
    return lock


def log(msg: str) -> None:
    print(f"[fleet_deploy {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def run(cmd: list[str], *, timeout: float, env: dict[str, str] | None = None, log_file: Path | None = None,
        check: bool = True) -> Step:
    """Run CMD in its own process group with a timeout; kill that group (only it) when the timeout is hit."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                            text=True, errors="replace")
    try:
        out, _stderr = proc.communicate(timeout=timeout)
    except BaseException as exc:
        if not isinstance(exc, subprocess.TimeoutExpired):
            killpg(proc.pid, signal.SIGTERM)  # Ctrl-C / SIGTERM: stop this run (its own group) too
            raise
        killpg(proc.pid, signal.SIGTERM)
        try:
            out, _stderr = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            killpg(proc.pid, signal.SIGKILL)
            out, _stderr = proc.communicate()
        if log_file:
            log_file.write_text(out)
        raise BenchError(f"{' '.join(cmd[:3])} ... did not finish within {timeout:.0f} s and was stopped; "
                         f"output: {log_file or out[-3000:]}") from None
    wall = time.monotonic() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    if log_file:
        log_file.write_text(out)
    if check and proc.returncode != 0:
        raise BenchError(f"{' '.join(cmd[:3])} ... exited {proc.returncode} after {wall:.1f} s; "
                         f"last lines:\n{out[-3000:]}\n(full output: {log_file})")
    return Step(wall, proc.returncode, out, cpu, log_file or Path("/dev/null"))


def recap(out: str, hosts: list[str], what: str) -> dict[str, dict[str, int]]:
    """Per-host PLAY RECAP counters; every host must be there, none failed or unreachable."""
    rows = {m["host"]: {k: int(v) for k, v in m.groupdict().items() if k != "host"} for m in RECAP_RE.finditer(out)}
    missing = [h for h in hosts if h not in rows]
    if missing:
        raise BenchError(f"{what}: no PLAY RECAP line for {', '.join(missing)}")
    bad = {h: r for h, r in rows.items() if h in hosts and (r["failed"] or r["unreachable"])}
    if bad:
        raise BenchError(f"{what}: failed/unreachable hosts in the recap: {json.dumps(bad)}")
    return {h: rows[h] for h in hosts}


def task_times(path: Path) -> list[list]:
    """[[task name, seconds, count], ...] summed over tasks of the same name, slowest first."""
    try:
        rows = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    agg: dict[str, list] = {}
    for name, secs in rows:
        agg.setdefault(name, [name, 0.0, 0])
        agg[name][1] += secs
        agg[name][2] += 1
    return sorted(agg.values(), key=lambda r: -r[1])


def cgroup_roots(state_dir: Path) -> tuple[Path, ...]:
    """Where fleet.sh puts the hosts' cgroups for a state directory (its CG_NAME rule: the default directory's is
    llmops-fleet, any other's llmops-fleet-<first 6 hex of the sha256 of its real path>)."""
    real = os.path.realpath(state_dir)
    name = "llmops-fleet" if real == "/var/tmp/llmops-fleet" else "llmops-fleet-" + hashlib.sha256(
        (real + "\n").encode()).hexdigest()[:6]
    return (Path("/sys/fs/cgroup/unified") / name, Path("/sys/fs/cgroup") / name)


def host_cpu(names: list[str], roots: tuple[Path, ...] = CGROUP_ROOTS) -> float:
    """CPU seconds used so far by the hosts' cgroups (systemd, sshd, the modules, the stand-in)."""
    total = 0
    for name in names:
        for root in roots:
            stat = root / name / "cpu.stat"
            if stat.is_file():
                for line in stat.read_text().splitlines():
                    if line.startswith("usage_usec "):
                        total += int(line.split()[1])
                break
    return total / 1e6


def other_nspawn(mine: set[int]) -> int:
    """Number of systemd-nspawn processes on the machine that are not this benchmark's hosts."""
    count = 0
    for p in Path("/proc").iterdir():
        if not p.name.isdigit() or int(p.name) in mine:
            continue
        try:
            if (p / "comm").read_text().strip() == "systemd-nspawn":
                count += 1
        except OSError:
            continue
    return count


def node_pids(state: Path, names: list[str]) -> set[int]:
    pids = set()
    for name in names:
        try:
            pids.add(int((state / "nodes" / f"{name}.pid").read_text().strip()))
        except (OSError, ValueError):
            pass
    return pids


def invocation_ids(names: list[str], env: dict[str, str]) -> dict[str, str]:
    ids = {}
    for name in names:
        step = run(["bash", str(FLEET), "ssh", name, "systemctl", "show", "sglang.service", "-p", "InvocationID",
                    "--value"], timeout=30, env=env)
        ids[name] = step.out.strip()
    return ids


def collection_path(tree: Path, where: Path) -> Path:
    """WHERE/ansible_collections/llmops/sglang -> TREE; returns WHERE (for ANSIBLE_COLLECTIONS_PATH)."""
    coll = where / "ansible_collections" / "llmops"
    coll.mkdir(parents=True, exist_ok=True)
    link = coll / "sglang"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(tree)
    return where


def baseline_tree(rev: str, work: Path) -> Path:
    """A git worktree of REV under WORK (removed and made again on every run)."""
    tree = work / "baseline-tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False, capture_output=True, timeout=120)
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev], check=True, capture_output=True, timeout=120)
    return tree


def prepare(args: argparse.Namespace, work: Path, env: dict[str, str]) -> dict[str, str]:
    """Controller venv, collection path, wheelhouse, rootfs; returns the environment for ansible."""
    venv = run(["bash", str(CONTROLLER_VENV), str(Path(env["LLMOPS_FLEET_DIR"]) / "venv-2.21"), str(REQUIREMENTS)],
               timeout=600, env=env).out.strip().splitlines()[-1]
    collection_path(REPO, work / "collections")
    # A wheelhouse holding only the release the hosts install (the role copies the whole directory).
    wheelhouse = work / "wheelhouse"
    wheelhouse.mkdir(exist_ok=True)
    wheel = f"sglang-{SGLANG_VERSION}-py3-none-any.whl"
    if not (wheelhouse / wheel).is_file():
        shared = Path(env["LLMOPS_FLEET_DIR"]) / "wheelhouse" / wheel
        if shared.is_file():
            shutil.copy2(shared, wheelhouse / wheel)
        else:
            run(["bash", str(FLEET), "wheelhouse", str(wheelhouse), f"sglang=={SGLANG_VERSION}"], timeout=300, env=env)
    run(["bash", str(FLEET), "rootfs"], timeout=600, env=env)
    (work / "vars.yml").write_text(VARS_INVENTORY.format(
        version=SGLANG_VERSION, wheelhouse=wheelhouse, wait_timeout=args.wait_timeout,
        stall_timeout=args.wait_timeout, max_seconds=args.max_seconds, recording=args.recording))
    cb_dir = work / "callback_plugins"
    cb_dir.mkdir(exist_ok=True)
    (cb_dir / "fleet_bench_timer.py").write_text(TIMER_CALLBACK)
    aenv = dict(env)
    aenv.update({
        "PATH": f"{venv}/bin:{env['PATH']}",
        "ANSIBLE_COLLECTIONS_PATH": str(work / "collections"),
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_SSH_RETRIES": "3",
        "ANSIBLE_FORKS": str(args.forks),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
        "ANSIBLE_CALLBACK_PLUGINS": str(cb_dir),
        "ANSIBLE_CALLBACKS_ENABLED": "fleet_bench_timer",
    })
    aenv.pop("ANSIBLE_CONFIG", None)
    if args.internal_poll_interval is not None:
        # the README's ansible.cfg key (no environment variable exists for it); the same file for every tree measured
        cfg = work / "ansible.cfg"
        cfg.write_text(f"# written by benchmarks/fleet_deploy.py\n[defaults]\ninternal_poll_interval = {args.internal_poll_interval:g}\n")
        aenv["ANSIBLE_CONFIG"] = str(cfg)
    return aenv


def unchanged_run(playbook: list[str], label: str, log_name: str, names: list[str], args: argparse.Namespace,
                  aenv: dict[str, str], logs: Path):
    """Run the deploy again with nothing changed; returns (the run, its PLAY RECAP rows).

    Raises BenchError unless every host reports changed=0.
    """
    done = run(playbook, timeout=args.run_timeout, env=aenv | {"FLEET_BENCH_TIMES": str(logs / f"{log_name}.json")},
               log_file=logs / f"{log_name}.log")
    rows = recap(done.out, names, label)
    changed = {h: r["changed"] for h, r in rows.items() if r["changed"]}
    if changed:
        raise BenchError(f"{label}: expected changed=0 on every host, got {changed} (see {done.log})")
    return done, rows


def bench_size(n: int, args: argparse.Namespace, work: Path, env: dict[str, str], aenv: dict[str, str],
               tree: str = "this") -> SizeResult:
    names = [f"{args.prefix}{i}" for i in range(1, n + 1)]
    res = SizeResult(n, tree)
    state = Path(env["LLMOPS_FLEET_DIR"])
    logs = work / "logs" / re.sub(r"[^A-Za-z0-9_.-]", "_", tree)
    logs.mkdir(parents=True, exist_ok=True)
    try:
        res.load_before = os.getloadavg()
        log(f"N={n}: booting {' '.join(names)} (load average {res.load_before[0]:.2f})")
        res.up_wall = run(["bash", str(FLEET), "up", *names], timeout=240, env=env, log_file=logs / f"up-{n}.log").wall
        res.other_hosts = other_nspawn(node_pids(state, names))
        if not args.unresolvable_hostname:
            # The test hosts' /etc/hosts lacks their own name and their nameserver (copied from the machine) is
            # unreachable: socket.getfqdn() in fact gathering then waits 10 s for DNS. A real host resolves its
            # own name; give the test hosts that (per boot: /etc/hosts is in the volatile overlay).
            for name in names:
                run(["bash", str(FLEET), "ssh", name, f"grep -qw {name} /etc/hosts || echo '127.0.1.1 {name}' >> /etc/hosts"],
                    timeout=30, env=env)
        inv = work / f"hosts-{n}.yml"
        run(["bash", str(FLEET), "inventory", "--group", "sglang", str(inv), *names], timeout=30, env=env)
        playbook = ["ansible-playbook", "llmops.sglang.deploy", "-i", str(inv), "-i", str(work / "vars.yml"),
                    "-f", str(args.forks)]

        log(f"N={n} ({tree}): first run (install + configure + start + wait)")
        roots = cgroup_roots(state)  # the hosts' cgroups of this fleet directory (fleet.sh names them after it)
        cpu0 = host_cpu(names, roots)
        first = run(playbook, timeout=args.run_timeout, env=aenv | {"FLEET_BENCH_TIMES": str(logs / f"first-{n}.json")},
                    log_file=logs / f"first-{n}.log")
        res.first_tasks = task_times(logs / f"first-{n}.json")
        res.hosts_cpu = host_cpu(names, roots) - cpu0
        res.first, res.controller_cpu = first.wall, first.controller_cpu
        rows = recap(first.out, names, f"N={n} first run")
        res.first_changed = {h: r["changed"] for h, r in rows.items()}
        unchanged = [h for h, c in res.first_changed.items() if c == 0]
        if unchanged:
            raise BenchError(f"N={n} first run: changed=0 on fresh host(s) {unchanged}: nothing was installed?")
        waits = {h: float(a or b) for h, a, b in WAIT_RE.findall(first.out)}
        if sorted(waits) != sorted(names):
            raise BenchError(f"N={n} first run: readiness summary missing for {sorted(set(names) - set(waits))}")
        res.wait_max = max(waits.values())
        log(f"N={n}: first run {res.first:.1f} s (slowest readiness wait {res.wait_max:.1f} s)")

        before = invocation_ids(names, env)
        log(f"N={n}: second run (nothing changed)")
        second, rows = unchanged_run(playbook, f"N={n} second run", f"second-{n}", names, args, aenv, logs)
        res.second_tasks = task_times(logs / f"second-{n}.json")
        res.second, res.second_cpu = second.wall, second.controller_cpu
        res.second_changed = {h: r["changed"] for h, r in rows.items()}
        after = invocation_ids(names, env)
        restarted = [h for h in names if before[h] != after[h] or not after[h]]
        if restarted:
            raise BenchError(f"N={n} second run: unit sglang.service was restarted on {restarted} "
                             f"(InvocationID {before} -> {after})")
        fast = set(UNCHANGED_RE.findall(second.out))
        if fast != set(names):
            raise BenchError(f"N={n} second run: the no-change check did not pass on {sorted(set(names) - fast)} "
                             f"(see {second.log})")
        log(f"N={n}: second run {res.second:.1f} s, changed=0 on all {n} host(s), no restart")

        # The alternative in the same run: the same no-change deploy without the check (every install and
        # configure task runs and finds nothing to do, then the readiness wait).
        full, _rows = unchanged_run(playbook + ["-e", "sglang_service_skip_unchanged=false"],
                                    f"N={n} second run without the no-change check", f"second-full-{n}", names, args, aenv, logs)
        res.second_full = full.wall
        log(f"N={n}: second run without the no-change check {res.second_full:.1f} s, changed=0")

        for i in range(args.ping_rounds):
            ping = run(["ansible", "sglang", "-i", str(inv), "-m", "ansible.builtin.ping", "-f", str(args.forks)],
                       timeout=120, env=aenv, log_file=logs / f"ping-{n}-{i}.log")
            ok = set(PING_RE.findall(ping.out))
            if ok != set(names):
                raise BenchError(f"N={n} ping: no SUCCESS from {sorted(set(names) - ok)} (see {ping.log})")
            res.pings.append(ping.wall)
        log(f"N={n}: ping rounds {', '.join(f'{p:.1f}' for p in res.pings)} s")
    except BenchError as exc:
        res.error = str(exc)
        log(f"N={n}: FAILED: {exc}")
    finally:
        res.load_after = os.getloadavg()
        run(["bash", str(FLEET), "down", *names], timeout=120, env=env, check=False)
    return res


def fmt_table(results: list[SizeResult], markdown: bool) -> str:
    head = ["tree", "hosts", "1st run s", "wall1(1)/wall1(N)", "wall1(N)/wall1(1)", "2nd run s (changed=0)", "ping s (median)",
            "2nd/ping", "2nd run s, check off", "check off/ping", "slowest wait s", "CPU s ctrl+hosts", "ctrl CPU s/host 1st",
            "ctrl CPU s/host 2nd", "load 1m before/after", "other hosts"]
    rows = []
    for r in results:
        if r.error:
            rows.append([r.tree, str(r.n), "FAILED"] + [""] * 11 + [f"{r.load_before[0]:.2f}/{r.load_after[0]:.2f}", str(r.other_hosts)])
            continue
        base = next((b for b in results if b.n == 1 and b.tree == r.tree and not b.error), None)
        eff = f"{base.first / r.first:.2f}" if base else "-"
        slow = f"{r.first / base.first:.2f}x" if base else "-"
        rows.append([
            r.tree, str(r.n), f"{r.first:.1f}", eff, slow, f"{r.second:.1f}", f"{r.ping:.1f}", f"{r.second / r.ping:.2f}x",
            f"{r.second_full:.1f}", f"{r.second_full / r.ping:.2f}x", f"{r.wait_max:.1f}", f"{r.controller_cpu:.0f}+{r.hosts_cpu:.0f}",
            f"{r.cpu_per_host:.2f}", f"{r.second_cpu_per_host:.2f}", f"{r.load_before[0]:.2f}/{r.load_after[0]:.2f}", str(r.other_hosts)])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _column in head) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)] if rows else [len(h) for h in head]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in rows]
    return "\n".join(lines)


def verdicts(results: list[SizeResult], args: argparse.Namespace) -> list[str]:
    out = []
    mine = {r.n: r for r in results if not r.error and r.tree == "this"}
    for r in results:
        this = mine.get(r.n)
        if r.tree != "this" and not r.error and this:
            out.append(f"N={r.n}: baseline {r.tree} / this: first run controller CPU {r.controller_cpu / this.controller_cpu:.2f}x "
                       f"({r.cpu_per_host:.2f} -> {this.cpu_per_host:.2f} s/host), wall {r.first / this.first:.2f}x; "
                       f"no-change run controller CPU {r.second_cpu / max(this.second_cpu, 1e-6):.2f}x, wall {r.second / this.second:.2f}x")
    for n, r in sorted(mine.items()):
        met = "MET" if r.cpu_per_host < args.cpu_target else "MISSED"
        out.append(f"first run N={n}: {r.cpu_per_host:.2f} controller CPU s per host (target < {args.cpu_target}): {met}")
    ok = mine
    big = max(ok) if ok else None
    if 1 in ok and big and big > 1:
        ratio = ok[big].first / ok[1].first
        met = "MET" if ratio <= args.scale_target else "MISSED"
        out.append(f"parallel: wall1({big}) = {ratio:.2f} x wall1(1) (target <= {args.scale_target}x): {met}")
    for n, r in sorted(ok.items()):
        ratio = r.second / r.ping
        met = "MET" if ratio < args.noop_target else "MISSED"
        out.append(f"no-change run N={n}: {ratio:.2f} x ping round (target < {args.noop_target}x): {met}")
    for r in results:
        if r.error:
            out.append(f"N={r.n}: not measured: {r.error.splitlines()[0]}")
    return out


def poll_interval(text: str) -> float | None:
    """--internal-poll-interval: seconds, or 'core' (no ansible.cfg: ansible-core's default)."""
    if text == "core":
        return None
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError("seconds between 0 and 1, or 'core'")
    return value


# README's ansible.cfg internal_poll_interval: what every ansible run of the deploy benchmarks reads by default
README_POLL_INTERVAL = 0.01


def add_poll_interval_option(parser: argparse.ArgumentParser) -> None:
    """--internal-poll-interval, one definition for the deploy benchmarks (this file and no_change_deploy.py)."""
    parser.add_argument("--internal-poll-interval", type=poll_interval, default=README_POLL_INTERVAL,
                        help=f"ansible.cfg internal_poll_interval, seconds (default {README_POLL_INTERVAL:g}, the "
                             "README's ansible.cfg; 'core' for ansible-core's default, 0.001)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--sizes", default="1,2,4,8", help="fleet sizes, comma separated (default 1,2,4,8)")
    ap.add_argument("--prefix", default="bench", help="host name prefix, unique to this benchmark (default bench)")
    ap.add_argument("--recording", default="rocm-tp2-multimodal-ready-no-cuda-graph",
                    help="recorded ready startup under tests/fixtures/sglang-logs replayed on every host")
    ap.add_argument("--max-seconds", type=float, default=8, help="stand-in replay length, seconds (default 8)")
    ap.add_argument("--ping-rounds", type=int, default=3, help="ansible -m ping rounds per size (median reported)")
    ap.add_argument("--forks", type=int, default=0, help="ansible forks (default: the largest size)")
    ap.add_argument("--run-timeout", type=float, default=900, help="timeout of one ansible-playbook run, seconds")
    ap.add_argument("--wait-timeout", type=int, default=300, help="sglang_service_wait_timeout, seconds")
    ap.add_argument("--budget", type=float, default=3000,
                    help="stop starting new sizes after this many seconds in total (default 3000)")
    ap.add_argument("--unresolvable-hostname", action="store_true",
                    help="leave the hosts' own name unresolvable (fact gathering then waits 10 s for DNS)")
    ap.add_argument("--top-tasks", type=int, default=6, help="slowest tasks listed per run")
    ap.add_argument("--scale-target", type=float, default=1.1)
    ap.add_argument("--noop-target", type=float, default=2.0)
    ap.add_argument("--work-dir", default="/var/tmp/llmops-bench-fleet", help="inventories, logs, collection path")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown too")
    ap.add_argument("--baseline-rev", help="also measure this git revision (fresh hosts, same run, alternately)")
    ap.add_argument("--cpu-target", type=float, default=1.5, help="controller CPU seconds per host of a first run")
    ap.add_argument("--json", help="write the raw results to this file")
    add_poll_interval_option(ap)
    args = ap.parse_args()

    if os.geteuid() != 0:
        print("fleet_deploy.py boots systemd-nspawn hosts and network namespaces: run it as root", file=sys.stderr)
        return 2
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    if not sizes or min(sizes) < 1:
        ap.error("--sizes needs positive integers")
    if not re.fullmatch(r"[a-zA-Z][a-zA-Z0-9-]{0,20}", args.prefix) or args.prefix.startswith(("node", "mol-")):
        ap.error("--prefix must be a valid host name prefix and must not be node*/mol-* (other people's hosts)")
    if not (RECORDINGS / args.recording / "expected.json").is_file():
        ap.error(f"--recording: no {RECORDINGS / args.recording / 'expected.json'}")
    args.forks = args.forks or max(sizes)
    if args.forks < max(sizes):
        ap.error("--forks must be >= the largest size: every host of a size is deployed at once")

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    (work / "tmp").mkdir(exist_ok=True)
    lock = one_at_a_time(work, "fleet_deploy.py")  # held for the whole run
    if lock is None:
        return 2

    env = dict(os.environ)
    env.setdefault("LLMOPS_FLEET_DIR", "/var/tmp/llmops-fleet")
    all_names = [f"{args.prefix}{i}" for i in range(1, max(sizes) + 1)]

    def on_term(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    results: list[SizeResult] = []
    t_start = time.monotonic()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    try:
        # leftovers of an interrupted earlier run of THIS benchmark (own names only)
        run(["bash", str(FLEET), "down", *all_names], timeout=120, env=env, check=False)
        aenv = prepare(args, work, env)
        trees = [("this", aenv)]
        if args.baseline_rev:
            base = baseline_tree(args.baseline_rev, work)
            trees.insert(0, (args.baseline_rev, dict(aenv, ANSIBLE_COLLECTIONS_PATH=str(collection_path(base, work / "collections-baseline")))))
        for n in sizes:
            for tree, tree_env in trees:
                if time.monotonic() - t_start > args.budget:
                    results.append(SizeResult(n, tree, error=f"skipped: time budget of {args.budget:.0f} s used up"))
                    continue
                results.append(bench_size(n, args, work, env, tree_env, tree))
    except BenchError as exc:
        log(f"FAILED while preparing: {exc}")
        return 1
    finally:
        run(["bash", str(FLEET), "down", *all_names], timeout=120, env=env, check=False)
        if args.baseline_rev:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(work / "baseline-tree")], check=False,
                           capture_output=True, timeout=120)

    print(f"\nllmops.sglang.deploy on N systemd-nspawn hosts over SSH; started {started}, {os.cpu_count()} CPUs, "
          f"forks {args.forks}, stand-in replaying {args.recording} (--max-seconds {args.max_seconds:g}), "
          f"own host name {'NOT ' if args.unresolvable_hostname else ''}in /etc/hosts, "
          f"internal_poll_interval {'ansible-core default' if args.internal_poll_interval is None else args.internal_poll_interval}, "
          f"total {time.monotonic() - t_start:.0f} s\n")
    print(fmt_table(results, markdown=False))
    if args.markdown:
        print()
        print(fmt_table(results, markdown=True))
    print()
    for line in verdicts(results, args):
        print(line)
    for r in results:
        for label, rows in (("first", r.first_tasks), ("second", r.second_tasks)):
            if rows:
                total = sum(row[1] for row in rows)
                top = "; ".join(f"{name} {secs:.1f}" for name, secs, _count in rows[:args.top_tasks])
                print(f"{r.tree} N={r.n} {label} run: {sum(row[2] for row in rows)} tasks, {total:.1f} s; slowest: {top}")
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ | {"ping": r.ping} for r in results], indent=2) + "\n")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
