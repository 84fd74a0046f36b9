# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The drain of one SGLang server taken out of the gateway's rotation: wait until it has nothing in flight.

The gateway's own removal only waits ``drain_settle_secs``, a fixed sleep; this reads the server itself: its running
and waiting requests (``/metrics`` with ``--enable-metrics``, else ``/get_load``), every ``interval`` seconds while it
is busy, until ``idle_readings`` readings in a row say 0; a reading that confirms an idle one comes ``idle_spacing``
seconds after it (default: ``interval``), so a short poll interval ends the drain soon after the last request without
shortening the time a request in transit has to show up between two idle readings. Past ``timeout`` the ``policy`` decides: ``proceed`` (go on with the change,
saying how many still run: SGLang lets them end after SIGTERM within the unit's stop timeout), ``fail`` (stop here,
nothing was changed), ``wait`` (keep waiting until idle, up to ``max_wait``, then fail). Whatever the policy, the result
says how many requests were still in flight when ``timeout`` passed (``at_timeout``) and the policy it followed, so a
drain that waited on past its bound says how long and for how many.

A server that refuses the connection has nothing in flight (it is not running): that reading counts as idle. Any other
failed reading (timeout, 401, an answer without the figures) counts as not idle, so a drain never ends on a guess.

``decide`` is pure; ``Drainer`` observes and sleeps. Python 3.9+, standard library only.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable, List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.gateway import _metrics as metrics
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import http_call

POLICIES = ('wait', 'proceed', 'fail')
SOURCES = ('metrics', 'get_load')


@dataclass
class DrainSettings:
    timeout: float = 120.0
    policy: str = 'fail'
    interval: float = 0.5
    idle_readings: int = 2
    max_wait: float = 3600.0
    idle_spacing: Optional[float] = None  # seconds before a reading that confirms an idle one (None: ``interval``)

    def pause_after(self, reading: 'Reading') -> float:
        """Seconds to wait before the next reading: ``idle_spacing`` after an idle reading, else ``interval``."""
        if reading.busy == 0 and self.idle_spacing is not None:
            return self.idle_spacing
        return self.interval


@dataclass
class Reading:
    """One look at the server: seconds since the drain began, and its load (None with ``error`` when unread)."""

    at: float
    running: Optional[int] = None
    queued: Optional[int] = None
    source: str = ''
    error: Optional[str] = None
    refused: bool = False

    @property
    def busy(self) -> Optional[int]:
        if self.refused:
            return 0
        return None if self.running is None else self.running + (self.queued or 0)


@dataclass
class Decision:
    """``continue`` (read again), ``idle`` (drained), ``proceed`` or ``fail`` (the policy past the bound)."""

    action: str
    reason: str
    still_running: Optional[int] = None


def decide(readings: List[Reading], settings: DrainSettings) -> Decision:
    """What to do after the last reading."""
    if not readings:
        return Decision('continue', 'no reading yet')
    last = readings[-1]
    tail = readings[-settings.idle_readings:]
    if len(tail) == settings.idle_readings and all(r.busy == 0 for r in tail):
        return Decision('idle', 'nothing in flight in %d readings in a row' % settings.idle_readings, 0)
    if last.at < settings.timeout:
        return Decision('continue', 'in flight: %s' % _describe(last))
    still = last.busy
    what = _describe(last)
    if settings.policy == 'proceed':
        return Decision('proceed', 'still %s after %.0fs (drain_timeout); proceeding (policy proceed): they run on through '
                        'the server\'s own SIGTERM drain until the unit\'s stop timeout' % (what, last.at), still)
    if settings.policy == 'wait' and last.at < settings.max_wait:
        return Decision('continue', 'still %s after %.0fs, past drain_timeout %.0fs; waiting (policy wait, at most %.0fs)'
                        % (what, last.at, settings.timeout, settings.max_wait), still)
    bound = settings.max_wait if settings.policy == 'wait' else settings.timeout
    return Decision('fail', 'still %s after %.0fs (%s %.0fs, policy %s): the server was not changed'
                    % (what, last.at, 'max wait' if settings.policy == 'wait' else 'drain_timeout', bound, settings.policy),
                    still)


def _describe(reading: Reading) -> str:
    if reading.busy is None:
        return 'unknown (%s)' % (reading.error or 'no figures')
    return '%d request(s) (%d running, %d waiting)' % (reading.busy, reading.running or 0, reading.queued or 0)


