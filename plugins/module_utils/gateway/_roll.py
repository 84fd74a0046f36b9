# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A rolling change of the SGLang servers behind one gateway, planned and judged on the controller (pure).

* ``fleet_from_inventory``: the workers the inventory names. A host of the worker group is one worker; the hosts of
  one multi-node deployment (``sglang_service_deployment_group``) are one worker, reached at its node rank 0; the
  prefill and decode groups give the workers of a prefill/decode (PD) disaggregated gateway.
* ``plan``: the batches, canary first, and the refusal of bad input before anything is touched: a name that is not a
  managed worker, a batch that would leave fewer than ``min_in_service`` (never fewer than one) workers in rotation,
  prefill and decode workers that would run different SGLang releases behind the gateway.
* ``preview``: what each worker's own deploy plan (the ``llmops.sglang.sglang_service`` role's plan step, run before
  the roll) says: a worker whose deployment would not change is left in rotation, undrained (its row ``unchanged``);
  a worker whose plan refuses its input refuses the roll.
* ``batch_verdict``: whether the roll goes on after a batch.

Runs on the controller; standard library only (it is also imported by tests on Python 3.9).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import GatewayWorker, same_url

DEFAULT_PORT = 30000
WORKER_TYPES = ('regular', 'prefill', 'decode')


class RollInputError(ValueError):
    """Input the roll refuses before it touches anything; the message says what, why and what to try."""


@dataclass(frozen=True)
class FleetWorker:
    """One worker behind the gateway: its name (the inventory host of node rank 0), URL, every host it runs on."""

    name: str
    url: str
    hosts: Tuple[str, ...]
    worker_type: str = 'regular'
    bootstrap_port: Optional[int] = None
    deployment_group: str = ''
    version: Optional[str] = None  # the SGLang release the inventory wants (sglang_service_version)

    def to_json(self) -> Dict[str, Any]:
        data = asdict(self)
        data['hosts'] = list(self.hosts)
        return data

    def api_worker(self) -> Dict[str, Any]:
        """The worker option of llmops.sglang.sglang_gateway_workers."""
        data = {'url': self.url, 'worker_type': self.worker_type}
        if self.bootstrap_port is not None:
            data['bootstrap_port'] = self.bootstrap_port
        return data


def gateway_mode(fleet: List[FleetWorker]) -> str:
    """The gateway's mode for this fleet: ``pd`` (smg --pd-disaggregation) with any prefill or decode worker, else
    ``regular``. smg reads it at its start only: a change of mode restarts the gateway."""
    return 'pd' if any(w.worker_type in ('prefill', 'decode') for w in fleet) else 'regular'


# The host variables the fleet is read from (role defaults do not reach the controller: the defaults are in the code).
HOST_KEYS = ('ansible_host', 'sglang_service_port', 'sglang_service_args', 'sglang_service_version',
             'sglang_service_deployment_group', 'sglang_service_node_rank', 'sglang_gateway_worker_url',
             'sglang_gateway_worker_host', 'sglang_gateway_bootstrap_port')


def host_views(hostvars: Any, hosts: List[str]) -> Dict[str, Dict[str, Any]]:
    """Plain dicts of the HOST_KEYS each host defines (Ansible's hostvars template a value when it is read)."""
    views = {}
    for host in hosts:
        known = hostvars[host] if host in hostvars else {}
        views[host] = dict((key, known[key]) for key in HOST_KEYS if key in known)
    return views


def worker_groups(groups: Dict[str, List[str]], names: Dict[str, str]) -> Dict[str, List[str]]:
    """``{'regular': hosts, 'prefill': hosts, 'decode': hosts}`` from the group names per worker type; a name that is
    not an inventory group is refused."""
    out = {}
    for kind, name in names.items():
        if kind not in WORKER_TYPES:
            raise RollInputError('worker type %r is not one of %s' % (kind, ', '.join(WORKER_TYPES)))
        if not name:
            continue
        if name not in groups:
            raise RollInputError('the inventory has no group %r (the %s workers); name a group of SGLang servers '
                                 '(sglang_gateway_worker_group, sglang_gateway_prefill_group, sglang_gateway_decode_group)'
                                 % (name, kind))
        out[kind] = list(groups[name])
    return out


