# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Prefill/decode (PD) disaggregation of the SGLang stand-in (test tooling, NOT SGLang).

SGLang's behaviour, read in SGLang 0.5.9's source and kept here:

* ``--disaggregation-mode prefill|decode`` (``null``: no PD), ``--disaggregation-bootstrap-port`` (8998).
* The prefill server runs the KV bootstrap server (``disaggregation/common/conn.py`` ``CommonKVBootstrapServer``) on
  ``--host``:bootstrap port: ``GET /health`` answers ``OK``; ``PUT /route`` registers a prefill rank (``role``,
  ``attn_tp_rank``, ``attn_dp_rank``, ``pp_rank``, ``rank_ip``, ``rank_port``, ...); ``GET /route`` with
  ``engine_rank``, ``target_dp_group`` and ``target_pp_rank`` all ``-1`` answers the prefill's parallel sizes, with a
  rank's numbers that rank's ``rank_ip``/``rank_port``; without them 400 ``Missing inputs for bootstrap server.``
* A request of a PD gateway carries ``bootstrap_host``, ``bootstrap_port`` and ``bootstrap_room`` (smg's
  ``pd_router.rs`` sends the same body to a prefill and a decode server at once). The prefill runs it with
  ``max_new_tokens=1`` and keeps it in flight until the decode server of the same room has bootstrapped (sent where
  its KV cache goes), then answers; after ``SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT`` (300 s) without that decode it
  aborts the request (500, ``Prefill bootstrap failed``). The decode server looks the prefill up at
  ``bootstrap_host:bootstrap_port/route`` (without ``bootstrap_port``: its own ``--disaggregation-bootstrap-port``,
  as SGLang's scheduler fills it in), waits for the KV cache (at most ``SGLANG_DISAGGREGATION_WAITING_TIMEOUT``,
  300 s) and then decodes and streams.
* ``bootstrap_host`` ``2.2.2.2`` (``FAKE_BOOTSTRAP_HOST``: the warmup, ``/health_generate``) needs no peer.

The stand-in's own:

