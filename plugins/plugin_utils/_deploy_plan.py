# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The deploy plan of the sglang_service role: ``plan(inputs, topology, facts, peers) -> Plan``.

A pure function on the controller: it never reads, writes or waits. It takes the role's inputs, where this host stands
in its deployment (``Topology``), what the role's steps observed on this host so far (``Facts``) and what they observed
on the other ranks of its multi-node deployment, and returns everything the steps act on: the files and their paths,
the server's argv and probe URL, the multi-node arguments, the refusals (before anything is touched), whether the host
is unchanged and why not, whether the server restarts and why, and what a rollback restores.

Each decision is a small table of rules, so a new reason is one more input and one more rule:

* ``REFUSALS``: (problem or None) for the inputs and the topology; any problem stops the run before it touches the host;
* ``RESTART_RULES``: this host's reasons to restart its server, from its facts; the other ranks of a multi-node
  deployment restart with it (``rank_reason``).

Every step computes the plan again from the same inputs and the facts so far (it is cheap), so a decision that needs a
fact not observed yet is simply empty until that step ran.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

from ansible_collections.llmops.sglang.plugins.module_utils.deploy._rank_compare import describe, differences
from ansible_collections.llmops.sglang.plugins.plugin_utils import _sglang_argv as argv_rules
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_facts import Facts
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import Inputs

DERIVED_FLAGS = ('nnodes', 'node-rank', 'dist-init-addr')
WILDCARDS = ('0.0.0.0', '', '::', '[::]')
LOCK_DIR = '/run/lock/llmops-sglang'


@dataclass(frozen=True)
class Topology:
    """Where this host stands: its deployment group and the play that runs it (read from the inventory on the
    controller)."""

    host: str
    peers: Tuple[str, ...] = ()             # the deployment group's hosts in inventory order ('' group: none)
    node_ranks: Dict[str, Optional[int]] = field(default_factory=dict)  # explicit sglang_service_node_rank per peer
    rank0_address: str = ''                 # sglang_service_dist_init_host, else ansible_host, of the group's first host
    play_hosts: Tuple[str, ...] = ()        # ansible_play_hosts_all
    batch: Tuple[str, ...] = ()             # ansible_play_batch: the hosts this task runs for at once (serial)
    forks: int = 5
    # the multi-node deployments among the batch's hosts, group -> hosts, for the scheduling guard
    batch_groups: Dict[str, Tuple[str, ...]] = field(default_factory=dict)
    wheelhouse_files: Tuple[str, ...] = ()  # names of the files in sglang_service_wheelhouse on the controller
    wheelhouse_checksums: Dict[str, str] = field(default_factory=dict)  # their sha1 (check mode only: compared, not copied)
    ansible_managed: str = ''
    check_mode: bool = False                # a dry run (--check): nothing is changed, nothing started
    throttle: int = 0                       # the task's effective throttle (its own, its block's or its play's; 0: none)
    # the hosts of sglang_service_deployment_group in the inventory, None when the inventory has no such group
    group_hosts: Optional[Tuple[str, ...]] = ()  # () when not read (no check)
    group_names: Tuple[str, ...] = ()       # the inventory's groups (for "did you mean")


@dataclass(frozen=True)
class Paths:
    """The files of one server (named after sglang_service_name)."""

    unit: str
    env: str
    secret_env: str
    secret_args: str
    secret_args_kept: str
    run_file: str
    stamp: str
    history: str
    benchmark: str
    lock: str

    @classmethod
    def of(cls, inputs: Inputs) -> 'Paths':
        conf, work, name = inputs.config_dir.rstrip('/'), inputs.working_directory.rstrip('/'), inputs.name
        return cls(unit='/etc/systemd/system/%s.service' % name, env='%s/%s.env' % (conf, name),
                   secret_env='%s/%s.secret.env' % (conf, name), secret_args='%s/%s.secret-args.yaml' % (conf, name),
                   secret_args_kept='%s/%s.secret-args.yaml.rollback' % (conf, name),
                   run_file='%s/%s.run.json' % (work, name), stamp='%s/%s.deployed.json' % (work, name),
                   history='%s/%s.starts.json' % (work, name), benchmark='%s/%s.benchmark.json' % (work, name),
                   lock='%s/%s.lock' % (LOCK_DIR, name))

    def config_files(self) -> Tuple[Tuple[str, bool], ...]:
        """The files a deploy writes and whether their content is secret (a rollback restores or removes them without
        logging a secret one)."""
        return ((self.unit, False), (self.env, False), (self.secret_env, True), (self.secret_args, True))