def _port(hv: Dict[str, Any]) -> int:
    for key, value in (hv.get('sglang_service_args') or {}).items():
        if re.sub(r'^--', '', str(key)).replace('_', '-') == 'port':
            return int(value)
    return int(hv.get('sglang_service_port') or DEFAULT_PORT)


def worker_url(host: str, hv: Dict[str, Any]) -> str:
    """Where the gateway reaches the server of ``host``: ``sglang_gateway_worker_url`` when set, else
    ``http://<sglang_gateway_worker_host | ansible_host | host>:<its port>``."""
    if hv.get('sglang_gateway_worker_url'):
        return str(hv['sglang_gateway_worker_url']).rstrip('/')
    address = str(hv.get('sglang_gateway_worker_host') or hv.get('ansible_host') or host)
    if ':' in address and not address.startswith('['):
        address = '[%s]' % address
    return 'http://%s:%d' % (address, _port(hv))


def _rank0(group_hosts: List[str], hostvars: Dict[str, Dict[str, Any]]) -> str:
    for host in group_hosts:
        rank = hostvars.get(host, {}).get('sglang_service_node_rank')
        if rank is not None and str(rank) == '0':
            return host
    return group_hosts[0]


def fleet_from_inventory(worker_groups: Dict[str, List[str]], groups: Dict[str, List[str]],
                         hostvars: Dict[str, Dict[str, Any]]) -> List[FleetWorker]:
    """``worker_groups`` maps a worker type (``regular``, ``prefill``, ``decode``) to the hosts of its inventory group;
    ``groups`` is the whole inventory (for the deployment groups)."""
    fleet: List[FleetWorker] = []
    seen: Dict[str, str] = {}
    for kind in WORKER_TYPES:
        for host in worker_groups.get(kind) or []:
            if host in seen:
                if seen[host] != kind:
                    raise RollInputError('%s is in the %s and the %s worker group; a server is one kind of worker: keep it '
                                         'in one group' % (host, seen[host], kind))
                continue
            hv = hostvars.get(host, {})
            dgroup = str(hv.get('sglang_service_deployment_group') or '')
            members = list(groups.get(dgroup) or []) if dgroup else []
            if len(members) > 1:
                if host not in members:
                    raise RollInputError('%s names sglang_service_deployment_group=%s but is not in that group' % (host, dgroup))
                for member in members:
                    seen[member] = kind
                rank0 = _rank0(members, hostvars)
                hv = hostvars.get(rank0, {})
                fleet.append(FleetWorker(rank0, worker_url(rank0, hv), tuple(members), kind,
                                         _bootstrap(hv, kind), dgroup, _version(hv)))
            else:
                seen[host] = kind
                fleet.append(FleetWorker(host, worker_url(host, hv), (host,), kind, _bootstrap(hv, kind), '', _version(hv)))
    urls: Dict[str, str] = {}
    for worker in fleet:
        other = next((name for url, name in urls.items() if same_url(url, worker.url)), None)
        if other:
            raise RollInputError('%s and %s both give the worker URL %s: set sglang_gateway_worker_host or '
                                 'sglang_service_port so each server has its own' % (other, worker.name, worker.url))
        urls[worker.url] = worker.name
    return fleet


def _bootstrap(hv: Dict[str, Any], kind: str) -> Optional[int]:
    if kind != 'prefill':
        return None
    if hv.get('sglang_gateway_bootstrap_port') is not None:
        return int(hv['sglang_gateway_bootstrap_port'])
    for key, value in (hv.get('sglang_service_args') or {}).items():
        if re.sub(r'^--', '', str(key)).replace('_', '-') == 'disaggregation-bootstrap-port':
            return int(value)
    return None


def _version(hv: Dict[str, Any]) -> Optional[str]:
    value = hv.get('sglang_service_version')
    return str(value) if value not in (None, '') else None


