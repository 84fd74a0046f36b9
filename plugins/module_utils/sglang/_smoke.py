# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One small streamed generation request to an SGLang server, timed: the proof that a ready server serves.

A readiness wait proves that SGLang started; it does not prove that the server generates now (a server whose
scheduler died can keep answering ``GET /health``). ``run_smoke()`` sends one greedy request for a few tokens
to SGLang's native ``/generate`` or its OpenAI ``/v1/completions`` / ``/v1/chat/completions``, streamed, and
measures the time to the first token and to the end, within one overall time bound.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from dataclasses import asdict, dataclass, field
from http.client import HTTPConnection, HTTPException, HTTPSConnection
from typing import Optional
from urllib.parse import urlsplit

ENDPOINTS = {
    'generate': '/generate',
    'completions': '/v1/completions',
    'chat_completions': '/v1/chat/completions',
}
USER_AGENT = 'llmops.sglang.sglang_smoke'
# SGLang's FAKE_BOOTSTRAP_HOST (disaggregation/utils.py): a request to a prefill or decode server of a PD deployment that
# carries it needs no peer (SGLang's own warmup and /health_generate send it); one without bootstrap information fails.
FAKE_BOOTSTRAP = {'bootstrap_host': '2.2.2.2', 'bootstrap_room': 0}
RECEIVED_LIMIT = 2048  # bytes of the answer kept for the report


@dataclass
class SmokeRequest:
    """What to send. ``timeout`` bounds the whole exchange (model lookup, connect, every token)."""

    url: str
    endpoint: str = 'generate'
    prompt: str = 'The capital of France is'
    max_tokens: int = 8
    timeout: float = 60.0
    api_key: Optional[str] = None
    model: Optional[str] = None
    validate_certs: bool = True
    disaggregation_mode: str = 'null'  # SGLang's --disaggregation-mode: prefill and decode servers get FAKE_BOOTSTRAP

    @property
    def path(self):
        return ENDPOINTS[self.endpoint]

    def body(self, model):
        """The JSON body: greedy (temperature 0), a few tokens, streamed."""
        pd = dict(FAKE_BOOTSTRAP) if self.disaggregation_mode in ('prefill', 'decode') else {}
        if self.endpoint == 'generate':
            return dict({'text': self.prompt, 'stream': True,
                         'sampling_params': {'max_new_tokens': self.max_tokens, 'temperature': 0}}, **pd)
        body = dict({'model': model or 'default', 'max_tokens': self.max_tokens, 'temperature': 0, 'stream': True,
                     'stream_options': {'include_usage': True}}, **pd)
        if self.endpoint == 'chat_completions':
            body['messages'] = [{'role': 'user', 'content': self.prompt}]
        else:
            body['prompt'] = self.prompt
        return body

    def headers(self):
        headers = {'Content-Type': 'application/json', 'Accept': 'text/event-stream', 'User-Agent': USER_AGENT}
        if self.api_key:
            headers['Authorization'] = 'Bearer %s' % self.api_key
        return headers


@dataclass
class SmokeResult:
    """What came back. ``ok`` only when at least one token arrived and the stream ended within the bound."""

    ok: bool = False
    url: str = ''
    endpoint: str = ''
    status: Optional[int] = None
    ttft: Optional[float] = None
    total: Optional[float] = None
    tokens: int = 0
    model: Optional[str] = None
    text: str = ''
    error: Optional[str] = None
    sent: dict = field(default_factory=dict)
    received: str = ''

    def to_json(self):
        return asdict(self)

    @classmethod
    def from_json(cls, data):
        return cls(**dict((k, v) for k, v in (data or {}).items() if k in cls.__dataclass_fields__))

    def message(self):
        """One line for a person: what was sent, what came back."""
        sent = '%s %s %s' % (self.sent.get('method', 'POST'), self.sent.get('url', self.url), json.dumps(self.sent.get('body')))
        if self.ok:
            return ('smoke request answered by %s: first token after %.3fs, %d token(s) in %.3fs (%s)'
                    % (self.model or 'an unnamed model', self.ttft, self.tokens, self.total, sent))
        got = ('HTTP %s' % self.status if self.status else 'no HTTP answer')
        if self.received:
            got += ', received %r' % _clip(self.received, 300)
        return 'smoke request failed: %s; sent %s; %s' % (self.error, sent, got)


def _clip(text, limit):
    return text if len(text) <= limit else text[:limit] + '...'


class _Deadline:
    def __init__(self, seconds, clock):
        self.clock = clock
        self.start = clock()
        self.end = self.start + seconds

    def left(self):
        return self.end - self.clock()

    def elapsed(self, since=None):
        return round(self.clock() - (self.start if since is None else since), 4)


class SmokeTimeout(Exception):
    pass


def _connection(url, deadline, validate_certs):
    parts = urlsplit(url)
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise ValueError('url %r must look like http://HOST:PORT' % url)
    timeout = max(0.05, deadline.left())
    if parts.scheme == 'https':
        ctx = ssl.create_default_context()
        if not validate_certs:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return HTTPSConnection(parts.hostname, parts.port or 443, timeout=timeout, context=ctx)
    return HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)


def _set_timeout(conn, deadline):
    left = deadline.left()
    if left <= 0:
        raise SmokeTimeout()
    if conn.sock is not None:
        conn.sock.settimeout(left)