def guard_state_path(inputs: Inputs) -> str:
    """The runtime guard's state file beside the server's other records (the check playbook reads it there)."""
    return '%s/%s-guard.json' % (inputs.working_directory.rstrip('/'), inputs.name)


def guard_metrics_path(inputs: Inputs) -> str:
    """The guard's .prom file in the directory of the startup history's metrics (node_exporter reads every *.prom
    there); none without those."""
    if not inputs.history_metrics_path:
        return ''
    return os.path.join(os.path.dirname(inputs.history_metrics_path), '%s-guard.prom' % inputs.name)


def guard_files(inputs: Inputs) -> Tuple[str, ...]:
    """Where an installed runtime guard of this server leaves a trace, as llmops.sglang.sglang_guard's state=absent
    looks for it (its default layout: the guard named <name>-guard): its timer and service, settings, code directory,
    state file (and its lock) and metrics file. The no-change query reports which exist, so a deploy with the guard off removes a
    guard only where one is installed."""
    name = '%s-guard' % inputs.name
    files = ('/etc/systemd/system/%s.timer' % name, '/etc/systemd/system/%s.service' % name, '/etc/sglang/%s.json' % name,
             '/usr/local/lib/llmops-sglang/%s' % name, guard_state_path(inputs), guard_state_path(inputs) + '.lock')
    return files + ((guard_metrics_path(inputs),) if inputs.history_metrics_path else ())


@dataclass(frozen=True)
class Rollback:
    """What a rollback restores: files the deploy replaced (their backups), files it created (removed; none on a first
    deploy, which has no previous configuration), the SGLang release and SM120 patch state before it."""

    restore: Tuple[Dict[str, object], ...] = ()   # {dest, backup_file, secret}
    remove: Tuple[str, ...] = ()
    version: str = ''
    patch: str = ''

    def describe(self) -> str:
        parts = [str(r['dest']) for r in self.restore] + ['removed %s' % p for p in self.remove]
        parts += ['sglang %s' % self.version] if self.version else []
        parts += ['SM120 patches %s' % self.patch] if self.patch else []
        return ', '.join(parts) or 'no files changed'


@dataclass(frozen=True)
class Plan:
    """What this run does on this host (see the module docstring)."""

    server: str
    paths: Paths
    python: str
    server_args: Dict[str, object]
    argv: Tuple[str, ...]
    url: str
    disaggregation_mode: str  # SGLang's --disaggregation-mode: 'null', or prefill / decode (requests need bootstrap information)
    node_rank: int
    deployment: Optional[str]
    nnodes: int
    multinode_args: Dict[str, object]
    managed_files: Tuple[str, ...]
    lock_lease: int
    refusals: Tuple[str, ...]
    unchanged: bool
    deploy_reasons: Tuple[str, ...]
    own_reasons: Tuple[str, ...]
    restart_reasons: Tuple[str, ...]
    rank_problems: Tuple[str, ...]
    rollback: Rollback
    rollback_needed: bool

    @property
    def multinode(self) -> bool:
        return self.deployment is not None

    @property
    def serves_http(self) -> bool:
        """Only node rank 0 serves HTTP (the probes, the smoke request, the benchmark)."""
        return self.node_rank == 0

    def to_json(self) -> Dict[str, object]:
        """The plan as the role's result shows it (no secrets: the API key reaches the server in a credential file)."""
        return {'server': self.server, 'python': self.python, 'argv': list(self.argv), 'url': self.url,
                'disaggregation_mode': self.disaggregation_mode,
                'node_rank': self.node_rank, 'deployment': self.deployment, 'nnodes': self.nnodes,
                'multinode_args': self.multinode_args, 'unit': self.paths.unit, 'refusals': list(self.refusals),
                'unchanged': self.unchanged, 'deploy_reasons': list(self.deploy_reasons),
                'restart_reasons': list(self.restart_reasons), 'rank_problems': list(self.rank_problems),
                'rollback': {'restore': [r['dest'] for r in self.rollback.restore], 'remove': list(self.rollback.remove),
                             'version': self.rollback.version, 'patch': self.rollback.patch},
                'rollback_needed': self.rollback_needed}