def parse_batch(value: Any) -> Tuple[str, int]:
    """``1``, ``2`` (workers per batch) or ``25%`` (of the workers rolled) -> (``count`` | ``percent``, n)."""
    text = str(value).strip()
    match = re.match(r'^(\d+)(%?)$', text)
    if not match or int(match.group(1)) == 0 or (match.group(2) and int(match.group(1)) > 100):
        raise RollInputError('sglang_roll_batch=%r is not a batch size: give a number of workers (1, 2, ...) or a percentage '
                             'of the workers rolled (25%%, at most 100%%)' % (value,))
    return ('percent' if match.group(2) else 'count'), int(match.group(1))


def batch_size(spec: Tuple[str, int], total: int) -> int:
    kind, n = spec
    return max(1, math.ceil(total * n / 100.0)) if kind == 'percent' else n


_TRUE, _FALSE = ('true', 'yes', 'on', '1'), ('false', 'no', 'off', '0')


def _setting(name: str, value: Any, kind: str) -> Any:
    """One roll variable as its type (``bool``, ``count``: an int >= 0, ``seconds``: a number >= 0, ``policy``), or
    RollInputError naming the variable, what it got and what to give."""
    text = str(value).strip().lower()
    try:
        if kind == 'bool':
            if isinstance(value, bool) or text in _TRUE + _FALSE:
                return value if isinstance(value, bool) else text in _TRUE
            raise ValueError
        if kind == 'policy':
            if text in ('wait', 'proceed', 'fail'):
                return text
            raise ValueError
        number = int(text) if kind == 'count' else float(text)
        if number < 0 or math.isnan(number):
            raise ValueError
        return number
    except ValueError:
        want = {'bool': 'true or false', 'count': 'a whole number, 0 or more', 'seconds': 'a number of seconds, 0 or more',
                'policy': 'wait, proceed or fail'}[kind]
        raise RollInputError('sglang_roll_%s=%r: give %s' % (name, value, want)) from None


# The roll's own variables (sglang_roll_<name>) and their kinds, checked before anything is touched
SETTING_KINDS = {'canary': 'bool', 'min_in_service': 'count', 'drain_timeout': 'seconds', 'drain_policy': 'policy',
                 'return_timeout': 'seconds'}


def check_settings(values: Dict[str, Any]) -> Dict[str, Any]:
    """The roll's variables that are given (name without ``sglang_roll_`` -> value) as their types. Pure."""
    return dict((name, _setting(name, value, SETTING_KINDS[name])) for name, value in values.items()
                if name in SETTING_KINDS and value is not None)


@dataclass
class RollSettings:
    batch: Any = 1
    canary: bool = True
    min_in_service: int = 1
    only: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class Preview:
    """What a worker's deploy plan said before the roll: its deployment would not change (``unchanged``, with the
    plan's reasons otherwise), or it refuses its input (``refusal``)."""

    unchanged: bool = False
    reasons: Tuple[str, ...] = ()
    refusal: str = ''


def preview(worker: FleetWorker, results: Dict[str, Any]) -> Optional[Preview]:
    """``results[host]``: what the plan step of the sglang_service role (llmops.sglang.sglang_deploy ``plan`` and
    ``ranks``) registered on each host, its public result ``sglang_service_result`` with the ``plan``. None when a host of
    the worker has none (the roll then changes the worker, as it would without a plan). A multi-node worker is unchanged
    only when every rank is."""
    found = [_dict(results.get(host)) for host in worker.hosts]
    if not all(found):
        return None
    for host, result in zip(worker.hosts, found):
        failure = _dict(result.get('failure'))
        if failure:
            return Preview(refusal='%s: %s' % (host, str(failure.get('msg') or 'its deploy plan failed').strip()))
    plans = [_dict(r.get('plan')) for r in found]
    if not all(plans):
        return None
    reasons = tuple(r for p in plans for r in (p.get('deploy_reasons') or ()))
    return Preview(unchanged=all(bool(p.get('unchanged')) for p in plans), reasons=reasons)