def lookup_model(req, deadline):
    """The first model id GET /v1/models lists (the server's --served-model-name), or None."""
    conn = _connection(req.url, deadline, req.validate_certs)
    try:
        headers = dict((k, v) for k, v in req.headers().items() if k != 'Content-Type')
        headers['Accept'] = 'application/json'
        conn.request('GET', urlsplit(req.url).path.rstrip('/') + '/v1/models', headers=headers)
        _set_timeout(conn, deadline)
        resp = conn.getresponse()
        data = resp.read(65536)
        if resp.status != 200:
            return None, resp.status
        ids = [m.get('id') for m in json.loads(data.decode('utf-8', 'replace')).get('data') or [] if isinstance(m, dict)]
        return (str(ids[0]) if ids and ids[0] else None), resp.status
    except (ValueError, AttributeError):
        return None, None
    finally:
        conn.close()


class StreamReader:
    """Reads server-sent events (``data: {...}``) and counts tokens, in SGLang's native or OpenAI form."""

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.text = ''
        self.tokens = 0
        self.usage_tokens = None
        self.model = None
        self.done = False
        self.errors = []

    def feed_line(self, line):
        """One line of the stream; returns True when it carried new generated text."""
        line = line.strip()
        if not line.startswith('data:'):
            return False
        data = line[5:].strip()
        if data == '[DONE]':
            self.done = True
            return False
        try:
            event = json.loads(data)
        except ValueError:
            self.errors.append(_clip(data, 200))
            return False
        if not isinstance(event, dict):
            return False
        if event.get('error') or event.get('object') == 'error':
            self.errors.append(_clip(json.dumps(event.get('error') or event), 300))
            return False
        return self._event(event)

    def _event(self, event):
        if self.endpoint == 'generate':
            text = event.get('text') or ''
            meta = event.get('meta_info') or {}
            grew = len(text) > len(self.text) or (meta.get('completion_tokens') or 0) > self.tokens
            self.text = text
            self.tokens = meta.get('completion_tokens') if isinstance(meta.get('completion_tokens'), int) else self.tokens + grew
            return bool(grew)
        self.model = event.get('model') or self.model
        usage = event.get('usage')
        if isinstance(usage, dict) and isinstance(usage.get('completion_tokens'), int):
            self.usage_tokens = usage['completion_tokens']
        piece = ''
        for choice in event.get('choices') or []:
            piece += (choice.get('delta') or {}).get('content') or choice.get('text') or ''
        if piece:
            self.text += piece
            self.tokens += 1
        return bool(piece)

    def token_count(self):
        return self.usage_tokens if self.usage_tokens is not None else self.tokens


def run_smoke(req, clock=time.monotonic):
    """Send the request; never raises. Returns a SmokeResult (``ok`` False with ``error`` on any failure or hang)."""
    if req.endpoint not in ENDPOINTS:
        raise ValueError('endpoint must be one of %s, got %r' % (', '.join(sorted(ENDPOINTS)), req.endpoint))
    deadline = _Deadline(req.timeout, clock)
    res = SmokeResult(url=req.url.rstrip('/') + req.path, endpoint=req.endpoint)
    res.sent = {'method': 'POST', 'url': res.url, 'body': req.body(req.model)}
    sent_at = None  # ttft and total count from sending the generation request, not from the model lookup
    try:
        model = req.model
        if model is None:
            model, status = lookup_model(req, deadline)
            if status in (401, 403):
                res.status = status
                res.error = ('GET /v1/models answered %d: the server wants an API key (set api_key, the role\'s '
                             'sglang_service_api_key)' % status)
                res.total = deadline.elapsed()
                return res
        res.model = model
        res.sent['body'] = req.body(model)
        sent_at = clock()
        _stream(req, res, deadline, sent_at)
    except (SmokeTimeout, socket.timeout, TimeoutError):
        res.error = ('no complete answer within %gs%s: the request hung (a server that is ready but cannot generate, '
                     'for example a dead scheduler)' % (req.timeout, _progress(res)))
    except (OSError, HTTPException, ValueError) as exc:
        res.error = '%s: %s' % (type(exc).__name__, exc)
    res.total = deadline.elapsed(sent_at)
    return res


def _progress(res):
    if res.status is None:
        return ', not even the HTTP status line'
    if res.ttft is None:
        return ', HTTP %d but not one token' % res.status
    return ', %d token(s) and then nothing' % res.tokens


def _stream(req, res, deadline, sent_at):
    conn = _connection(req.url, deadline, req.validate_certs)
    try:
        payload = json.dumps(res.sent['body']).encode('utf-8')
        conn.request('POST', urlsplit(req.url).path.rstrip('/') + req.path, body=payload, headers=req.headers())
        _set_timeout(conn, deadline)
        resp = conn.getresponse()
        res.status = resp.status
        if resp.status != 200:
            res.received = resp.read(RECEIVED_LIMIT).decode('utf-8', 'replace')
            res.error = 'HTTP %d from %s%s' % (resp.status, res.url, ' (wrong or missing API key)' if resp.status in (401, 403) else '')
            return
        reader = StreamReader(req.endpoint)
        _read_events(conn, resp, reader, res, deadline, sent_at)
        res.text = reader.text
        res.tokens = reader.token_count()
        res.model = reader.model or res.model
        if reader.errors:
            res.error = 'the stream reported an error: %s' % reader.errors[0]
        elif res.ttft is None:
            res.error = 'the stream ended without a single token'
        else:
            res.ok = True
    finally:
        conn.close()


def _read_events(conn, resp, reader, res, deadline, sent_at):
    received = []
    size = 0
    while not reader.done:
        _set_timeout(conn, deadline)
        raw = resp.readline(65536)
        if not raw:
            break
        if size < RECEIVED_LIMIT:
            received.append(raw.decode('utf-8', 'replace'))
            size += len(raw)
            res.received = ''.join(received)[:RECEIVED_LIMIT]
        if reader.feed_line(raw.decode('utf-8', 'replace')) and res.ttft is None:
            res.ttft = deadline.elapsed(sent_at)
        res.tokens = reader.token_count()