# ------------------------------------------------------------------------------------------------ server arguments

def is_multinode(inputs: Inputs, topo: Topology) -> bool:
    return bool(inputs.deployment_group) and len(topo.peers) > 1


def node_rank(inputs: Inputs, topo: Topology) -> int:
    if not is_multinode(inputs, topo):
        return 0
    explicit = topo.node_ranks.get(topo.host)
    if explicit is not None:
        return int(explicit)
    return topo.peers.index(topo.host) if topo.host in topo.peers else 0  # not in its group: refused (refuse_group)


def multinode_args(inputs: Inputs, topo: Topology) -> Dict[str, object]:
    """--nnodes from the group size, --node-rank from the host's position (or sglang_service_node_rank), --dist-init-addr
    from rank 0's address and sglang_service_dist_init_port."""
    if not is_multinode(inputs, topo):
        return {}
    return {'nnodes': len(topo.peers), 'node-rank': node_rank(inputs, topo),
            'dist-init-addr': '%s:%s' % (topo.rank0_address or topo.peers[0], inputs.dist_init_port)}


def server_args(inputs: Inputs, topo: Topology) -> Dict[str, object]:
    """The server arguments as the unit runs them: host and port first (unless sglang_service_args gives them, in any
    spelling), then sglang_service_args, then the multi-node arguments (which replace the same flags given in
    sglang_service_args: those are refused, see refuse_derived_flags). Malformed arguments give {} (refused, see
    refuse_bad_args)."""
    try:
        given = argv_rules.by_flag(inputs.args, 'sglang_service_args')
    except ValueError:
        return {}
    derived = multinode_args(inputs, topo)
    args: Dict[str, object] = {}
    for key, value in (('host', inputs.host), ('port', inputs.port)):
        if key not in given:
            args[key] = value
    args.update((k, v) for k, v in inputs.args.items() if argv_rules.flag(k)[2:] not in derived)
    args.update(derived)
    return args


def flags_of(args: Dict[str, object]) -> Dict[str, object]:
    """The server's arguments by SGLang's flag name, whatever their spelling; {} for malformed ones (refused, see
    refuse_bad_args)."""
    try:
        return argv_rules.by_flag(args, 'sglang_service_args')
    except ValueError:
        return {}


def probe_url(args: Dict[str, object]) -> str:
    """Where this host's probes reach the server: the address it listens on, loopback for a wildcard address."""
    flags = flags_of(args)
    listen = str(flags.get('host', '127.0.0.1'))
    if listen in WILDCARDS:
        listen = '127.0.0.1'
    elif ':' in listen and not listen.startswith('['):
        listen = '[%s]' % listen
    return 'http://%s:%s' % (listen, flags.get('port', 30000))


def argv(inputs: Inputs, args: Dict[str, object]) -> Tuple[str, ...]:
    command = list(inputs.launch_command) or [inputs.interpreter, '-m', 'sglang.launch_server']
    try:
        return tuple(str(w) for w in command) + tuple(argv_rules.cli_args(args))
    except ValueError:
        return tuple(str(w) for w in command)  # refused: see refuse_bad_args


# ------------------------------------------------------------------------------------------------ refusals

def refuse_bad_args(inputs: Inputs, _topo: Topology) -> Optional[str]:
    """A malformed flag name, two keys that name the same flag, a value no command line can hold."""
    try:
        argv_rules.by_flag(inputs.args, 'sglang_service_args')
        argv_rules.cli_args(inputs.args)
    except ValueError as exc:
        return str(exc).replace('sglang_cli_args: ', 'sglang_service_args: ', 1)
    return None