@dataclass
class RollPlan:
    batches: List[List[FleetWorker]]
    fleet: List[FleetWorker]
    in_rotation: int
    unmanaged: List[str] = field(default_factory=list)
    warnings: List[str] = field(default_factory=list)
    unchanged: List[FleetWorker] = field(default_factory=list)  # left in rotation: their deployment would not change

    def to_json(self) -> Dict[str, Any]:
        return {
            'batches': [{'index': i + 1, 'canary': i == 0 and len(self.batches) > 1 and len(b) <= 2,
                         'workers': [w.to_json() for w in b], 'hosts': [h for w in b for h in w.hosts],
                         'names': [w.name for w in b]}
                        for i, b in enumerate(self.batches)],
            'fleet': [w.to_json() for w in self.fleet],
            'in_rotation': self.in_rotation,
            'unmanaged': self.unmanaged,
            'warnings': self.warnings,
            'unchanged': [w.to_json() for w in self.unchanged],
        }


def _select(fleet: List[FleetWorker], only: List[str]) -> List[FleetWorker]:
    if not only:
        return list(fleet)
    chosen = []
    for name in only:
        match = next((w for w in fleet if name == w.name or name in w.hosts or ('://' in name and same_url(name, w.url))), None)
        if match is None:
            raise RollInputError('%s is not a managed worker: the roll changes only servers of the worker groups (%s); name one '
                                 'of those hosts or URLs in sglang_roll_only' % (name, ', '.join(w.name + ' ' + w.url for w in fleet)))
        if match not in chosen:
            chosen.append(match)
    return [w for w in fleet if w in chosen]


def _units(workers: List[FleetWorker]) -> List[List[FleetWorker]]:
    """What must leave rotation together: one regular worker, or a prefill with its decode (PD pairs, in order)."""
    regular = [[w] for w in workers if w.worker_type == 'regular']
    prefill = [w for w in workers if w.worker_type == 'prefill']
    decode = [w for w in workers if w.worker_type == 'decode']
    pairs = [list(p) for p in zip(prefill, decode)]
    rest = [[w] for w in prefill[len(pairs):] + decode[len(pairs):]]
    return regular + pairs + rest


def _serving(workers: List[GatewayWorker], removed_urls: List[str]) -> int:
    rest = [w for w in workers if w.in_rotation and not any(same_url(w.url, u) for u in removed_urls)]
    if any(w.worker_type in ('prefill', 'decode') for w in workers):
        return min(sum(1 for w in rest if w.worker_type == 'prefill'), sum(1 for w in rest if w.worker_type == 'decode'))
    return len(rest)


def _pd_versions(fleet: List[FleetWorker], rolled: List[FleetWorker], gateway: List[GatewayWorker]) -> Optional[str]:
    """Why the prefill and decode workers cannot be rolled in batches (None when they can)."""
    pd = [w for w in fleet if w.worker_type in ('prefill', 'decode')]
    if not pd:
        return None
    now = {}
    for worker in pd:
        seen = next((g for g in gateway if same_url(g.url, worker.url)), None)
        now[worker.name] = seen.version if seen is not None else None
    running = sorted(set(v for v in now.values() if v))
    if len(running) > 1:
        return ('the prefill and decode workers run different SGLang releases now (%s): a prefill and a decode of different '
                'releases can pair and answer wrongly with status 200; bring them to one release first'
                % ', '.join('%s %s' % (n, v) for n, v in sorted(now.items()) if v))
    changing = [w for w in pd if w in rolled and w.version and running and w.version != running[0]]
    if changing:
        return ('the roll changes the SGLang release of prefill/decode workers (%s -> %s on %s): while some are changed and '
                'others not, the gateway pairs a prefill with a decode of another release, which can answer wrongly with '
                'status 200; change them all at once (sglang_roll_batch=100%%) or behind a second gateway'
                % (running[0], changing[0].version, ', '.join(w.name for w in changing)))
    return None


def _changing(selected: List[FleetWorker], previews: Dict[str, Optional[Preview]]) -> Tuple[List[FleetWorker], List[FleetWorker]]:
    """(the workers the roll changes, those it leaves alone: their deploy plan says nothing would change); raises
    RollInputError naming every worker whose deploy plan refuses its input."""
    refusals = [p.refusal for p in (previews.get(w.name) for w in selected) if p is not None and p.refusal]
    if refusals:
        raise RollInputError('the deploy plan refuses the input of %s; fix it in the inventory and roll again'
                             % ' | '.join(refusals))
    same = [w for w in selected if (previews.get(w.name) or Preview()).unchanged]
    return [w for w in selected if w not in same], same


