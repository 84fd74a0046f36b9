# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The gateway's control plane: its worker API, and what the gateway says about each worker.

smg (the SGLang model gateway, ``lightseekorg/smg``) and sglang-router 0.3.2+ serve ``GET /workers`` (every worker:
``id``, ``url``, ``worker_type``, ``status`` - ``pending``, ``ready``, ``not_ready``, ``failed``, ``draining`` -,
``is_healthy``, ``load``, ``labels`` with the ``version`` the worker reported), ``POST /workers`` (register one,
answered 202 and done in the background) and ``DELETE /workers/{id}`` (202: the worker becomes ``draining`` at once, so
no policy selects it any more, and leaves the registry after ``drain_settle_secs``; requests already routed to it run
on). The routes need an admin key of ``--control-plane-api-keys`` (or the gateway's ``--api-key`` when it has no
control-plane keys). Releases without these routes answer 404.

Python 3.9+, standard library only.
"""

from __future__ import annotations

import json
import socket
import ssl
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Tuple
from urllib.error import HTTPError, URLError
from urllib.request import HTTPSHandler, ProxyHandler, Request, build_opener

from ansible_collections.llmops.sglang.plugins.module_utils.gateway import _metrics as metrics

STATUSES = ('pending', 'ready', 'not_ready', 'failed', 'draining')
WORKER_TYPES = ('regular', 'prefill', 'decode')
USER_AGENT = 'llmops.sglang gateway control'


class ControlPlaneError(Exception):
    """A control-plane call that did not work. ``kind``: ``no_api``, ``unauthorized``, ``unreachable``, ``refused``
    (the gateway said no) or ``bad_answer``."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def same_url(a: str, b: str) -> bool:
    """Whether two worker URLs name the same server (scheme and host case, a trailing slash do not count)."""
    return normalize(a) == normalize(b)


def normalize(url: str) -> str:
    url = (url or '').strip().rstrip('/')
    scheme, sep, rest = url.partition('://')
    if not sep:
        return url.lower()
    host, slash, path = rest.partition('/')
    return '%s://%s%s%s' % (scheme.lower(), host.lower(), slash, path)


@dataclass
class GatewayWorker:
    """One worker as the gateway sees it. ``circuit`` comes from the gateway's metrics (None when not read)."""

    url: str
    id: str = ''
    worker_type: str = 'regular'
    status: str = 'pending'
    healthy: bool = False
    load: int = 0
    version: Optional[str] = None
    model: Optional[str] = None
    bootstrap_port: Optional[int] = None
    circuit: Optional[str] = None

    @property
    def in_rotation(self) -> bool:
        """The gateway may send it new requests: ready, healthy and its circuit not open."""
        return self.status == 'ready' and self.healthy and self.circuit != 'open'

    @property
    def state(self) -> str:
        """One word for a table: ``ready``, ``circuit open``, ``draining``, ``not ready``, ``pending``, ``failed``."""
        if self.status == 'ready' and self.circuit == 'open':
            return 'circuit open'
        if self.status == 'ready' and not self.healthy:
            return 'unhealthy'
        return self.status.replace('_', ' ')

    def to_json(self) -> Dict[str, Any]:
        data = asdict(self)
        data.update(in_rotation=self.in_rotation, state=self.state)
        return data


def parse_worker(item: Dict[str, Any]) -> GatewayWorker:
    if not isinstance(item, dict) or not isinstance(item.get('url'), str):
        raise ValueError('a worker entry without a url: %r' % (item,))
    labels = item.get('labels') if isinstance(item.get('labels'), dict) else {}
    status = str(item.get('status') or ('ready' if item.get('is_healthy') else 'pending')).lower()
    port = item.get('bootstrap_port')
    return GatewayWorker(
        url=item['url'], id=str(item.get('id') or ''), worker_type=str(item.get('worker_type') or 'regular').lower(),
        status=status, healthy=bool(item.get('is_healthy')), load=int(item.get('load') or 0),
        version=labels.get('version'), model=item.get('model_id'),
        bootstrap_port=port if isinstance(port, int) else None)


def parse_workers(data: Any) -> List[GatewayWorker]:
    """``GET /workers``'s answer (``{"workers": [...], "total": n}``) as GatewayWorker entries."""
    if not isinstance(data, dict) or not isinstance(data.get('workers'), list):
        raise ValueError('not a worker list (no "workers" array): %s' % (json.dumps(data)[:200],))
    return [parse_worker(item) for item in data['workers']]


def _opener(https: bool, validate_certs: bool):
    # Control-plane and worker calls stay inside the serving network: never through an HTTP proxy of the environment.
    handlers = [ProxyHandler({})]
    if https and not validate_certs:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        handlers.append(HTTPSHandler(context=context))
    return build_opener(*handlers)