def refuse_derived_flags(inputs: Inputs, topo: Topology) -> Optional[str]:
    if not is_multinode(inputs, topo) or refuse_bad_args(inputs, topo):
        return None
    clash = [f for f in argv_rules.by_flag(inputs.args, 'sglang_service_args') if f in DERIVED_FLAGS]
    if not clash:
        return None
    return ('sglang_service_args sets %s, which sglang_service_deployment_group=%s derives from the inventory (--nnodes from '
            'the group size, --node-rank from the host\'s position or sglang_service_node_rank, --dist-init-addr from rank '
            '0\'s address and sglang_service_dist_init_port). Remove them from sglang_service_args.'
            % (', '.join('--' + f for f in clash), inputs.deployment_group))


def refuse_missing_ranks(inputs: Inputs, topo: Topology) -> Optional[str]:
    """Every rank of a multi-node deployment starts together: a rank left out of the play (--limit) would hang the
    others at their first collective."""
    if not is_multinode(inputs, topo):
        return None
    missing = [h for h in topo.peers if h not in topo.play_hosts]
    if not missing:
        return None
    return ('rank(s) %s of the multi-node deployment %s are not in this play: every rank starts together, so run them '
            'together (widen --limit or the play\'s hosts to the whole group)' % (', '.join(missing), inputs.deployment_group))


def refuse_split_batch(inputs: Inputs, topo: Topology) -> Optional[str]:
    if not is_multinode(inputs, topo):
        return None
    apart = [h for h in topo.peers if h in topo.play_hosts and h not in topo.batch]
    if not apart:
        return None
    return ('serial puts rank(s) %s of the multi-node deployment %s into another batch than %s: a rank waits for all the '
            'others, which a later batch cannot start. Set serial so that every rank of a deployment is in one batch '
            '(the deploy playbook: keep sglang_deploy_serial unset, or a multiple of the group size with the group\'s '
            'hosts next to each other)' % (', '.join(apart), inputs.deployment_group, topo.host))


def schedulable(batch: Tuple[str, ...], groups: Dict[str, Tuple[str, ...]], forks: int) -> bool:
    """Whether ``forks`` workers run every multi-node rank of ``batch`` to the end when a rank holds its worker until
    all ranks of its group hold one (ansible-core's linear strategy hands hosts to free workers in play order).
    Hosts of no multi-node group finish on their own."""
    group_of = dict((h, g) for g, hosts in groups.items() for h in hosts if len(hosts) > 1)
    queue = [h for h in batch if h in group_of]
    running: List[str] = []
    while queue or running:
        while queue and len(running) < forks:
            running.append(queue.pop(0))
        done = [g for g in set(group_of[h] for h in running)
                if all(h in running or h not in batch for h in groups[g])]
        if not done:
            return False
        running = [h for h in running if group_of[h] not in done]
    return True


def refuse_forks(inputs: Inputs, topo: Topology) -> Optional[str]:
    """The workers a task gets are the fewer of forks and its throttle (its own, its block's or its play's)."""
    workers = min(topo.forks, topo.throttle) if topo.throttle > 0 else topo.forks
    if not is_multinode(inputs, topo) or schedulable(topo.batch, topo.batch_groups, workers):
        return None
    ranks = sum(len(hosts) for hosts in topo.batch_groups.values() if len(hosts) > 1)
    if workers < topo.forks:
        return ('throttle=%d cannot run every rank of the multi-node deployment %s at once (%d ranks of multi-node '
                'deployments in this batch): a rank waits in its worker for the others, which would wait for a free worker. '
                'Remove the throttle from the task, block or play that includes the role, or set it to %d or more'
                % (workers, inputs.deployment_group, ranks, ranks))
    return ('forks=%d cannot run every rank of the multi-node deployment %s at once (%d ranks of multi-node deployments '
            'in this batch): a rank waits in its worker for the others, which would wait for a free worker. Run with '
            '-f %d or more (or forks in ansible.cfg, ANSIBLE_FORKS)' % (topo.forks, inputs.deployment_group, ranks, ranks))


