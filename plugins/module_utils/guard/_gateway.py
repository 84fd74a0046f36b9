# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""This server in and out of the SGLang model gateway's rotation, for the guard: out before it acts (no new request
is routed to a server being restarted or stopped), back in only after a proven start, and then proven to be routed
to. The moves are the gateway package's (``gateway/_rotation``: change and wait until the gateway reports it;
``gateway/_route``: the route proof); this file only says what the guard asks of them for its one worker.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import ControlPlane, ControlPlaneError
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._reconcile import Wanted
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._rotation import Rotation, prove_all
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._route import read_finished

POLL = 1.0
ROUTE_ATTEMPTS = 8


@dataclass
class RotationResult:
    """What one move did: ``ok``, the worker's state in the gateway afterwards, and why in a sentence."""

    ok: bool
    state: str = ''
    detail: str = ''

    def to_json(self):
        return asdict(self)


class GatewayRotation:
    """This worker in one gateway (``settings``: the guard's ``GatewaySettings``)."""

    def __init__(self, settings, plane=None, clock=time.monotonic, sleep=time.sleep):
        self.settings = settings
        self.rotation = Rotation(plane or ControlPlane(settings.url, settings.admin_key, settings.timeout), POLL, clock, sleep)
        self.wanted = Wanted(settings.worker_url.rstrip('/'), settings.worker_type)

    def out(self):
        """Take the worker out of rotation and wait until the gateway no longer routes new requests to it."""
        try:
            step = self.rotation.step([self.wanted], 'absent', self.settings.timeout)
        except ControlPlaneError as err:
            return RotationResult(False, 'unknown', str(err))
        if not step.verdict.done:
            return RotationResult(False, 'in rotation', 'the gateway still routes to %s: %s' % (self.wanted.url, step.verdict.summary()))
        return RotationResult(True, 'out of rotation', 'out of %s\'s rotation' % self.settings.url if step.changes.changed
                              else 'was not in %s\'s rotation' % self.settings.url)

    def back(self):
        """Register the worker again, wait until the gateway reports it in rotation, then prove a request through the
        gateway reaches it (with ``--enable-metrics``; without, the gateway's word is all there is)."""
        try:
            step = self.rotation.step([self.wanted], 'present', self.settings.return_timeout,
                                      worker_api_key=self.settings.worker_api_key)
        except ControlPlaneError as err:
            return RotationResult(False, 'unknown', str(err))
        if not step.verdict.done:
            return RotationResult(False, 'not in rotation', 'not back in rotation within %gs: %s'
                                  % (self.settings.return_timeout, step.verdict.summary()))
        if read_finished(self.wanted.url) is None:
            return RotationResult(True, 'in rotation', 'back in rotation (no route proof: the server exports no /metrics)')
        proof = prove_all(self.settings.url, [self.wanted.url], self.settings.api_key, ROUTE_ATTEMPTS, self.settings.timeout)[0]
        if not proof.ok:
            return RotationResult(False, 'in rotation', 'back in rotation, but %s' % proof.reason)
        return RotationResult(True, 'in rotation', 'back in rotation; %s' % proof.reason)
