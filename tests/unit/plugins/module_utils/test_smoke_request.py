# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The smoke request (plugins/module_utils/sglang/_smoke.py) against a real local HTTP server that streams tokens:
the SGLang stand-in as a subprocess, replaying real recorded starts (a ready one, a zombie one, with an API key)."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.sglang._smoke import SmokeRequest, StreamReader, run_smoke

REPO = Path(__file__).resolve().parents[4]
STANDIN = REPO / 'tests' / 'standin' / 'sglang_standin.py'
CASES = REPO / 'tests' / 'fixtures' / 'sglang-logs'
READY = CASES / 'rocm-tp2-multimodal-ready-no-cuda-graph'
ZOMBIE = CASES / 'zombie-ready-then-generation-hangs-rocm'


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Standin:
    """The stand-in as a real subprocess on a free port, started and waited for until GET /health is 200."""

    def __init__(self, recording, *args):
        self.port = free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        env = dict(os.environ)
        env.pop('SGLANG_API_KEY', None)
        self.proc = subprocess.Popen([sys.executable, str(STANDIN), '--recording', str(recording), '--port', str(self.port),
                                      '--max-seconds', '0.5', '--served-model-name', 'glm-5'] + list(args),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + '/health', timeout=1) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.05)
        self.stop()
        raise AssertionError('the stand-in did not become ready')

    def stop(self):
        if self.proc.poll() is None:
            # SIGINT: it exits at once (SIGTERM is SGLang's drain, which looks every 5 s; no test here drains)
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def standin():
    started = []

    def start(recording, *args):
        s = Standin(recording, *args)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@pytest.mark.parametrize('endpoint', ['generate', 'completions', 'chat_completions'])
def test_streamed_answer_is_timed_and_counted(standin, endpoint):
    server = standin(READY, '--tokens-per-second', '40')
    res = run_smoke(SmokeRequest(url=server.url, endpoint=endpoint, max_tokens=6, timeout=10))
    assert res.ok, res.error
    assert res.error is None
    assert res.status == 200
    assert res.tokens == 6
    assert res.model == 'glm-5'
    assert res.text == 'This is the SGLang stand-in (test'
    # 40 token/s: the first token after one interval, the last after six
    assert 0.02 <= res.ttft < res.total
    assert 6 / 40.0 * 0.9 <= res.total < 5
    assert res.sent['url'] == server.url + {'generate': '/generate', 'completions': '/v1/completions',
                                            'chat_completions': '/v1/chat/completions'}[endpoint]
    body = res.sent['body']
    assert body['stream'] is True
    if endpoint == 'generate':
        assert body['sampling_params'] == {'max_new_tokens': 6, 'temperature': 0}
    else:
        assert (body['model'], body['max_tokens'], body['temperature']) == ('glm-5', 6, 0)
    assert res.received.startswith('data: {')