def http_call(method: str, url: str, body: Any = None, key: Optional[str] = None, timeout: float = 10.0,
              validate_certs: bool = True, accept: str = 'application/json') -> Tuple[Optional[int], str, Optional[str]]:
    """One HTTP call; never raises. Returns (status or None, body text, error or None); ``refused`` errors start with
    ``refused:``."""
    headers = {'Accept': accept, 'User-Agent': USER_AGENT}
    data = None
    if body is not None:
        data = json.dumps(body).encode('utf-8')
        headers['Content-Type'] = 'application/json'
    if key:
        headers['Authorization'] = 'Bearer %s' % key
    try:
        opener = _opener(url.lower().startswith('https:'), validate_certs)
        with opener.open(Request(url, data=data, headers=headers, method=method), timeout=timeout) as resp:
            return resp.getcode(), resp.read(4 * 1024 * 1024).decode('utf-8', 'replace'), None
    except HTTPError as exc:
        try:
            text = exc.read(64 * 1024).decode('utf-8', 'replace')
        finally:
            exc.close()
        return exc.code, text, None
    except URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            return None, '', 'refused: %s' % (exc.reason,)
        return None, '', '%s' % (exc.reason,)
    except (socket.timeout, TimeoutError):
        return None, '', 'timed out after %.1fs' % timeout
    except (OSError, ValueError) as exc:
        prefix = 'refused: ' if isinstance(exc, ConnectionRefusedError) else ''
        return None, '', '%s%s: %s' % (prefix, type(exc).__name__, exc)


class ControlPlane:
    """The worker API of one gateway. ``metrics_url`` (its Prometheus endpoint) adds each worker's circuit state."""

    def __init__(self, url: str, admin_key: Optional[str] = None, timeout: float = 10.0,
                 metrics_url: Optional[str] = None, validate_certs: bool = True, call=http_call):
        self.url = url.rstrip('/')
        self.key = admin_key
        self.timeout = timeout
        self.metrics_url = metrics_url
        self.validate_certs = validate_certs
        self.call = call

    def _json(self, method: str, path: str, body: Any = None) -> Tuple[int, Any]:
        status, text, error = self.call(method, self.url + path, body=body, key=self.key, timeout=self.timeout,
                                        validate_certs=self.validate_certs)
        where = '%s %s%s' % (method, self.url, path)
        if status is None:
            raise ControlPlaneError('unreachable', '%s: the gateway did not answer (%s); is its unit running and '
                                    'listening there?' % (where, error))
        if status in (401, 403):
            raise ControlPlaneError('unauthorized', '%s answered %s: the admin key is missing or wrong; give the key of an '
                                    'admin entry of --control-plane-api-keys (sglang_gateway_admin_key)' % (where, status))
        try:
            data = json.loads(text) if text.strip() else None
        except ValueError:
            data = text[:300]
        return status, data

    def workers(self) -> List[GatewayWorker]:
        """Every worker the gateway holds, with its circuit state when the metrics URL is known."""
        status, data = self._json('GET', '/workers')
        if status in (404, 405):
            raise ControlPlaneError('no_api', 'GET %s/workers answered %s: this gateway release has no control-plane worker '
                                    'API (smg 1.x and sglang-router 0.3.2 or later have it); install one of those '
                                    '(sglang_gateway_package, sglang_gateway_version)' % (self.url, status))
        if status != 200:
            raise ControlPlaneError('bad_answer', 'GET %s/workers answered %s: %s' % (self.url, status, data))
        try:
            found = parse_workers(data)
        except ValueError as exc:
            raise ControlPlaneError('bad_answer', 'GET %s/workers: %s' % (self.url, exc))
        if self.metrics_url:
            states = self.circuit_states()
            for worker in found:
                worker.circuit = next((s for u, s in states.items() if same_url(u, worker.url)), None)
        return found

    def circuit_states(self) -> Dict[str, str]:
        status, text, _error = self.call('GET', self.metrics_url, timeout=self.timeout, validate_certs=self.validate_certs,
                                         accept='text/plain')
        return metrics.circuits(text) if status == 200 else {}

    def add(self, spec: Dict[str, Any]) -> Dict[str, Any]:
        """Register one worker (``url``, ``worker_type``, ``bootstrap_port``, ``api_key``); 409 (already there) is fine."""
        status, data = self._json('POST', '/workers', spec)
        if status in (200, 201, 202, 409):
            return data if isinstance(data, dict) else {}
        raise ControlPlaneError('refused', 'POST %s/workers for %s answered %s: %s' % (self.url, spec.get('url'), status, data))

    def remove(self, worker_id: str) -> Dict[str, Any]:
        """Take one worker out (``draining`` at once, gone after the gateway's settle time); 404 (gone) is fine."""
        status, data = self._json('DELETE', '/workers/%s' % worker_id)
        if status in (200, 202, 204, 404):
            return data if isinstance(data, dict) else {}
        raise ControlPlaneError('refused', 'DELETE %s/workers/%s answered %s: %s' % (self.url, worker_id, status, data))
