# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A small streaming load client for SGLang's ``POST /generate``, standard library only.

For hosts where SGLang's own ``python -m sglang.bench_serving`` cannot run (SGLang installed without its
dependencies). It measures what bench_serving measures, the way its ``sglang`` backend does: random prompts of a
fixed length (token ids drawn with a fixed seed, so no tokenizer is needed), ``ignore_eos`` with a fixed number of
output tokens, streamed answers; TTFT is the time to the first chunk with text, the inter-token latency of a chunk
is its gap divided by the tokens it brought (``meta_info.completion_tokens``). ``concurrency`` threads send the
requests; the run stops sending at ``deadline`` and every socket has a timeout, so a run is bounded.
Private module_utils: runs on the target host, Python 3.9+.
"""

from __future__ import annotations

import json
import random
import threading
import time

from urllib.error import HTTPError, URLError
from urllib.request import ProxyHandler, Request, build_opener

from ansible_collections.llmops.sglang.plugins.module_utils.bench._stats import RunResult, percentile

# Token ids of the random prompts: a range every tokenizer of a served LLM has, away from special tokens at the ends.
PROMPT_TOKEN_RANGE = (1000, 20000)


def prompts(count, input_len, seed):
    """``count`` prompts of ``input_len`` token ids, the same for the same seed."""
    rng = random.Random(seed)
    return [[rng.randrange(*PROMPT_TOKEN_RANGE) for _token in range(input_len)] for _prompt in range(count)]


def generate_payload(input_ids, output_len):
    return {'input_ids': input_ids, 'stream': True,
            'sampling_params': {'temperature': 0.0, 'max_new_tokens': output_len, 'ignore_eos': True}}


def sse_events(lines):
    """JSON payloads of a server-sent event stream (``data: {...}`` lines), stopping at ``data: [DONE]``."""
    for raw in lines:
        line = raw.strip()
        if not line.startswith(b'data:'):
            continue
        data = line[5:].strip()
        if data == b'[DONE]':
            return
        yield json.loads(data.decode('utf-8'))


class Request1:
    """What one streamed request measured."""

    def __init__(self):
        self.ok = False
        self.error = None
        self.ttft = None
        self.itls = []
        self.input_tokens = 0
        self.output_tokens = 0
        self.end = None
        # the stream's last event said why it ended (``meta_info.finish_reason``): a stream cut short never does
        self.finished = False

    def follow(self, events, start, clock):
        """Read the stream's events, timing every chunk that brought text."""
        last_time, last_count = start, 0
        for event in events:
            meta = event.get('meta_info') or {}
            if meta.get('prompt_tokens') is not None:
                self.input_tokens = int(meta['prompt_tokens'])
            if meta.get('finish_reason'):
                self.finished = True
            if not event.get('text'):
                continue
            now = clock()
            count = int(meta.get('completion_tokens') or last_count + 1)
            if self.ttft is None:
                self.ttft = now - start
            elif count > last_count:
                self.itls.extend([(now - last_time) / (count - last_count)] * (count - last_count))
            else:
                continue
            last_time, last_count = now, count
        self.output_tokens = last_count
        self.ok = self.ttft is not None


class StreamingClient:
    """Sends streamed ``/generate`` requests to ``url`` and measures them (one ``run`` per concurrency level)."""

    def __init__(self, url, api_key=None, request_timeout=60.0, clock=time.monotonic):
        self.url = url.rstrip('/') + '/generate'
        self.headers = {'Content-Type': 'application/json'}
        if api_key:
            self.headers['Authorization'] = 'Bearer ' + api_key
        self.request_timeout = request_timeout
        self.clock = clock
        # Straight to the server: a proxy from the environment must not carry the load.
        self.opener = build_opener(ProxyHandler({}))

    def one(self, input_ids, output_len):
        result = Request1()
        body = json.dumps(generate_payload(input_ids, output_len)).encode('utf-8')
        start = self.clock()
        try:
            with self.opener.open(Request(self.url, data=body, headers=self.headers, method='POST'),
                                  timeout=self.request_timeout) as response:
                result.follow(sse_events(response), start, self.clock)
                if not result.ok:
                    result.error = 'HTTP %s: the stream brought no text' % response.status
        except HTTPError as err:
            result.error = 'HTTP %s: %s' % (err.code, err.read()[:200].decode('utf-8', 'replace'))
        except (URLError, OSError, ValueError) as err:
            result.error = '%s: %s' % (type(err).__name__, getattr(err, 'reason', err))
        result.end = self.clock()
        if not result.input_tokens:
            result.input_tokens = len(input_ids)
        return result

    def run(self, concurrency, num_prompts, input_len, output_len, seed, deadline):
        """Send ``num_prompts`` requests with at most ``concurrency`` in flight; stop sending at ``deadline``
        (a ``clock()`` value). Returns a RunResult."""
        queue = list(reversed(prompts(num_prompts, input_len, seed)))
        lock = threading.Lock()
        done = []
        start = self.clock()

        def worker():
            while True:
                with lock:
                    if not queue or self.clock() >= deadline:
                        return
                    input_ids = queue.pop()
                finished = self.one(input_ids, output_len)
                with lock:
                    done.append(finished)

        threads = [threading.Thread(target=worker, daemon=True) for _thread in range(max(1, min(concurrency, num_prompts)))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, deadline - self.clock()) + self.request_timeout + 1)
        return summarise(concurrency, done, start)


def summarise(concurrency, requests, start):
    """One RunResult from the measured requests (as bench_serving computes them: throughput over the whole run)."""
    ok = [r for r in requests if r.ok]
    end = max([r.end for r in requests] or [start])
    duration = max(end - start, 1e-9)
    output = sum(r.output_tokens for r in ok)
    total = output + sum(r.input_tokens for r in ok)
    ttfts = [r.ttft * 1000.0 for r in ok]
    itls = [itl * 1000.0 for r in ok for itl in r.itls]
    errors = sorted(set(r.error for r in requests if r.error))[:5]
    return RunResult(concurrency=concurrency, completed=len(ok), failed=len(requests) - len(ok), duration_s=round(duration, 3),
                     output_tps=output / duration if ok else 0.0, total_tps=total / duration if ok else 0.0,
                     ttft_p50_ms=percentile(ttfts, 50), ttft_p99_ms=percentile(ttfts, 99),
                     itl_p50_ms=percentile(itls, 50), itl_p99_ms=percentile(itls, 99), errors=errors)