def test_decode_rate_follows_the_recording(standin):
    """Without --tokens-per-second the stand-in streams at the recorded single-request decode rate."""
    spec = importlib.util.spec_from_file_location('sglang_standin_rate', STANDIN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rate = mod.recorded_decode_rate((READY / 'server.log').read_bytes())
    server = standin(READY)
    res = run_smoke(SmokeRequest(url=server.url, max_tokens=4, timeout=10))
    assert res.ok, res.error
    assert 4 / rate * 0.9 <= res.total <= 4 / rate + 1.5


def test_zombie_start_hangs_and_fails_naming_the_request(standin):
    server = standin(ZOMBIE)
    with urllib.request.urlopen(server.url + '/health', timeout=2) as r:
        assert r.status == 200  # the readiness wait would call this server ready
    t0 = time.monotonic()
    res = run_smoke(SmokeRequest(url=server.url, max_tokens=4, timeout=1.5))
    took = time.monotonic() - t0
    assert not res.ok
    assert 1.4 <= took < 4
    assert res.status is None
    assert res.ttft is None
    assert res.tokens == 0
    assert res.model == 'glm-5'  # /v1/models still answers: the tokenizer side is alive
    assert 'the request hung' in res.error and 'not even the HTTP status line' in res.error
    assert res.sent == {'method': 'POST', 'url': server.url + '/generate',
                        'body': {'text': 'The capital of France is', 'stream': True,
                                 'sampling_params': {'max_new_tokens': 4, 'temperature': 0}}}
    assert res.message().startswith('smoke request failed: no complete answer within 1.5s')
    assert 'POST %s/generate {"text": "The capital of France is"' % server.url in res.message()


def test_api_key_is_sent_and_a_missing_key_is_named(standin):
    server = standin(READY, '--api-key', 'sk-smoke-4711', '--tokens-per-second', '50')
    without = run_smoke(SmokeRequest(url=server.url, max_tokens=2, timeout=5))
    assert not without.ok
    assert without.status == 401
    assert 'wants an API key' in without.error
    wrong = run_smoke(SmokeRequest(url=server.url, endpoint='completions', model='glm-5', api_key='sk-wrong', max_tokens=2,
                                   timeout=5))
    assert (wrong.ok, wrong.status) == (False, 401)
    assert 'wrong or missing API key' in wrong.error
    assert json.loads(wrong.received) == {'error': 'Unauthorized'}
    right = run_smoke(SmokeRequest(url=server.url, api_key='sk-smoke-4711', max_tokens=2, timeout=5))
    assert right.ok, right.error
    assert right.tokens == 2
    assert 'sk-smoke-4711' not in json.dumps(right.to_json())


def test_refused_connection_fails_at_once():
    res = run_smoke(SmokeRequest(url='http://127.0.0.1:%d' % free_port(), timeout=5))
    assert not res.ok
    assert res.error.startswith('ConnectionRefusedError')
    assert res.total < 2


class _Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    answers = {}

    def log_message(self, format, *args):  # noqa: A002
        pass

    def do_GET(self):
        self._answer()

    def do_POST(self):
        self.rfile.read(int(self.headers.get('content-length') or 0))
        self._answer()

    def _answer(self):
        status, body = self.answers.get(self.path, (404, b'{"detail": "Not Found"}'))
        self.send_response(status)
        self.send_header('content-length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server():
    handler = type('H', (_Handler,), {'answers': {}})
    httpd = ThreadingHTTPServer(('127.0.0.1', 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield 'http://127.0.0.1:%d' % httpd.server_address[1], handler.answers
    httpd.shutdown()
    httpd.server_close()


def test_error_status_and_body_are_reported(server):
    url, answers = server
    answers['/v1/models'] = (200, b'{"object": "list", "data": [{"id": "m"}]}')
    answers['/generate'] = (500, b'{"error": "scheduler is dead"}')
    res = run_smoke(SmokeRequest(url=url, timeout=5))
    assert (res.ok, res.status, res.model) == (False, 500, 'm')
    assert res.error == 'HTTP 500 from %s/generate' % url
    assert res.received == '{"error": "scheduler is dead"}'


def test_stream_without_tokens_or_with_an_error_event_fails(server):
    url, answers = server
    answers['/v1/models'] = (200, b'{"object": "list", "data": [{"id": "m"}]}')
    answers['/generate'] = (200, b'data: [DONE]\n\n')
    assert run_smoke(SmokeRequest(url=url, timeout=5)).error == 'the stream ended without a single token'
    answers['/generate'] = (200, b'data: {"error": {"message": "CUDA error"}}\n\ndata: [DONE]\n\n')
    res = run_smoke(SmokeRequest(url=url, timeout=5))
    assert not res.ok
    assert res.error == 'the stream reported an error: {"message": "CUDA error"}'


def test_stream_reader_counts_native_and_openai_events():
    native = StreamReader('generate')
    assert native.feed_line('data: {"text": "A", "meta_info": {"completion_tokens": 1}}\n')
    assert not native.feed_line(': keep-alive\n')
    assert native.feed_line('data: {"text": "A B", "meta_info": {"completion_tokens": 2}}')
    assert not native.feed_line('data: [DONE]')
    assert (native.text, native.token_count(), native.done) == ('A B', 2, True)
    openai = StreamReader('chat_completions')
    assert not openai.feed_line('data: {"model": "m", "choices": [{"delta": {"role": "assistant"}}]}')
    assert openai.feed_line('data: {"model": "m", "choices": [{"delta": {"content": "Hi"}}]}')
    assert openai.feed_line('data: {"model": "m", "choices": [{"delta": {"content": " there"}}]}')
    assert not openai.feed_line('data: {"model": "m", "choices": [], "usage": {"completion_tokens": 3}}')
    assert (openai.text, openai.token_count(), openai.model) == ('Hi there', 3, 'm')
    assert not openai.feed_line('data: not json')
    assert openai.errors == ['not json']


def test_a_prefill_or_decode_server_is_smoked_with_sglangs_own_fake_bootstrap_host(standin):
    decode = standin(READY, '--tokens-per-second', '40', '--disaggregation-mode', 'decode')
    # without bootstrap information a decode server of a PD deployment does not serve the request
    plain = run_smoke(SmokeRequest(url=decode.url, max_tokens=2, timeout=10))
    assert not plain.ok and 'a decode server serves requests with bootstrap_host' in plain.received
    res = run_smoke(SmokeRequest(url=decode.url, max_tokens=2, timeout=10, disaggregation_mode='decode'))
    assert res.ok, res.error
    assert (res.sent['body']['bootstrap_host'], res.sent['body']['bootstrap_room']) == ('2.2.2.2', 0)
    assert 'bootstrap_host' not in SmokeRequest(url=decode.url).body(None)


def test_the_guards_generation_request_to_a_decode_server_carries_the_bootstrap(standin):
    # the guard's own round and restart proof sent a plain request: on a PD server every round failed (hung, restarted)
    from ansible_collections.llmops.sglang.plugins.module_utils.guard._config import GuardConfig, problems
    decode = standin(READY, '--tokens-per-second', '40', '--disaggregation-mode', 'decode')
    res = run_smoke(GuardConfig(url=decode.url, max_tokens=2, smoke_timeout=10, disaggregation_mode='decode').generation_request())
    assert res.ok, res.error
    assert res.sent['body']['bootstrap_host'] == '2.2.2.2'
    assert not run_smoke(GuardConfig(url=decode.url, max_tokens=2, smoke_timeout=10).generation_request()).ok
    assert [p.split(' ')[0] for p in problems(GuardConfig(disaggregation_mode='Decode'))] == ['disaggregation_mode']
