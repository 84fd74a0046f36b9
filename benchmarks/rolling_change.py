# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Benchmark: a change rolled across the SGLang workers behind the real SGLang model gateway, under load.

The demo fleet (demo/fleet.yml): one systemd-nspawn host runs the real gateway (smg 1.13.0 from PyPI, role
llmops.sglang.sglang_gateway), three run SGLang workers (role llmops.sglang.sglang_service; the server process is the
SGLang stand-in, which counts its requests in flight and drains on SIGTERM as SGLang does). A bounded load generator
(fixed concurrency, streamed /generate requests through the gateway, run inside the test network's hub namespace:
traffic reaches only these test hosts, and it stops by itself at --max-load-seconds) runs while one change (the
environment variable SGLANG_DEMO_REVISION, so every worker restarts) is applied in three ways, in one run:

  (a) drain   ansible-playbook llmops.sglang.roll: canary first, out of rotation, drained, changed, back and proven
  (b) serial  ansible-playbook llmops.sglang.deploy -e sglang_deploy_serial=1: today's rolling restart, no drain
  (c) all     ansible-playbook llmops.sglang.deploy: every worker at once

Reported per way: requests, failed requests (HTTP errors, connection errors, streams cut before their end), TTFT p50 and
p99 during the change against the steady state measured right before it, the change's wall time, and for (a) the sum of
the workers' own changes (each worker's sglang_service run: install, configure, restart, wait, smoke) and the roll's
time over that sum. Targets for (a): 0 failed, p99 TTFT <= 1.5x steady, roll time <= 1.1x the sum of the changes.

Run as root from the repository (one instance at a time):

    python3.12 benchmarks/rolling_change.py [--prefix roll] [--modes drain,serial,all] [--concurrency 6] [--markdown]

Subcommands used by demo/run.sh fleet (and by this script itself):

    rolling_change.py load --url URL --out FILE --stop-file FILE [--concurrency N] [--max-tokens N] [--max-load-seconds S]
    rolling_change.py summary FILE [--since EPOCH] [--until EPOCH]     # "failed requests: F of N" and the TTFTs
    rolling_change.py ready --url URL --workers N [--timeout S]          # wait until the gateway has N healthy workers
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet_deploy import BenchError, killpg, one_at_a_time, run  # noqa: E402  pylint: disable=wrong-import-position

REPO = Path(__file__).resolve().parents[1]
FLEET = REPO / "tests" / "infra" / "fleet.sh"
CONTROLLER_VENV = REPO / "tests" / "infra" / "controller-venv.sh"
REQUIREMENTS = REPO / "tests" / "requirements-demo.txt"
HUB = "llmops-hub"
SGLANG_VERSION = "0.5.9"
# The gateway and the dependencies pip resolves for it, as wheels for the hosts' Python 3.11 (no route to PyPI there).
GATEWAY_WHEELS = ("smg==1.13.0", "setproctitle==1.3.8", "grpcio==1.85.3", "grpcio-health-checking==1.85.1",
                  "protobuf==7.36.2", "pyyaml==6.0.4", "typing_extensions==4.16.0")
GATEWAY_WHEEL_ARGS = ("--only-binary=:all:", "--platform", "manylinux2014_x86_64", "--python-version", "3.11")
MODES = {
    "drain": ("(a) drain-aware roll", ["llmops.sglang.roll"]),
    "serial": ("(b) serial: 1, no drain", ["llmops.sglang.deploy", "-e", "sglang_deploy_serial=1"]),
    "all": ("(c) all at once", ["llmops.sglang.deploy"]),
}