def refuse_group(inputs: Inputs, topo: Topology) -> Optional[str]:
    """sglang_service_deployment_group names an inventory group, and this host is in it (a misspelled name would
    otherwise start every rank as a server of its own)."""
    group = inputs.deployment_group
    if not group:
        return None
    if topo.group_hosts is None:
        near = difflib.get_close_matches(group, topo.group_names, n=1)
        return ('sglang_service_deployment_group=%s is not a group of the inventory%s: give the group that holds every '
                'rank of the deployment, or leave the variable unset for a server on one host'
                % (group, ' (did you mean %s?)' % near[0] if near else ''))
    if topo.group_hosts and topo.host not in topo.group_hosts:
        return ('%s is not in its sglang_service_deployment_group %s (%s): set the variable on that group\'s hosts only '
                '(group_vars/%s.yml), not on every host of the play' % (topo.host, group, ', '.join(topo.group_hosts), group))
    return None


# The unit's stop bound (docs/guard.md, "Stops that do not hang"): what sglang_service_unit_extra may not loosen.
STOP_BOUND_KEYS = ('KillMode', 'SendSIGKILL', 'KillSignal', 'FinalKillSignal')


def refuse_loose_stops(inputs: Inputs, _topo: Topology) -> Optional[str]:
    """A stop must reach the server's whole process tree and end within TimeoutStopSec."""
    loose = [key for key in STOP_BOUND_KEYS if key in inputs.unit_extra]
    if not loose:
        return None
    return ('sglang_service_unit_extra sets %s: the role\'s unit sends SIGTERM to every process of the server\'s cgroup and '
            'SIGKILL after sglang_service_timeout_stop_sec (SGLang ignores SIGTERM while it loads, and its schedulers can '
            'outlive it). Remove them; set sglang_service_timeout_stop_sec for a longer or shorter bound'
            % ', '.join(loose))


# Numbers the role's argument spec types but cannot bound: seconds, counts and sizes, none of which can be negative
NON_NEGATIVE = ('wait_timeout', 'stall_timeout', 'stable_for', 'lock_timeout', 'smoke_timeout', 'smoke_max_tokens', 'restart_sec',
                'timeout_stop_sec', 'start_limit_burst', 'start_limit_interval_sec', 'history_keep', 'cache_keep',
                'preflight_stop_timeout', 'preflight_min_free_gb', 'benchmark_threshold')
PORTS = ('port', 'dist_init_port')


def refuse_out_of_range(inputs: Inputs, _topo: Topology) -> Optional[str]:
    """A negative number of seconds, tries or gigabytes, a port outside 1-65535 (a newcomer's -5 wait timeout restarted
    the server, then the wait refused it and the run ended rc 0)."""
    bad = ['sglang_service_%s=%s (give 0 or more)' % (name, getattr(inputs, name)) for name in NON_NEGATIVE
           if getattr(inputs, name) < 0]
    bad += ['sglang_service_%s=%s (give a port, 1-65535)' % (name, getattr(inputs, name)) for name in PORTS
            if not 0 < getattr(inputs, name) < 65536]
    return 'out of range: %s' % ', '.join(bad) if bad else None


# what a server can listen on: an IPv4 or IPv6 address or a DNS name
HOST_NAME = re.compile(r'^(\[?[0-9A-Fa-f:.]+\]?|[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)$')


def refuse_bad_listen(inputs: Inputs, topo: Topology) -> Optional[str]:
    """The address and port the server listens on, from sglang_service_args (which wins) or sglang_service_host and
    sglang_service_port: the probes, the smoke request and the gateway reach the server there."""
    flags = flags_of(inputs.args)
    bad = []
    if 'port' in flags:
        port = str(flags['port']).strip()
        if isinstance(flags['port'], bool) or not port.isdigit() or not 0 < int(port) < 65536:
            bad.append('port %r in sglang_service_args (give a port, 1-65535, or leave it out for sglang_service_port=%s)'
                       % (flags['port'], inputs.port))
    host, where = (flags['host'], 'in sglang_service_args') if 'host' in flags else (inputs.host, 'sglang_service_host')
    if str(host) not in WILDCARDS and not HOST_NAME.match(str(host)):
        bad.append('host %r %s (give an IP address or a host name the server can listen on)' % (host, where))
    return 'cannot listen there: %s' % '; '.join(bad) if bad else None