def plan(fleet: List[FleetWorker], gateway: List[GatewayWorker], settings: RollSettings,
         previews: Optional[Dict[str, Optional[Preview]]] = None) -> RollPlan:
    """The batches of a roll over ``fleet`` (canary first) behind a gateway that now holds ``gateway``; ``previews``
    (worker name -> ``preview``) leaves out the workers whose deployment would not change. Raises RollInputError for
    input the roll refuses."""
    if not fleet:
        raise RollInputError('no worker to roll: the worker groups are empty; name the inventory group of the SGLang '
                             'servers behind the gateway (sglang_gateway_worker_group)')
    spec = parse_batch(settings.batch)
    if int(settings.min_in_service) < 0:
        raise RollInputError('sglang_roll_min_in_service=%s must be 0 or more' % settings.min_in_service)
    rolled, same = _changing(_select(fleet, settings.only), previews or {})
    units = _units(rolled)
    size = batch_size(spec, len(units))
    pd_problem = _pd_versions(fleet, rolled, gateway)
    if pd_problem and size < len(units):
        raise RollInputError('refusing to roll in batches: ' + pd_problem)
    batches: List[List[FleetWorker]] = []
    rest = list(units)
    if settings.canary and len(rest) > 1 and size < len(rest):
        batches.append(rest.pop(0))
    while rest:
        batches.append([w for unit in rest[:size] for w in unit])
        rest = rest[size:]
    out = RollPlan(batches, fleet, _serving(gateway, []), unchanged=same)
    out.unmanaged = [g.url for g in gateway if not any(same_url(g.url, w.url) for w in fleet)]
    if out.unmanaged:
        out.warnings.append('the gateway also routes to %s, which no worker group names: the roll leaves them alone and counts '
                            'them in service' % ', '.join(out.unmanaged))
    need = max(1, int(settings.min_in_service))
    for number, batch in enumerate(batches, 1):
        left = _serving(gateway, [w.url for w in batch])
        if left < need:
            # what to try before the list of URLs: a screen line is cut at its end
            raise RollInputError(
                'batch %d (%s) would leave %d worker%s in rotation, %s; use a smaller sglang_roll_batch%s, or bring more '
                'workers into rotation first (the gateway has %d in rotation now: %s)'
                % (number, ', '.join(w.name for w in batch), left, '' if left == 1 else 's',
                   'no worker to serve' if left == 0 else 'fewer than sglang_roll_min_in_service=%d' % need,
                   '' if need <= 1 else ' or a lower sglang_roll_min_in_service',
                   out.in_rotation, ', '.join(g.url for g in gateway if g.in_rotation) or 'none'))
    return out


@dataclass
class WorkerOutcome:
    """What the roll did to one worker of a batch, and the row the table shows for it."""

    name: str
    url: str = ''
    batch: int = 0
    drain: Optional[str] = None  # idle, proceed, fail; left: its change stopped before its drain; None: not drained (the batch never left rotation)
    drained: Optional[int] = None
    drain_seconds: Optional[float] = None
    still_running: Optional[int] = None
    drain_policy: str = ''  # the policy the drain followed (wait, proceed, fail)
    drain_at_timeout: Optional[int] = None  # in flight when drain_timeout passed (None: drained within it)
    change: str = 'not run'  # changed, unchanged, rolled back, failed, not run
    change_detail: str = ''
    change_seconds: Optional[float] = None
    start: str = ''  # the server's start: ready, crashed, ... ('' when not started)
    start_seconds: Optional[float] = None
    serves: bool = False  # its server answers after the change (or was never touched)
    returned: Optional[bool] = None  # back in rotation and a request through the gateway reached it
    return_seconds: Optional[float] = None
    status: str = 'untouched'
    reason: str = ''

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)


def _dict(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) and not value.get('skipped') else {}