def log(msg: str) -> None:
    print(f"[rolling_change {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the load generator (inside the hub netns)


def cmd_load(args: argparse.Namespace) -> int:
    """Fixed concurrency until the stop file appears (or --max-load-seconds): one JSON line per finished request, each
    sent with the collection's own streaming client (module_utils/bench/_client.py; PYTHONPATH: the directory above
    ansible_collections). A request fails on an HTTP error, a connection error, or a stream that ends without its
    final event (``meta_info.finish_reason``: cut short)."""
    try:
        from ansible_collections.llmops.sglang.plugins.module_utils.bench._client import StreamingClient, prompts
    except ImportError as exc:
        print("rolling_change.py load: %s; set PYTHONPATH to the directory above ansible_collections/llmops/sglang" % exc,
              file=sys.stderr)
        return 2
    client = StreamingClient(args.url, api_key=args.api_key, request_timeout=args.request_timeout, clock=time.monotonic)
    stop_file = Path(args.stop_file)
    deadline = time.monotonic() + args.max_load_seconds
    lock = threading.Lock()
    out = open(args.out, "a", encoding="utf-8")  # noqa: SIM115 - closed below, after every worker thread ended

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        while time.monotonic() < deadline and not stop_file.exists():
            began, t0 = time.time(), time.monotonic()
            res = client.one(prompts(1, 16, rng.randrange(10**9))[0], args.max_tokens)
            ok = res.ok and res.finished
            error = res.error or ("" if ok else "stream cut after %d token(s) (no finish_reason)" % res.output_tokens)
            rec = {"start": began, "ok": ok, "ttft": res.ttft, "total": round(res.end - t0, 4), "tokens": res.output_tokens,
                   "error": error}
            with lock:
                out.write(json.dumps(rec) + "\n")
                out.flush()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(args.concurrency)]
    for thread in threads:
        thread.start()
        time.sleep(0.05)
    for thread in threads:
        thread.join(args.max_load_seconds + args.request_timeout + 5)
    out.close()
    return 0


# --------------------------------------------------------------------------- summary of what the generator recorded


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    low = int(k)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (k - low)


@dataclass
class Window:
    requests: int = 0
    failed: int = 0
    ttft_p50: float | None = None
    ttft_p99: float | None = None
    errors: dict = field(default_factory=dict)


def window(records: list[dict], since: float = 0.0, until: float = float("inf")) -> Window:
    """The requests that started in [since, until)."""
    chosen = [r for r in records if since <= r["start"] < until]
    ttfts = [r["ttft"] for r in chosen if r["ok"] and r["ttft"] is not None]
    out = Window(len(chosen), sum(1 for r in chosen if not r["ok"]), percentile(ttfts, 0.5), percentile(ttfts, 0.99))
    for rec in chosen:
        if not rec["ok"]:
            kind = "cut stream" if rec["error"].startswith("stream cut") else rec["error"].split(":", 1)[0]
            out.errors[kind] = out.errors.get(kind, 0) + 1
    return out


def read_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def cmd_summary(args: argparse.Namespace) -> int:
    win = window(read_records(Path(args.file)), args.since, args.until)
    print("failed requests: %d of %d (TTFT p50 %s ms, p99 %s ms%s)" % (
        win.failed, win.requests, ms(win.ttft_p50), ms(win.ttft_p99),
        "; " + ", ".join("%s %d" % kv for kv in sorted(win.errors.items())) if win.errors else ""))
    return 0 if win.failed == 0 else 1


