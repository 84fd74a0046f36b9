# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The built-in streaming client (module_utils/bench/_client.py) against real local servers that stream tokens:
an in-process HTTP server streaming SGLang's server-sent events with known token counts, and the SGLang stand-in
as a real subprocess pacing its streams by its recorded profile (throughput, power through nvidia_smi_standin.py,
a crash at start for the NCCL_ALGO=Tree set)."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.bench import _serving as bs
from ansible_collections.llmops.sglang.plugins.module_utils.bench._client import StreamingClient, prompts
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import local_run

TESTS = Path(__file__).resolve().parents[3]
STANDIN = TESTS / 'standin'
RECORDINGS = TESTS / 'fixtures' / 'sglang-logs'


class Streamer(http.server.BaseHTTPRequestHandler):
    """Streams like SGLang's /generate: one token, then chunks of 3, cumulative text, then [DONE]."""
    protocol_version = 'HTTP/1.1'
    seen = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['content-length'])))
        Streamer.seen.append((self.headers.get('Authorization'), body))
        if body['input_ids'][0] % 5 == 0:  # some prompts fail, as an overloaded server answers
            self.send_response(503)
            self.send_header('content-length', '0')
            self.end_headers()
            return
        self.send_response(200)
        self.send_header('content-type', 'text/event-stream')
        self.send_header('connection', 'close')
        self.end_headers()
        total, done = body['sampling_params']['max_new_tokens'], 0
        while done < total:
            done = min(total, done + (1 if done == 0 else 3))
            event = {'text': 'x' * done, 'meta_info': {'prompt_tokens': len(body['input_ids']), 'completion_tokens': done}}
            self.wfile.write(b'data: ' + json.dumps(event).encode() + b'\n\n')
            self.wfile.flush()
            time.sleep(0.002)
        self.wfile.write(b'data: [DONE]\n\n')


@pytest.fixture
def streamer():
    Streamer.seen = []
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Streamer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield 'http://127.0.0.1:%d' % server.server_address[1]
    server.shutdown()


def test_prompts_are_fixed_by_the_seed():
    assert prompts(3, 8, 1) == prompts(3, 8, 1) != prompts(3, 8, 2)
    assert [len(p) for p in prompts(3, 8, 1)] == [8, 8, 8]


def test_counts_tokens_latencies_and_failures_of_real_streams(streamer):
    client = StreamingClient(streamer, api_key='sk-test')
    failing = sum(1 for p in prompts(20, 16, 7) if p[0] % 5 == 0)
    run = client.run(4, 20, 16, 10, 7, deadline=time.monotonic() + 30)
    assert (run.completed, run.failed) == (20 - failing, failing)
    assert run.errors == ['HTTP 503: '] if failing else run.errors == []
    # every completed request: 10 output tokens, 16 input tokens; 9 inter-token gaps (1 + 3 + 3 + 3)
    assert run.output_tps * run.duration_s == pytest.approx(10 * run.completed, rel=0.01)
    assert run.total_tps * run.duration_s == pytest.approx(26 * run.completed, rel=0.01)
    assert 0 < run.ttft_p50_ms <= run.ttft_p99_ms and 0 < run.itl_p50_ms <= run.itl_p99_ms
    sent = Streamer.seen[0]
    assert sent[0] == 'Bearer sk-test'
    assert sent[1]['stream'] is True and sent[1]['sampling_params'] == {'temperature': 0.0, 'max_new_tokens': 10, 'ignore_eos': True}


def test_stops_sending_at_the_deadline(streamer):
    run = StreamingClient(streamer).run(2, 1000, 4, 4, 1, deadline=time.monotonic() - 1)
    assert (run.completed, run.failed) == (0, 0)


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def standin(tmp_path, profile, env=None, extra=()):
    port = free_port()
    argv = [sys.executable, str(STANDIN / 'sglang_standin.py'), '--recording', str(RECORDINGS / 'gb10-dflash-spec-decoding-ready'),
            '--max-seconds', '0.5', '--port', str(port), '--profile', str(profile), '--tp-size', '2'] + list(extra)
    proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL, env=dict(os.environ, **(env or {})))
    url = 'http://127.0.0.1:%d' % port
    return proc, url


def wait_ready(proc, url):
    for _attempt in range(200):
        if proc.poll() is not None:
            return proc.returncode
        try:
            with urllib.request.urlopen(url + '/health', timeout=1) as answer:
                if answer.status == 200:
                    return 'ready'
        except OSError:
            pass
        time.sleep(0.05)
    return 'timeout'


@pytest.fixture
def profile(tmp_path):
    path = tmp_path / 'profile.json'
    data = json.loads((STANDIN / 'profiles' / 'seed-sm120.json').read_text())
    path.write_text(json.dumps(data))
    return path


def test_the_standin_streams_at_its_recorded_rate_and_reports_power(tmp_path, profile):
    proc, url = standin(tmp_path, profile)
    try:
        assert wait_ready(proc, url) == 'ready'
        sampler = bs.GpuSampler([sys.executable, str(STANDIN / 'nvidia_smi_standin.py'), '--url', url], local_run, 0.2)
        sampler.start()
        run = StreamingClient(url).run(16, 16, 32, 64, 1, deadline=time.monotonic() + 60)
        gpu = sampler.stop()
    finally:
        proc.terminate()
        proc.wait(10)
    assert (run.completed, run.failed) == (16, 0)
    # 16 x 64 tokens handed out at 1867 tok/s: never faster than the profile; slower only by set-up and the 50 ms TTFT
    assert 0.5 * 1867 < run.output_tps < 1.05 * 1867
    assert 40 <= run.ttft_p50_ms
    assert gpu['power_limit_w'] == 600.0 and gpu['gpu_util_pct'] is None
    assert 60.0 <= gpu['power_w'] <= 250.0   # idle between samples, 250 W while streams run


def test_the_nccl_tree_set_crashes_at_start_with_the_recorded_nccl_log(tmp_path, profile):
    proc, url = standin(tmp_path, profile, env={'NCCL_ALGO': 'Tree'})
    proc.wait(30)
    assert proc.returncode == 1


def test_a_stream_is_finished_only_when_its_last_event_says_why_it_ended():
    from ansible_collections.llmops.sglang.plugins.module_utils.bench._client import Request1
    clock = iter([1.0, 1.1, 1.2]).__next__
    whole = Request1()
    whole.follow([{'text': 'a', 'meta_info': {'completion_tokens': 1, 'finish_reason': None}},
                  {'text': 'a b', 'meta_info': {'completion_tokens': 2, 'finish_reason': {'type': 'length', 'length': 2}}}],
                 0.5, clock)
    assert (whole.ok, whole.finished, whole.output_tokens) == (True, True, 2)
    cut = Request1()
    cut.follow([{'text': 'a', 'meta_info': {'completion_tokens': 1, 'finish_reason': None}}], 0.5, clock)
    assert (cut.ok, cut.finished) == (True, False)  # a first token and then nothing: ok for TTFT, not a whole answer