REFUSALS: Tuple[Callable[[Inputs, Topology], Optional[str]], ...] = (
    refuse_bad_args, refuse_out_of_range, refuse_bad_listen, refuse_group, refuse_derived_flags, refuse_missing_ranks,
    refuse_split_batch, refuse_forks, refuse_loose_stops)


# ------------------------------------------------------------------------------------------------ decisions

def unchanged(inputs: Inputs, topo: Topology, facts: Facts, peers: Dict[str, Facts]) -> Tuple[bool, Tuple[str, ...]]:
    """The host is left alone only when it (and, multi-node, every rank) still runs exactly the recorded deployment:
    a change on any rank restarts all ranks."""
    if not inputs.skip_unchanged:
        return False, ()
    stamp = facts.stamp or {}
    if not stamp:
        return False, ()
    own = tuple(stamp.get('reasons') or ())
    if not is_multinode(inputs, topo):
        return bool(stamp.get('current')), own
    others = [peers.get(h) for h in topo.peers if h != topo.host]
    if stamp.get('current') and all(p is not None and (p.stamp or {}).get('current') for p in others):
        return True, ()
    return False, own or ('another rank of %s differs' % inputs.deployment_group,)


def _stamp_flag(facts: Facts, key: str) -> bool:
    return bool((facts.stamp or {}).get(key))


# This host's reasons to restart its server, each (facts, multinode) -> reasons. The ranks of a multi-node deployment
# read each other's (Facts.own_reasons), see rank_reason.
RESTART_RULES: Tuple[Callable[[Facts, bool], List[str]], ...] = (
    lambda facts, _multinode: list(facts.changes),
    lambda facts, multinode: (['unit restarted or stopped outside a deploy']
                              if multinode and _stamp_flag(facts, 'unit_changed') else []),
    # the record's view, only when the process itself could not be read (its own view names what differs, and leaves
    # out what is not this deployment's: another server's SM120 patch of a shared venv)
    lambda facts, _multinode: (['the running server predates its files or SGLang (an earlier run ended before its restart)']
                               if _stamp_flag(facts, 'stale_process') and not process_read(facts) else []),
    lambda facts, _multinode: older_process(facts),
)


def process_read(facts: Facts) -> bool:
    return bool(((facts.stamp or {}).get('process') or {}).get('pid'))


def process_differs(facts: Facts) -> List[str]:
    return list(((facts.stamp or {}).get('process') or {}).get('differs') or [])


def older_process(facts: Facts) -> List[str]:
    """The process itself runs another configuration than the deployment wants (read from /proc by the no-change
    check), whatever the records say; said only when this run's changes do not already restart it."""
    differs = process_differs(facts)
    if not differs or facts.changes:
        return []
    return ['the running server runs an older configuration (%s)' % '; '.join(differs)]


def own_reasons(facts: Facts, multinode: bool) -> Tuple[str, ...]:
    return tuple(reason for rule in RESTART_RULES for reason in rule(facts, multinode))


def rank_reason(inputs: Inputs, topo: Topology, own: Tuple[str, ...], peers: Dict[str, Facts]) -> Tuple[str, ...]:
    """All ranks start together (SGLang's distributed init waits for every rank): another rank of the same server with
    a reason restarts this one too."""
    if own or not is_multinode(inputs, topo):
        return own
    if any(p.own_reasons for h, p in peers.items() if h != topo.host and p.server == inputs.name):
        return ('a rank of %s changed' % inputs.deployment_group,)
    return ()


def rank_problems(inputs: Inputs, topo: Topology, facts: Facts, peers: Dict[str, Facts]) -> Tuple[str, ...]:
    """What stops the start after the pre-flight: this host's failed checks, and on a multi-node deployment the ranks'
    differences (ranks that differ hang at their first collective) and the other ranks' failed pre-flights."""
    problems: List[str] = []
    own = facts.preflight or {}
    if own and not own.get('ok', True):
        problems.append(str(own.get('msg') or 'the pre-flight failed'))
    if is_multinode(inputs, topo):
        ranks = dict((h, (p.preflight or {}).get('rank')) for h, p in peers.items() if p.preflight)
        if own:
            ranks[topo.host] = own.get('rank')
        found = describe(differences(ranks))
        if found:
            problems += found + ['ranks that differ hang at their first collective: deploy the same versions to every rank']
        problems += ['the pre-flight failed on rank %s' % h for h, p in sorted(peers.items())
                     if h != topo.host and p.preflight and not p.preflight.get('ok', True)]
    return tuple(problems)