def gateway_ready(url: str) -> tuple[int, int]:
    """(healthy, total) workers from the gateway's public /readiness."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=5)
    try:
        conn.request("GET", "/readiness")
        data = json.loads(conn.getresponse().read() or b"{}")
        return int(data.get("healthy_workers") or 0), int(data.get("total_workers") or 0)
    except (OSError, ValueError, http.client.HTTPException):
        return 0, 0
    finally:
        conn.close()


def cmd_ready(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.timeout
    healthy = total = 0
    while time.monotonic() < deadline:
        healthy, total = gateway_ready(args.url)
        if healthy >= args.workers:
            return 0
        time.sleep(1)
    print("the gateway at %s has %d healthy of %d workers after %.0f s, not %d" % (
        args.url, healthy, total, args.timeout, args.workers), file=sys.stderr)
    return 1


# --------------------------------------------------------------------------- the benchmark


@dataclass
class ModeResult:
    mode: str
    label: str
    steady: Window = field(default_factory=Window)
    during: Window = field(default_factory=Window)
    overall: Window = field(default_factory=Window)
    roll_seconds: float = 0.0
    changes_seconds: float | None = None
    rc: int = 0
    error: str = ""


def hub(cmd: list[str]) -> list[str]:
    return ["ip", "netns", "exec", HUB] + cmd


def prepare(args: argparse.Namespace, work: Path, env: dict[str, str]) -> dict[str, str]:
    """Controller venv, collection path, wheelhouses, rootfs, hosts, inventories; returns the environment for ansible."""
    state = Path(env["LLMOPS_FLEET_DIR"])
    venv = run(["bash", str(CONTROLLER_VENV), str(state / "controller-venv"), str(REQUIREMENTS)],
               timeout=900, env=env).out.strip().splitlines()[-1]
    coll = work / "collections" / "ansible_collections" / "llmops"
    coll.mkdir(parents=True, exist_ok=True)
    link = coll / "sglang"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(REPO)
    run(["bash", str(FLEET), "wheelhouse", str(work / "wheelhouse"), f"sglang=={SGLANG_VERSION}"], timeout=300, env=env)
    run(["bash", str(FLEET), "wheelhouse", str(work / "gateway-wheelhouse"), *GATEWAY_WHEEL_ARGS, *GATEWAY_WHEELS],
        timeout=600, env=env)
    run(["bash", str(FLEET), "rootfs"], timeout=900, env=env)
    names = [f"{args.prefix}{i}" for i in range(4)]
    run(["bash", str(FLEET), "down", *names], timeout=120, env=env, check=False)
    run(["bash", str(FLEET), "up", *names], timeout=300, env=env)
    run(["bash", str(FLEET), "inventory", "--group", "sglang_gateway", str(work / "gateway.yml"), names[0]], timeout=30, env=env)
    run(["bash", str(FLEET), "inventory", "--group", "sglang", str(work / "workers.yml"), *names[1:]], timeout=30, env=env)
    aenv = dict(env)
    aenv.update({
        "PATH": f"{venv}/bin:{env['PATH']}",
        "ANSIBLE_COLLECTIONS_PATH": str(work / "collections"),
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_SSH_RETRIES": "3",
        "ANSIBLE_FORKS": "10",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_LOCAL_TEMP": str(work / "tmp"),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(state / "cp"),
        "LLMOPS_DEMO_WHEELHOUSE": str(work / "wheelhouse"),
        "LLMOPS_DEMO_GATEWAY_WHEELHOUSE": str(work / "gateway-wheelhouse"),
    })
    aenv.pop("ANSIBLE_CONFIG", None)
    return aenv


def playbook(work: Path, *words: str) -> list[str]:
    return ["ansible-playbook", *words[:1], "-i", str(work / "gateway.yml"), "-i", str(work / "workers.yml"),
            "-i", str(REPO / "demo" / "fleet.yml"), *words[1:]]


def gateway_url(args: argparse.Namespace, env: dict[str, str]) -> str:
    addr = (Path(env["LLMOPS_FLEET_DIR"]) / "nodes" / f"{args.prefix}0.addr").read_text().strip()
    return f"http://{addr}:30080"


def wait_ready(url: str, workers: int, timeout: float, env: dict[str, str]) -> None:
    run(hub([sys.executable, str(Path(__file__).resolve()), "ready", "--url", url, "--workers", str(workers),
             "--timeout", str(timeout)]), timeout=timeout + 30, env=env)


def changes_sum(rows_file: Path) -> float | None:
    try:
        rows = json.loads(rows_file.read_text())
    except (OSError, ValueError):
        return None
    values = [r.get("change_seconds") for r in rows if r.get("change_seconds") is not None]
    return round(sum(values), 1) if values else None


def bench_mode(mode: str, revision: int, args: argparse.Namespace, work: Path, aenv: dict[str, str]) -> ModeResult:
    label, words = MODES[mode]
    res = ModeResult(mode, label)
    url = gateway_url(args, aenv)
    wait_ready(url, 3, 300, aenv)
    records = work / f"load-{mode}.jsonl"
    stop = work / f"load-{mode}.stop"
    for path in (records, stop):
        path.unlink(missing_ok=True)
    load = subprocess.Popen(hub([sys.executable, str(Path(__file__).resolve()), "load", "--url", url, "--out", str(records),
                                 "--stop-file", str(stop), "--concurrency", str(args.concurrency),
                                 "--max-tokens", str(args.max_tokens), "--max-load-seconds", str(args.max_load_seconds)]),
                            env=dict(aenv, PYTHONPATH=aenv["ANSIBLE_COLLECTIONS_PATH"]), start_new_session=True)
    try:
        time.sleep(args.steady_seconds)
        t0 = time.time()
        log(f"{label}: rolling revision {revision} under load")
        rows = work / f"rows-{mode}.json"
        rows.unlink(missing_ok=True)
        # the controller runs niced in every way alike: here it shares two cores with the serving path it measures
        step = run(["nice", "-n", "10"] + playbook(work, words[0], *words[1:], "-e", f"llmops_demo_revision={revision}",
                                                   "-e", f"sglang_report_path={rows}"),
                   timeout=args.run_timeout, env=aenv, log_file=work / f"{mode}.log", check=False)
        t1 = time.time()
        res.rc, res.roll_seconds = step.rc, round(t1 - t0, 1)
        res.changes_seconds = changes_sum(rows) if mode == "drain" else None
        time.sleep(args.tail_seconds)
    finally:
        stop.touch()
        try:
            load.wait(args.max_tokens / 10 + 60)
        except subprocess.TimeoutExpired:
            killpg(load.pid, signal.SIGTERM)
            load.wait(10)
    recs = read_records(records)
    res.steady, res.during, res.overall = window(recs, 0, t0), window(recs, t0, t1), window(recs)
    if res.rc != 0:
        res.error = f"the playbook exited {res.rc} (see {work / (mode + '.log')})"
    return res


def ms(value: float | None) -> str:
    return "-" if value is None else "%.0f" % (value * 1000)


def fmt_table(results: list[ModeResult], markdown: bool) -> str:
    head = ["way", "requests", "failed", "TTFT p50 steady/during ms", "TTFT p99 steady/during ms", "p99 ratio",
            "change time s", "sum of workers' changes s", "time / sum"]
    rows = []
    for r in results:
        ratio = (r.during.ttft_p99 / r.steady.ttft_p99) if r.during.ttft_p99 and r.steady.ttft_p99 else None
        over = (r.roll_seconds / r.changes_seconds) if r.changes_seconds else None
        rows.append([r.label, str(r.overall.requests), "%d%s" % (r.overall.failed, " (%s)" % ", ".join(
            "%s %d" % kv for kv in sorted(r.overall.errors.items())) if r.overall.errors else ""),
            "%s / %s" % (ms(r.steady.ttft_p50), ms(r.during.ttft_p50)), "%s / %s" % (ms(r.steady.ttft_p99), ms(r.during.ttft_p99)),
            "-" if ratio is None else "%.2fx" % ratio, "%.1f" % r.roll_seconds,
            "-" if r.changes_seconds is None else "%.1f" % r.changes_seconds, "-" if over is None else "%.2fx" % over])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(x[i]) for x in [head] + rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head] + rows)


def verdicts(results: list[ModeResult]) -> list[str]:
    out = []
    for r in results:
        if r.mode != "drain":
            continue
        ratio = (r.during.ttft_p99 / r.steady.ttft_p99) if r.during.ttft_p99 and r.steady.ttft_p99 else None
        over = (r.roll_seconds / r.changes_seconds) if r.changes_seconds else None
        out.append("target (a) failed requests = 0: %s (%d)" % ("met" if r.overall.failed == 0 else "NOT met", r.overall.failed))
        out.append("target (a) p99 TTFT <= 1.5x steady: %s (%s)" % (
            "met" if ratio is not None and ratio <= 1.5 else "NOT met", "-" if ratio is None else "%.2fx" % ratio))
        out.append("target (a) roll time <= 1.1x the sum of the workers' changes: %s (%s)" % (
            "met" if over is not None and over <= 1.1 else "NOT met", "-" if over is None else "%.2fx" % over))
    return out


def cmd_bench(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print("rolling_change.py boots systemd-nspawn hosts and network namespaces: run it as root", file=sys.stderr)
        return 2
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        print("--modes takes a comma-separated list of %s" % ", ".join(MODES), file=sys.stderr)
        return 2
    work = Path(args.work_dir)
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    lock = one_at_a_time(work, "rolling_change.py")  # held for the whole run
    if lock is None:
        return 2
    env = dict(os.environ)
    env.setdefault("LLMOPS_FLEET_DIR", "/var/tmp/llmops-bench-roll/fleet")
    names = [f"{args.prefix}{i}" for i in range(4)]

    def on_term(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    results: list[ModeResult] = []
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    load0 = os.getloadavg()
    try:
        aenv = prepare(args, work, env)
        log("deploying the workers and the gateway")
        run(playbook(work, "llmops.sglang.deploy"), timeout=args.run_timeout, env=aenv, log_file=work / "deploy.log")
        run(playbook(work, "llmops.sglang.gateway"), timeout=args.run_timeout, env=aenv, log_file=work / "gateway.log")
        for number, mode in enumerate(modes, 2):
            results.append(bench_mode(mode, number, args, work, aenv))
    except BenchError as exc:
        log(f"FAILED: {exc}")
        return 1
    finally:
        if not args.keep:
            run(["bash", str(FLEET), "down", *names], timeout=120, env=env, check=False)
    print(f"\nA change rolled across 3 SGLang workers (stand-in) behind the real gateway (smg 1.13.0) under load: "
          f"{args.concurrency} streams of {args.max_tokens} tokens at a time through the gateway; started {started}, "
          f"{os.cpu_count()} CPUs, load average {load0[0]:.1f} before, {os.getloadavg()[0]:.1f} after\n")
    print(fmt_table(results, markdown=False))
    if args.markdown:
        print()
        print(fmt_table(results, markdown=True))
    print()
    for line in verdicts(results):
        print(line)
    for r in results:
        if r.error:
            print(f"{r.label}: {r.error}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = ap.add_subparsers(dest="command")
    bench = sub.add_parser("bench", help="the comparison (default)")
    for parser in (ap, bench):
        parser.add_argument("--prefix", default="roll", help="host name prefix: <prefix>0 the gateway, 1-3 the workers")
        parser.add_argument("--modes", default="drain,serial,all", help="ways to apply the change, in this order")
        parser.add_argument("--concurrency", type=int, default=6, help="streams in flight through the gateway")
        parser.add_argument("--max-tokens", type=int, default=64, help="tokens per request (40 token/s per stream)")
        parser.add_argument("--steady-seconds", type=float, default=20, help="load before each change (the steady state)")
        parser.add_argument("--tail-seconds", type=float, default=10, help="load after each change")
        parser.add_argument("--max-load-seconds", type=float, default=1800, help="the load generator's own bound")
        parser.add_argument("--run-timeout", type=float, default=1200, help="bound of one ansible-playbook run")
        parser.add_argument("--work-dir", default="/var/tmp/llmops-bench-roll", help="inventories, logs, records")
        parser.add_argument("--keep", action="store_true", help="leave the hosts up")
        parser.add_argument("--markdown", action="store_true", help="print the table as markdown too")
        parser.add_argument("--json", help="write the raw results to this file")
    load = sub.add_parser("load", help="the load generator")
    load.add_argument("--url", required=True)
    load.add_argument("--out", required=True)
    load.add_argument("--stop-file", required=True)
    load.add_argument("--concurrency", type=int, default=6)
    load.add_argument("--max-tokens", type=int, default=64)
    load.add_argument("--max-load-seconds", type=float, default=1800)
    load.add_argument("--request-timeout", type=float, default=120)
    load.add_argument("--api-key")
    summary = sub.add_parser("summary", help="one line over a load file")
    summary.add_argument("file")
    summary.add_argument("--since", type=float, default=0.0)
    summary.add_argument("--until", type=float, default=float("inf"))
    ready = sub.add_parser("ready", help="wait until the gateway has N healthy workers")
    ready.add_argument("--url", required=True)
    ready.add_argument("--workers", type=int, required=True)
    ready.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    handler = {"load": cmd_load, "summary": cmd_summary, "ready": cmd_ready}.get(args.command, cmd_bench)
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