def worker_outcome(worker: Dict[str, Any], batch: int, drain: Dict[str, Any], facts: Dict[str, Dict[str, Any]],
                   change_seconds: Optional[float] = None) -> WorkerOutcome:
    """What happened to ``worker`` (a plan entry) up to its change: ``drain`` is its drain (one of the ``drains`` of
    llmops.sglang.sglang_gateway_rotation, empty when the batch never left rotation); ``facts[host]`` holds what its
    hosts registered - ``result`` (the llmops.sglang.sglang_service role's public ``sglang_service_result``) and
    ``failure`` (the task that failed the change, caught by the roll)."""
    name = worker['name']
    out = WorkerOutcome(name, worker.get('url', ''), batch)
    drain = _dict(drain)
    if not drain:
        out.reason = 'not taken out of rotation'
        return out
    result = _dict(facts.get(name, {}).get('result'))
    drain = drain_of(drain, _dict(result.get('drain')))
    out.drain, out.drain_seconds = drain.get('outcome'), drain.get('seconds')
    out.drained, out.still_running = drain.get('drained'), drain.get('still_running')
    out.drain_policy, out.drain_at_timeout = drain.get('policy') or '', drain.get('at_timeout')
    if out.drain == 'fail':
        out.serves, out.status, out.reason = True, 'untouched', drain.get('reason') or 'drain failed'
        return out
    if change_seconds is not None and drain.get('in_change'):
        # the change's own time: less what it waited for the drain (the roll's, not the change's)
        change_seconds = round(max(0.0, change_seconds - float(drain.get('seconds') or 0.0)), 1)
    out.change_seconds = change_seconds
    failure = next((f for f in (_dict(facts.get(h, {}).get('failure')) for h in worker.get('hosts') or [name]) if f), {})
    outcome, status = result.get('outcome'), result.get('status')
    if outcome in ('started', 'restarted', 'rolled back'):
        out.start, out.start_seconds = status or '', result.get('elapsed')
    if outcome == 'rolled back':
        rollback = _dict(result.get('rollback'))
        previous = _dict(rollback.get('after')).get('status')
        out.change, out.serves = 'rolled back', previous == 'ready'
        out.change_detail = rollback.get('msg') or result.get('msg') or ''
        out.reason = 'the change failed (%s) and was rolled back; the previous configuration is %s' % (
            rollback.get('status') or 'failed', previous or 'unknown')
    elif status == 'ready' and outcome in ('unchanged', 'started', 'restarted', 'not started'):
        out.change = 'unchanged' if outcome == 'unchanged' else 'changed'
        out.change_detail = '; '.join(result.get('reasons') or [])
        out.serves = True
    else:
        out.change, out.serves = 'failed', False
        why = result.get('msg') or failure.get('msg') or 'the sglang_service role published no result'
        out.change_detail = out.reason = '%s: %s' % (failure.get('task') or 'the change', why) if failure.get('task') else why
        if stopped_before_restart(worker, result):
            # its server was never stopped: it goes back into rotation (proven there) and the roll stops
            out.serves = True
            out.reason += '; %s was not restarted and still runs its previous configuration' % name
    return out


def stopped_before_restart(worker: Dict[str, Any], result: Dict[str, Any]) -> bool:
    """The change of a regular worker failed in a step before the restart (its plan, install - a flag the release does
    not define, say - or configure): the running server was not stopped. Not for prefill and decode workers: putting
    one back alone could pair it with a partner already on another release. Pure."""
    failure = _dict(result.get('failure'))
    return (worker.get('worker_type', 'regular') == 'regular' and result.get('outcome') == 'not started'
            and not result.get('restarted') and failure.get('step') in ('plan', 'ranks', 'install', 'configure'))