* The KV transfer. SGLang moves the KV cache over RDMA (Mooncake, NIXL) after a ZMQ handshake at the rank's address;
  the stand-in's decode sends ``POST /llmops-standin/kv`` with the room and its SGLang version to the prefill's
  bootstrap server (at ``bootstrap_host:bootstrap_port``, where SGLang's decode first looks the prefill up), which
  answers with the prefill's version once the prefill request of that room is running. No KV cache is moved.
* A pair of different SGLang versions. SGLang does not notice (a mixed pair can answer wrongly with status 200); the
  stand-in serves it too, and counts it: ``llmops_standin:pd_transfers_total`` and
  ``llmops_standin:pd_mixed_version_transfers_total`` on the decode's ``/metrics``, so a test can hold that no mixed
  pair ever served behind the gateway.

Standard library only; Python 3.9+.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

MODES = ('null', 'prefill', 'decode')
FAKE_BOOTSTRAP_HOST = '2.2.2.2'  # SGLang's disaggregation/utils.py
DEFAULT_BOOTSTRAP_PORT = 8998
BOOTSTRAP_TIMEOUT = 300.0  # SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT
WAITING_TIMEOUT = 300.0  # SGLANG_DISAGGREGATION_WAITING_TIMEOUT
KV_PATH = '/llmops-standin/kv'


class PDError(Exception):
    """A PD request that SGLang would abort; ``status`` is the HTTP status SGLang gives it."""

    def __init__(self, message: str, status: int = 500):
        super().__init__(message)
        self.status = status


def bootstrap_of(data: dict):
    """(host, port, room) of a request body (None where absent); a batch's lists give their first entries."""
    def first(value):
        return value[0] if isinstance(value, list) and value else value
    return first(data.get('bootstrap_host')), first(data.get('bootstrap_port')), first(data.get('bootstrap_room'))


class Room:
    """One bootstrap room: the prefill request and the decode's handshake, each waiting for the other."""

    def __init__(self):
        self.prefill = threading.Event()
        self.decode = threading.Event()
        self.decode_version: Optional[str] = None


class PD:
    """The PD side of one stand-in server (``mode`` prefill or decode)."""

    def __init__(self, mode: str, host: str, bootstrap_port: int, version: str, environ=None,
                 bootstrap_timeout: Optional[float] = None, waiting_timeout: Optional[float] = None):
        environ = environ or {}
        self.mode = mode
        self.host = host
        self.bootstrap_port = bootstrap_port
        self.version = version
        self.bootstrap_timeout = bootstrap_timeout if bootstrap_timeout is not None else float(
            environ.get('SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT') or BOOTSTRAP_TIMEOUT)
        self.waiting_timeout = waiting_timeout if waiting_timeout is not None else float(
            environ.get('SGLANG_DISAGGREGATION_WAITING_TIMEOUT') or WAITING_TIMEOUT)
        self.lock = threading.Lock()
        self.rooms = {}
        self.table = {}  # SGLang's prefill_port_table: dp group -> tp rank -> pp rank -> {rank_ip, rank_port}
        self.sizes = {'prefill_attn_tp_size': None, 'prefill_dp_size': None, 'prefill_pp_size': None,
                      'prefill_page_size': None}
        self.transfers = 0
        self.mixed = 0
        self.server = None

    # ------------------------------------------------------------------ prefill: the bootstrap server

    def start(self) -> None:
        """On a prefill server: the bootstrap server, with this server's one rank registered (as its scheduler does)."""
        if self.mode != 'prefill' or self.server is not None:
            return
        handler = type('BootstrapHandler', (BootstrapHandler,), {'pd': self})
        host = self.host if self.host not in ('', '0.0.0.0') else '0.0.0.0'
        self.server = ThreadingHTTPServer((host, self.bootstrap_port), handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={'poll_interval': 0.1}, daemon=True).start()
        self.register({'role': 'Prefill', 'attn_tp_size': 1, 'attn_tp_rank': 0, 'attn_dp_size': 1, 'attn_dp_rank': 0,
                       'pp_size': 1, 'pp_rank': 0, 'system_dp_size': 1, 'system_dp_rank': 0, 'rank_ip': self.host,
                       'rank_port': self.bootstrap_port, 'page_size': 1})

    def register(self, data: dict) -> None:
        """SGLang's ``PUT /route``."""
        with self.lock:
            for key, size in (('prefill_attn_tp_size', 'attn_tp_size'), ('prefill_pp_size', 'pp_size'),
                              ('prefill_page_size', 'page_size')):
                if self.sizes[key] is None:
                    self.sizes[key] = data.get(size)
            if self.sizes['prefill_dp_size'] is None:
                self.sizes['prefill_dp_size'] = data['attn_dp_size'] if data.get('system_dp_size') == 1 else data.get('system_dp_size')
            if data.get('role') == 'Prefill':
                group = data['attn_dp_rank'] if data.get('system_dp_size') == 1 else data['system_dp_rank']
                self.table.setdefault(group, {}).setdefault(data['attn_tp_rank'], {})[data['pp_rank']] = {
                    'rank_ip': data['rank_ip'], 'rank_port': int(data['rank_port'])}

    def route(self, query: dict):
        """SGLang's ``GET /route``: (status, body)."""
        try:
            rank, group, pp = (int(query[k]) for k in ('engine_rank', 'target_dp_group', 'target_pp_rank'))
        except (KeyError, ValueError):
            return 400, 'Missing inputs for bootstrap server.'
        if (rank, group, pp) == (-1, -1, -1):
            return 200, dict(self.sizes)
        with self.lock:
            info = self.table.get(group, {}).get(rank, {}).get(pp)
        return (200, info) if info is not None else (404, 'Bootstrap info not Found')

    def _room(self, room) -> Room:
        with self.lock:
            return self.rooms.setdefault(room, Room())

    def accept_decode(self, room, version: str):
        """A decode's handshake for ``room`` (stand-in transfer): waits until the prefill request of the room runs."""
        entry = self._room(room)
        entry.decode_version = version
        entry.decode.set()
        if not entry.prefill.wait(self.waiting_timeout):
            return 504, {'error': 'no prefill request of bootstrap room %s arrived within %.0fs' % (room, self.waiting_timeout)}
        return 200, {'version': self.version, 'room': room}

    def prefill(self, bootstrap) -> None:
        """A prefill request: in flight until the decode of its room bootstrapped (SGLang's KVPoll.Bootstrapping)."""
        host, _port, room = bootstrap
        if host == FAKE_BOOTSTRAP_HOST:
            return
        if room is None:
            raise PDError('a prefill server serves requests with bootstrap_room (a PD gateway sends them)', 400)
        entry = self._room(room)
        entry.prefill.set()
        try:
            if not entry.decode.wait(self.bootstrap_timeout):
                raise PDError('Prefill bootstrap failed for request bootstrap_room=%s: timed out after %.1fs in '
                              'KVPoll.Bootstrapping' % (room, self.bootstrap_timeout))
        finally:
            with self.lock:
                self.rooms.pop(room, None)

    # ------------------------------------------------------------------ decode

    def decode(self, bootstrap, call=None) -> None:
        """A decode request: look the prefill up at its bootstrap server, take its KV cache (stand-in transfer)."""
        host, port, room = bootstrap
        if host == FAKE_BOOTSTRAP_HOST:
            return
        if host is None or room is None:
            raise PDError('a decode server serves requests with bootstrap_host and bootstrap_room (a PD gateway sends '
                          'them)', 400)
        call = call or http_json
        # SGLang's scheduler: a request without bootstrap_port uses the server's own --disaggregation-bootstrap-port
        port = port if port is not None else self.bootstrap_port
        base = 'http://%s:%s' % (('[%s]' % host) if ':' in str(host) else host, port)
        try:
            call('GET', base + '/route?engine_rank=-1&target_dp_group=-1&target_pp_rank=-1', None, 10)
            call('GET', base + '/route?engine_rank=0&target_dp_group=0&target_pp_rank=0', None, 10)
            answer = call('POST', base + KV_PATH, {'room': room, 'version': self.version}, self.waiting_timeout + 5)
        except (OSError, ValueError) as exc:
            raise PDError('KV transfer failed for bootstrap_room=%s from %s: %s' % (room, base, exc))
        with self.lock:
            self.transfers += 1
            if str(answer.get('version')) != str(self.version):
                self.mixed += 1

    def metrics_lines(self) -> list:
        if self.mode != 'decode':
            return []
        lines = ['# llmops-standin: PD transfers of the SGLang stand-in (stand-in extension, NOT an SGLang metric)']
        with self.lock:
            figures = (('llmops_standin:pd_transfers_total', 'KV transfers taken from a prefill server.', self.transfers),
                       ('llmops_standin:pd_mixed_version_transfers_total',
                        'KV transfers from a prefill server of another SGLang version.', self.mixed))
        for name, doc, value in figures:
            lines += ['# HELP %s %s' % (name, doc), '# TYPE %s counter' % name, '%s %.1f' % (name, value)]
        return lines


def http_json(method: str, url: str, body, timeout: float):
    data = None if body is None else json.dumps(body).encode('utf-8')
    request = urllib.request.Request(url, data=data, method=method, headers={'content-type': 'application/json'})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # nosec: the test fleet's own addresses
            text = response.read().decode('utf-8')
    except urllib.error.HTTPError as exc:
        raise ValueError('%s %s answered %s' % (method, url, exc.code))
    return json.loads(text) if text.strip().startswith('{') else {}


class BootstrapHandler(BaseHTTPRequestHandler):
    """SGLang's bootstrap server (aiohttp there), plus the stand-in's transfer path."""

    pd: PD = None
    protocol_version = 'HTTP/1.1'

    def log_message(self, format, *args):  # noqa: A002
        pass

    def _answer(self, status: int, body) -> None:
        payload = (json.dumps(body) if isinstance(body, dict) else str(body)).encode('utf-8')
        self.send_response(status)
        self.send_header('content-type', 'application/json' if isinstance(body, dict) else 'text/plain')
        self.send_header('content-length', str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _body(self) -> dict:
        length = int(self.headers.get('content-length') or 0)
        try:
            data = json.loads(self.rfile.read(length).decode('utf-8') or '{}') if length else {}
        except ValueError:
            data = {}
        return data if isinstance(data, dict) else {}

    def _query(self) -> dict:
        query = self.path.split('?', 1)[1] if '?' in self.path else ''
        return dict(part.split('=', 1) for part in query.split('&') if '=' in part)

    def do_GET(self):
        path = self.path.split('?', 1)[0]
        if path == '/health':
            self._answer(200, 'OK')
        elif path == '/route':
            self._answer(*self.pd.route(self._query()))
        else:
            self._answer(404, 'Not Found')

    def do_PUT(self):
        if self.path.split('?', 1)[0] == '/route':
            self.pd.register(self._body())
            self._answer(200, 'OK')
        else:
            self._answer(405, 'Method not allowed')

    def do_POST(self):
        if self.path.split('?', 1)[0] == KV_PATH:
            data = self._body()
            self._answer(*self.pd.accept_decode(data.get('room'), str(data.get('version'))))
        else:
            self._answer(405, 'Method not allowed')
