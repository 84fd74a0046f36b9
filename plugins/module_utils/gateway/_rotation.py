# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Workers into and out of the gateway's rotation, as one step each: ``Rotation.change`` (add or remove what differs,
refusing a removal below ``min_in_service`` before anything changes), ``Rotation.wait`` (until the gateway reports it),
``drain_all`` (the drain of several servers at once) and ``prove_all`` (the route proof of each).

The decisions are the pure functions of ``_reconcile``, ``_drain`` and ``_route``; this file observes and acts.
Python 3.9+, standard library only.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import ControlPlane, ControlPlaneError, GatewayWorker, same_url
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._drain import DrainResult, DrainSettings, drain_server, read_load
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._reconcile import (
    Changes, Verdict, Wanted, changes, in_rotation_after_removal, verdict)
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._route import RouteResult, prove, read_finished, smoke_sender


class Refused(Exception):
    """A change refused before anything was changed (``min_in_service``)."""


@dataclass
class Step:
    """What one change of the rotation did."""

    changes: Changes = field(default_factory=Changes)
    workers: List[GatewayWorker] = field(default_factory=list)
    verdict: Verdict = field(default_factory=lambda: Verdict(done=True))
    waited: float = 0.0


class Rotation:
    """The rotation of one gateway. ``interval``: seconds between two reads of ``GET /workers`` while waiting."""

    def __init__(self, plane: ControlPlane, interval: float = 1.0, clock=time.monotonic, sleep=time.sleep):
        self.plane = plane
        self.interval = interval
        self.clock = clock
        self.sleep = sleep

    def read(self, deadline: float) -> List[GatewayWorker]:
        """``GET /workers``, tolerating a gateway that does not answer yet (its unit is starting) until the deadline."""
        while True:
            try:
                return self.plane.workers()
            except ControlPlaneError as err:
                if err.kind != 'unreachable' or self.clock() >= deadline:
                    raise
            self.sleep(self.interval)

    def change(self, wanted: List[Wanted], have: List[GatewayWorker], state: str, exclusive: bool = False,
               min_in_service: int = 0, worker_api_key: Optional[str] = None, check_mode: bool = False,
               deadline: float = 0.0) -> Changes:
        """Add and remove what differs (nothing in check mode); a removal that would leave fewer than
        ``min_in_service`` workers in rotation raises Refused first."""
        todo = changes(wanted, have, state, exclusive)
        if not todo.changed:
            return todo
        leaving = [Wanted(w.url, w.worker_type) for w in todo.remove]
        left = in_rotation_after_removal(have, leaving)
        if state == 'absent' and 0 < min_in_service > left:
            raise Refused('refusing to take %s out of rotation: %d worker(s) would stay in rotation, fewer than '
                          'min_in_service=%d; nothing was changed' % (', '.join(w.url for w in leaving), left, min_in_service))
        if not check_mode:
            for worker in todo.remove:
                self.plane.remove(worker.id)
            self.until_gone([w.url for w in have if w.status == 'draining' and any(same_url(w.url, x.url) for x in todo.add)],
                            deadline)
            for item in todo.add:
                self.plane.add(item.api_body(worker_api_key))
        return todo

    def until_gone(self, urls: List[str], deadline: float) -> None:
        """Wait until the gateway dropped these draining workers (its drain_settle_secs): registering a URL it still holds
        is refused (409), and the entry would vanish afterwards."""
        while urls and self.clock() < deadline:
            held = self.plane.workers()
            urls = [u for u in urls if any(same_url(w.url, u) for w in held)]
            if urls:
                self.sleep(self.interval)

    def wait(self, wanted: List[Wanted], state: str, deadline: float, keep_waiting: bool = True):
        """Read until the gateway reports what ``state`` asks for, a worker failed, or the deadline; (workers, verdict)."""
        while True:
            have = self.plane.workers()
            result = verdict(wanted, have, state)
            if result.done or result.failed or not keep_waiting or self.clock() >= deadline:
                return have, result
            self.sleep(self.interval)

    def step(self, wanted: List[Wanted], state: str, timeout: float, **options) -> Step:
        """One change and its wait (``options`` of ``change``; ``wait=False`` reads once)."""
        started = self.clock()
        deadline = started + max(0.0, timeout)
        keep_waiting = options.pop('wait', True)
        out = Step()
        have = self.read(deadline)
        out.workers = have
        out.changes = self.change(wanted, have, state, deadline=deadline, **options)
        if not options.get('check_mode'):
            out.workers, out.verdict = self.wait(wanted, state, deadline, keep_waiting)
        out.waited = round(self.clock() - started, 3)
        return out


def drain_all(urls: List[str], settings: DrainSettings, source: str, api_key: Optional[str] = None) -> Dict[str, DrainResult]:
    """The drain of several servers at once (a batch of a rolling change), each read from its own URL."""
    results: Dict[str, DrainResult] = {}

    def one(url: str) -> None:
        results[url] = drain_server(url, settings, source, api_key)

    threads = [threading.Thread(target=one, args=(url,)) for url in urls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def left_to_the_change(urls: List[str], source: str, api_key: Optional[str], policy: str) -> List[Dict[str, object]]:
    """Servers out of rotation whose drain their change does (``drain`` false): one reading of each, what it still
    had in flight when it left (None when unread), in the shape of a drain's result with outcome ``left``."""
    out = []
    for url in urls:
        load, refused = None, False
        for chosen in (('metrics', 'get_load') if source == 'auto' else (source,)):
            load, _error, refused = read_load(url, chosen, api_key)
            if load is not None or refused:
                break
        busy = 0 if refused else (None if load is None else load.busy)
        out.append(dict(url=url, outcome='left', seconds=0.0, in_flight_at_start=busy, drained=None, still_running=busy,
                        peak=busy, policy=policy, at_timeout=None, source=source, readings=[], reading_count=1,
                        reason='left to its change: %s in flight' % ('?' if busy is None else busy)))
    return out


def prove_all(gateway_url: str, urls: List[str], api_key: Optional[str], attempts: int, timeout: float,
              max_tokens: int = 4, validate_certs: bool = True) -> List[RouteResult]:
    """The route proof of each worker, one after the other (each sends requests through the gateway)."""
    return [prove(url, smoke_sender(gateway_url, api_key, timeout, max_tokens, url, validate_certs),
                  lambda u=url: read_finished(u), attempts) for url in urls]