def drain_of(removal: Dict[str, Any], change: Dict[str, Any]) -> Dict[str, Any]:
    """A worker's drain for its row: the removal's (``removal``, one of the rotation's ``drains``), or - when the removal
    left it to the change (outcome ``left``) - the one the change waited for (``change``, the sglang_service role's
    ``drain``), with the requests drained counted from what was in flight when the worker left rotation (``in_change``:
    its seconds were spent inside the change). A change that stopped before its drain keeps outcome ``left``. Pure."""
    if removal.get('outcome') != 'left' or not change.get('outcome'):
        return removal
    # its seconds: what the change waited for it (with a drain module of its own, that module's whole run)
    drain = dict(change, in_change=True, seconds=change.get('waited', change.get('seconds')))
    at_removal, still = removal.get('in_flight_at_start'), change.get('still_running')
    if at_removal is not None:
        drain['in_flight_at_start'] = at_removal
        drain['drained'] = max(0, int(at_removal) - int(still or 0))
    return drain


def unchanged_outcome(worker: Dict[str, Any]) -> WorkerOutcome:
    """The row of a worker the roll left alone because its deploy plan said nothing would change (a plan entry)."""
    return WorkerOutcome(worker['name'], worker.get('url', ''), 0, change='unchanged', serves=True, status='unchanged',
                         reason='its deployment would not change (the deploy plan): left in rotation, not drained')


def report_rows(plan_json: Dict[str, Any], rows: List[WorkerOutcome], stopped: str = '',
                dry_run: bool = False) -> List[WorkerOutcome]:
    """Every worker of the roll's plan (the JSON of ``RollPlan``) once, in the inventory's order: the rows of the batches
    that ran, a row for each worker of a batch the roll did not reach (``would roll`` in a dry run: check mode runs the
    plan alone), and one for each worker it left alone."""
    out = list(rows)
    seen = set(r.name for r in rows)
    for batch in plan_json.get('batches') or []:
        for worker in batch.get('workers') or []:
            if worker['name'] in seen:
                continue
            if dry_run:
                out.append(WorkerOutcome(worker['name'], worker['url'], batch['index'], status='would roll',
                                         reason='would roll in batch %d (check mode: nothing touched)' % batch['index']))
            else:
                out.append(WorkerOutcome(worker['name'], worker['url'], batch['index'],
                                         reason='not reached: the roll stopped before batch %d' % batch['index']
                                         if stopped else 'not reached'))
    out.extend(unchanged_outcome(w) for w in plan_json.get('unchanged') or [] if w['name'] not in seen)
    order = [w['name'] for w in plan_json.get('fleet') or []]
    out.sort(key=lambda r: order.index(r.name) if r.name in order else len(order))
    return out


def judge(outcomes: List[WorkerOutcome], back: Dict[str, Any]) -> Tuple[str, str, List[str]]:
    """After the batch was put back: each outcome's ``returned``, ``status`` and ``reason``; returns (``continue`` |
    ``stop``, why, the URLs to take out of rotation again: back but not proven). ``back`` is the result of putting the
    serving workers back (llmops.sglang.sglang_gateway_rotation, its ``proofs`` the route proof per worker)."""
    routes = dict((r['worker'], r) for r in back.get('proofs') or [] if isinstance(r, dict) and r.get('worker'))
    waiting = dict((back.get('verdict') or {}).get('waiting') or {})
    waiting.update((back.get('verdict') or {}).get('failed') or {})
    take_out = []
    for out in outcomes:
        if not out.serves:
            out.returned = False if out.drain is not None else None
            out.status = 'stopped' if out.drain is not None else 'untouched'
            continue
        route = next((r for url, r in routes.items() if same_url(url, out.url)), {})
        in_rotation = not any(same_url(url, out.url) for url in waiting) and bool((back.get('verdict') or {}).get('done'))
        out.returned = in_rotation and bool(route.get('ok'))
        out.return_seconds = round(float(back.get('waited') or 0) + float(route.get('seconds') or 0), 1)
        if not out.returned:
            why = ('the gateway reports it %s' % next((s for u, s in waiting.items() if same_url(u, out.url)), 'not in rotation')
                   if not in_rotation else route.get('reason') or 'no request through the gateway reached it')
            out.reason = 'did not return to rotation: %s; left out of rotation' % why
            out.status = 'stopped'
            take_out.append(out.url)
        elif out.drain == 'fail':
            out.status = 'untouched'
        else:
            out.status = {'rolled back': 'rolled back', 'unchanged': 'unchanged', 'failed': 'stopped'}.get(out.change, 'rolled')
            out.reason = out.reason or ('%s; back in rotation, %s' % (out.change_detail or out.change, route.get('reason', '')))
    verdict = batch_verdict(outcomes)
    return verdict[0], verdict[1], take_out