def read_load(url: str, source: str, api_key: Optional[str] = None, timeout: float = 5.0, call=http_call):
    """(Load or None, error or None, refused) from the server's ``/metrics`` or ``/get_load``."""
    path = '/metrics' if source == 'metrics' else '/get_load'
    status, text, error = call('GET', url.rstrip('/') + path, key=api_key, timeout=timeout,
                               accept='text/plain' if source == 'metrics' else 'application/json')
    if status is None:
        return None, error, bool(error and error.startswith('refused'))
    if status != 200:
        hint = ' (start the server with --enable-metrics, or use source get_load)' if source == 'metrics' and status == 404 else ''
        return None, 'GET %s answered %s%s' % (path, status, hint), False
    load = metrics.load_from_metrics(text) if source == 'metrics' else metrics.load_from_get_load(text)
    if load is None:
        return None, 'GET %s has no load figures%s' % (path, ' (sglang:num_running_reqs)' if source == 'metrics' else ''), False
    return load, None, False


def pick_source(url: str, source: str, api_key: Optional[str] = None, read=None) -> str:
    """``metrics`` unless the server exports none (then ``get_load``), for source ``auto``; a server that refuses the
    connection is read from ``/metrics`` (it has nothing in flight either way)."""
    if source != 'auto':
        return source
    load, _error, refused = (read or read_load)(url, 'metrics', api_key)
    return 'metrics' if load is not None or refused else 'get_load'


def drain_server(url: str, settings: DrainSettings, source: str = 'auto', api_key: Optional[str] = None) -> 'DrainResult':
    """The drain of the server at ``url``, read from its ``source`` (``auto``: see ``pick_source``)."""
    chosen = pick_source(url, source, api_key)
    return Drainer(lambda: read_load(url, chosen, api_key), settings, chosen).run()


def at_bound(in_flight: int, policy: str) -> str:
    """How a drain that reached drain_timeout is said everywhere (the module's message, the roll's table)."""
    return '%d in flight at drain_timeout (%s)' % (in_flight, policy or 'wait')


@dataclass
class DrainResult:
    outcome: str  # idle, proceed, fail
    seconds: float
    in_flight_at_start: Optional[int]
    peak: Optional[int]
    still_running: Optional[int]
    reason: str
    readings: List[Reading] = field(default_factory=list)
    source: str = ''
    policy: str = ''
    at_timeout: Optional[int] = None  # in flight at the first reading past ``timeout``; None: drained before it

    @property
    def past_timeout(self) -> bool:
        """The drain went on past ``timeout`` (only with policy ``wait``: the others decide at the bound)."""
        return self.at_timeout is not None

    @property
    def drained(self) -> Optional[int]:
        """Requests that finished while the drain waited: what was in flight when it began, less what it left."""
        if self.in_flight_at_start is None:
            return None
        return max(0, self.in_flight_at_start - (self.still_running or 0))

    def to_json(self, keep_readings: int = 20):
        data = asdict(self)
        data['readings'] = [asdict(r) for r in self.readings[-keep_readings:]]
        data['reading_count'] = len(self.readings)
        data['drained'] = self.drained
        return data


class Drainer:
    """Reads until ``decide`` says stop. ``read`` returns (Load or None, error, refused)."""

    def __init__(self, read: Callable, settings: DrainSettings, source: str, clock=time.monotonic, sleep=time.sleep):
        self.read = read
        self.settings = settings
        self.source = source
        self.clock = clock
        self.sleep = sleep

    def run(self) -> DrainResult:
        start = self.clock()
        readings: List[Reading] = []
        while True:
            load, error, refused = self.read()
            at = round(self.clock() - start, 3)
            if load is not None:
                readings.append(Reading(at, load.running, load.queued, self.source))
            else:
                readings.append(Reading(at, source=self.source, error=error, refused=refused))
            decision = decide(readings, self.settings)
            if decision.action != 'continue':
                break
            self.sleep(self.settings.pause_after(readings[-1]))
        busy = [r.busy for r in readings if r.busy is not None]
        bound = next((r for r in readings if r.at >= self.settings.timeout), None)
        at_timeout = None if bound is None or (decision.action == 'idle' and bound is readings[-1]) else bound.busy
        seconds = round(self.clock() - start, 3)
        reason = decision.reason
        if decision.action == 'idle' and at_timeout is not None:
            reason = '%s; %s in flight when drain_timeout %.0fs passed, waited %.1fs more (policy %s)' % (
                reason, at_timeout, self.settings.timeout, seconds - bound.at, self.settings.policy)
        return DrainResult(decision.action, seconds, readings[0].busy, max(busy) if busy else None,
                           decision.still_running, reason, readings, self.source, self.settings.policy, at_timeout)
