# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The proof that the gateway routes to a worker: a request through the gateway, answered, that the worker served.

The gateway does not say which worker served a request, and its one header that picks a worker works only with the
``consistent_hashing`` policy. So the proof reads the worker itself: SGLang counts every finished request in
``sglang:num_requests_total`` (``/metrics``, ``--enable-metrics``). Small streamed requests go through the gateway,
one at a time, each with another prompt (so ``cache_aware`` does not pin them to one worker), until the worker's counter
has moved, at most ``attempts`` requests. Every request must succeed; one that fails ends the proof.

Python 3.9+, standard library only.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable, List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.sglang._smoke import SmokeRequest, run_smoke
from ansible_collections.llmops.sglang.plugins.module_utils.gateway import _metrics as metrics
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import http_call


def read_finished(worker_url: str, timeout: float = 5.0, call=http_call) -> Optional[float]:
    status, text, _error = call('GET', worker_url.rstrip('/') + '/metrics', timeout=timeout, accept='text/plain')
    return metrics.finished_requests(text) if status == 200 else None


@dataclass
class RouteResult:
    ok: bool
    worker: str
    requests: int = 0
    finished_before: Optional[float] = None
    finished_after: Optional[float] = None
    ttft: Optional[float] = None
    seconds: float = 0.0
    reason: str = ''
    errors: List[str] = field(default_factory=list)

    def to_json(self):
        return asdict(self)


def prove(worker_url: str, send: Callable[[int], object], read: Callable[[], Optional[float]], attempts: int,
          clock=time.monotonic) -> RouteResult:
    """``send(i)`` sends request i through the gateway and returns a smoke result (``ok``, ``ttft``, ``message()``);
    ``read()`` returns the worker's finished-request counter (None when it exports none)."""
    start = clock()
    res = RouteResult(ok=False, worker=worker_url)
    res.finished_before = read()
    if res.finished_before is None:
        res.reason = ('%s exports no sglang:num_requests_total at /metrics, so no request can be proven to reach it: start '
                      'the server with --enable-metrics (sglang_service_args: {enable-metrics: true})' % worker_url)
        res.seconds = round(clock() - start, 3)
        return res
    for i in range(attempts):
        answer = send(i)
        res.requests += 1
        if not getattr(answer, 'ok', False):
            res.errors.append(answer.message())
            res.reason = 'request %d through the gateway failed: %s' % (res.requests, answer.message())
            break
        res.ttft = answer.ttft
        res.finished_after = read()
        if res.finished_after is not None and res.finished_after > res.finished_before:
            res.ok = True
            res.reason = ('%d request(s) through the gateway answered; %s finished %d more (sglang:num_requests_total)'
                          % (res.requests, worker_url, res.finished_after - res.finished_before))
            break
    else:
        res.reason = ('%d request(s) through the gateway answered, none reached %s (sglang:num_requests_total stayed at '
                      '%g): the gateway does not route to it' % (res.requests, worker_url, res.finished_before))
    res.seconds = round(clock() - start, 3)
    return res


def smoke_sender(gateway_url: str, api_key: Optional[str], timeout: float, max_tokens: int, tag: str,
                 validate_certs: bool = True) -> Callable[[int], object]:
    """Requests through the gateway's ``/generate``, each with its own prompt."""
    def send(i: int):
        prompt = 'llmops.sglang route check %s %d %.6f: the capital of France is' % (tag, i, time.time())
        return run_smoke(SmokeRequest(url=gateway_url, endpoint='generate', prompt=prompt, max_tokens=max_tokens,
                                      timeout=timeout, api_key=api_key, validate_certs=validate_certs))
    return send