def event_text(out: WorkerOutcome) -> str:
    """The worker's line at the end of its batch: what is new since the change's own lines (``would deploy``, ``full
    deploy``), which already said why it changed; the row keeps the whole reason for the table. Pure."""
    said = out.change_detail + '; '
    if out.status == 'rolled' and out.change_detail and out.reason.startswith(said):
        return out.reason[len(said):]
    return out.reason


def taken_out_before(batch: Dict[str, Any], previous: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The batch's removal when the previous batch's return step already took it out (its ``next_out``), else None."""
    nxt = _dict(_dict(previous).get('next_out'))
    if nxt and nxt.get('index') == batch.get('index') and isinstance(nxt.get('result'), dict):
        return nxt['result']
    return None


def cleared_hosts(batch: Dict[str, Any], removal: Dict[str, Any]) -> List[str]:
    """The hosts of ``batch`` whose change may run: their worker left rotation and drained (``idle``), reached its
    bound under the policy ``proceed``, or left its drain to the change (``left``: the change drains it before it
    changes what the server runs). A worker that did not leave or whose drain failed keeps its server untouched."""
    outcomes = dict((d.get('url'), d.get('outcome')) for d in _dict(removal).get('drains') or [])
    return [host for worker in batch.get('workers') or [] if outcomes.get(worker.get('url')) in ('idle', 'proceed', 'left')
            for host in worker.get('hosts') or [worker['name']]]


# How a change drains its server (the rotation module's own defaults): a reading every 0.1 s while busy, the one that
# confirms an idle reading 0.25 s after it
CHANGE_DRAIN = {'interval': 0.1, 'idle_spacing': 0.25}


def change_drains(batch: Dict[str, Any], removal: Dict[str, Any], rotation: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """host -> its sglang_service_drain, for each worker whose removal left its drain to the change (outcome ``left``):
    on the worker's serving host (rank 0, the worker's name), the URL the gateway routed to - the server running now,
    not the one the change will start (a changed port or address) - and the roll's bound and policy. Pure."""
    left = set(d.get('url') for d in _dict(removal).get('drains') or [] if d.get('outcome') == 'left')
    settings = dict(CHANGE_DRAIN, timeout=rotation.get('drain_timeout', 120.0), policy=rotation.get('drain_policy') or 'fail')
    return dict((worker['name'], dict(settings, url=worker['url'])) for worker in batch.get('workers') or []
                if worker.get('url') in left)


def may_go_on(outcomes: List[WorkerOutcome]) -> bool:
    """Before the batch is put back: whether the roll goes on once every worker that serves is back in rotation and
    proven - ``batch_verdict`` less the return (every worker left rotation, drained or past its bound with
    ``proceed`` or found unchanged by its change before it needed a drain (``left``), changed or found unchanged, and
    serves). The next batch may then leave rotation in the same call as
    this one's return, which takes it out only once that return succeeded."""
    return bool(outcomes) and all(
        o.drain in ('idle', 'proceed', 'left') and o.change not in ('rolled back', 'failed', 'not run') and o.serves for o in outcomes)


def batch_verdict(outcomes: List[WorkerOutcome]) -> Tuple[str, str]:
    """(``continue`` | ``stop``, why). A batch stops the roll when a drain failed, a change failed or was rolled back,
    or a worker did not return to rotation."""
    for outcome in outcomes:
        if outcome.drain == 'fail':
            return 'stop', '%s: drain failed: %s' % (outcome.name, outcome.reason)
        if outcome.change in ('rolled back', 'failed'):
            return 'stop', '%s: change %s: %s' % (outcome.name, outcome.change, outcome.reason)
        if outcome.returned is False:
            return 'stop', '%s: %s' % (outcome.name, outcome.reason)
        if outcome.drain is None:
            return 'stop', '%s: %s' % (outcome.name, outcome.reason or 'not taken out of rotation')
    return 'continue', 'every worker of the batch is back in rotation'
