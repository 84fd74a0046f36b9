# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Which workers to add or remove so the gateway holds what is wanted, and whether it reports them as wanted.

Pure functions over the wanted workers and what ``GET /workers`` answered. Python 3.9+, standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import WORKER_TYPES, GatewayWorker, same_url


@dataclass(frozen=True)
class Wanted:
    """A worker the caller wants in (or out of) the gateway: its URL, its type, a prefill's bootstrap port."""

    url: str
    worker_type: str = 'regular'
    bootstrap_port: Optional[int] = None

    @classmethod
    def from_option(cls, item: Any) -> 'Wanted':
        """A worker option: a URL, or a dict with ``url`` and optionally ``worker_type`` and ``bootstrap_port``."""
        if isinstance(item, str):
            item = {'url': item}
        if not isinstance(item, dict) or not isinstance(item.get('url'), str) or '://' not in item['url']:
            raise ValueError('a worker must be a URL such as http://10.0.0.5:30000 or a dict with url, got %r' % (item,))
        kind = str(item.get('worker_type') or 'regular')
        if kind not in WORKER_TYPES:
            raise ValueError('worker %s: worker_type %r is not one of %s' % (item['url'], kind, ', '.join(WORKER_TYPES)))
        port = item.get('bootstrap_port')
        if port is not None and (not isinstance(port, int) or not 0 < port < 65536):
            raise ValueError('worker %s: bootstrap_port must be a port number, got %r' % (item['url'], port))
        if port is not None and kind != 'prefill':
            raise ValueError('worker %s: only a prefill worker has a bootstrap_port' % item['url'])
        return cls(item['url'].rstrip('/'), kind, port)

    def api_body(self, api_key: Optional[str] = None) -> Dict[str, Any]:
        """The body of ``POST /workers``."""
        body = {'url': self.url, 'worker_type': self.worker_type}
        if self.bootstrap_port is not None:
            body['bootstrap_port'] = self.bootstrap_port
        if api_key:
            body['api_key'] = api_key
        return body


def find(have: List[GatewayWorker], url: str) -> Optional[GatewayWorker]:
    return next((w for w in have if same_url(w.url, url)), None)


@dataclass
class Changes:
    """What to do to the gateway's worker set."""

    add: List[Wanted] = field(default_factory=list)
    remove: List[GatewayWorker] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.add or self.remove)


def changes(wanted: List[Wanted], have: List[GatewayWorker], state: str, exclusive: bool = False) -> Changes:
    """``present``: add the missing ones and those still ``draining`` from an earlier removal, replace one registered with
    another type or a ``failed`` one (terminal in the gateway: it is registered again); ``exclusive`` also removes every
    worker not wanted. ``absent``: remove the wanted ones that are still routable or registered (one already
    ``draining`` is on its way out)."""
    out = Changes()
    if state == 'absent':
        out.remove = [w for w in (find(have, x.url) for x in wanted) if w is not None and w.status != 'draining']
        return out
    for item in wanted:
        current = find(have, item.url)
        if current is None or current.status == 'draining':
            # a draining worker is on its way out (the gateway drops it after drain_settle_secs): registered again once gone
            out.add.append(item)
        elif current.worker_type != item.worker_type or current.status == 'failed':
            out.remove.append(current)
            out.add.append(item)
    if exclusive:
        out.remove.extend(w for w in have if not any(same_url(w.url, x.url) for x in wanted) and w not in out.remove)
    return out


@dataclass
class Verdict:
    """Whether the gateway reports the wanted workers as the caller waits for: ``done``; else who is still ``waiting``
    (url -> state) and who ``failed`` (terminal, will not get there by waiting)."""

    done: bool
    waiting: Dict[str, str] = field(default_factory=dict)
    failed: Dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        parts = ['%s %s' % (url, state) for url, state in sorted(self.waiting.items())]
        parts += ['%s %s' % (url, state) for url, state in sorted(self.failed.items())]
        return ', '.join(parts) or 'all as wanted'


def verdict(wanted: List[Wanted], have: List[GatewayWorker], state: str) -> Verdict:
    """``present``: every wanted worker in rotation (ready, healthy, circuit not open). ``absent``: none of them is
    routable any more (gone, or ``draining``: the gateway's policies no longer select it)."""
    out = Verdict(done=True)
    for item in wanted:
        current = find(have, item.url)
        if state == 'absent':
            if current is not None and current.status != 'draining':
                out.waiting[item.url] = current.state
        elif current is None:
            out.waiting[item.url] = 'not registered'
        elif current.status == 'failed':
            out.failed[item.url] = 'failed'
        elif not current.in_rotation:
            out.waiting[item.url] = current.state
    out.done = not out.waiting and not out.failed
    return out


def in_rotation_after_removal(have: List[GatewayWorker], removing: List[Wanted]) -> int:
    """How many workers stay in rotation once ``removing`` is out (the ``min_in_service`` check at the moment of removal).
    Prefill and decode workers count separately in a PD gateway: the smaller of the two is what serves."""
    rest = [w for w in have if w.in_rotation and not any(same_url(w.url, x.url) for x in removing)]
    kinds = set(w.worker_type for w in have)
    if 'prefill' in kinds or 'decode' in kinds:
        return min(sum(1 for w in rest if w.worker_type == 'prefill'), sum(1 for w in rest if w.worker_type == 'decode'))
    return len(rest)