def proven(facts: Facts) -> bool:
    """The start served: ready, and the smoke request (when one was sent) generated."""
    return (facts.wait or {}).get('status') == 'ready' and (facts.smoke or {}).get('ok', True)


def failed_start(facts: Facts) -> bool:
    return bool(facts.wait) and not proven(facts)


def regressed(facts: Facts) -> bool:
    return (facts.gate or {}).get('status') == 'regressed'


def rollback_needed(inputs: Inputs, topo: Topology, facts: Facts) -> bool:
    """Back to the previous deployment after a failed start or smoke request (sglang_service_rollback, or the gate
    with policy rollback) or a regression the gate rejects (policy rollback); never twice, never in check mode."""
    if topo.check_mode or facts.failure or facts.rollback:
        return False
    rejected = regressed(facts) and inputs.gate and inputs.benchmark_policy == 'rollback'
    return inputs.keeps_previous and (failed_start(facts) or rejected)


def rollback_of(inputs: Inputs, facts: Facts, paths: Paths) -> Rollback:
    restore = list(facts.backups)
    if facts.key_file_kept:
        restore.append({'dest': paths.secret_args, 'backup_file': paths.secret_args_kept, 'secret': True})
    # a first deploy (no unit before) has no previous configuration: its files stay and the unit restarts as it is
    remove = () if paths.unit in facts.created else tuple(facts.created)
    version = facts.previous_version if inputs.install and facts.previous_version != inputs.version else ''
    patch = ''
    if 'SM120 patches' in facts.changes:
        patch = 'absent' if inputs.sm120_patch == 'present' else 'present'
    return Rollback(restore=tuple(restore), remove=remove, version=version, patch=patch)


def managed_files(inputs: Inputs, paths: Paths) -> Tuple[str, ...]:
    files = [paths.unit, paths.env, paths.secret_env, paths.secret_args, inputs.config_dir, inputs.working_directory]
    if inputs.log_path:
        files.append(inputs.log_path.rsplit('/', 1)[0] or '/')
    return tuple(files)


def plan(inputs: Inputs, topo: Topology, facts: Optional[Facts] = None, peers: Optional[Dict[str, Facts]] = None) -> Plan:
    """The deploy plan of this host (see the module docstring)."""
    facts = facts or Facts()
    peers = dict(peers or {})
    paths = Paths.of(inputs)
    multinode = is_multinode(inputs, topo)
    args = server_args(inputs, topo)
    same, deploy_reasons = unchanged(inputs, topo, facts, peers)
    own = own_reasons(facts, multinode)
    return Plan(
        server=inputs.name, paths=paths, python=inputs.interpreter, server_args=args, argv=argv(inputs, args),
        url=probe_url(args), disaggregation_mode=str(flags_of(args).get('disaggregation-mode') or 'null'),
        node_rank=node_rank(inputs, topo),
        deployment=inputs.deployment_group if multinode else None, nnodes=len(topo.peers) if multinode else 1,
        multinode_args=multinode_args(inputs, topo), managed_files=managed_files(inputs, paths),
        # the lease outlives the longest deploy: two readiness waits (a rollback waits again) and the stability window,
        # plus 15 minutes for install and configure
        lock_lease=2 * (inputs.wait_timeout + inputs.stable_for) + 900,
        refusals=tuple(p for p in (rule(inputs, topo) for rule in REFUSALS) if p),
        unchanged=same, deploy_reasons=deploy_reasons, own_reasons=own,
        restart_reasons=rank_reason(inputs, topo, own, peers),
        rank_problems=rank_problems(inputs, topo, facts, peers),
        rollback=rollback_of(inputs, facts, paths), rollback_needed=rollback_needed(inputs, topo, facts))
