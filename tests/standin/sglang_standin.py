# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SGLang stand-in server (test tooling, NOT SGLang).

A CPU-only test host cannot run SGLang (no GPU, no CUDA stack), yet the collection's
roles, its systemd unit and the ``llmops.sglang.wait_for_sglang`` watcher must be
exercised for real. This program stands in for ``python -m sglang.launch_server``:

* It REPLAYS a real recorded SGLang startup log (``DIR/server.log`` or ``DIR/server.log.gz``)
  to stderr, byte for byte (``\\r`` progress segments, a missing final newline and all),
  at the recorded pace taken from the ``[YYYY-MM-DD HH:MM:SS ...]`` prefixes, compressed
  so that the whole replay takes at most ``--max-seconds``. A derived case whose
  ``expected.json`` has ``new_run_offset_bytes`` is replayed from that offset.
* It SERVES SGLang's HTTP endpoints with SGLang's status semantics (0.5.0rc2+):
  the port is closed until the replay reaches ``Uvicorn running on``; ``/health`` and
  ``/health_generate`` answer 503 with an empty body until the ready line
  ``The server is fired up and ready to roll!`` was replayed, then 200;
  ``/model_info``, ``/get_model_info``, ``/v1/models``, ``/server_info`` answer 200 once
  listening; with an API key (``--api-key`` or ``SGLANG_API_KEY``) every path except
  ``/health*`` and ``/metrics`` needs ``Authorization: Bearer <key>`` (401 otherwise).
* It GENERATES (stand-in extension, no model): ``POST /generate``, ``/v1/completions`` and
  ``/v1/chat/completions`` answer with tokens of a fixed stand-in sentence, streamed (``"stream": true``,
  server-sent events as SGLang sends them) or whole, at the single-request decode rate the recording
  itself logged (``Decode batch, #running-req: 1, ... gen throughput (token/s): X``; median of those
  lines), or ``--tokens-per-second``. A recording whose ``expected.json`` has ``"zombie": true`` (or
  ``--generation hang``) is a zombie start: ``/health`` answers 200 but every generation request hangs
  without a byte of response, as a server whose scheduler died does.
* ``--time-scale F`` replays the start at F times its recorded pace (``0.1``: a 300 s recorded start
  takes 30 s), still at most ``--max-seconds``, so start times follow the recorded log.
* When it is ready it leaves a marker file in every compile-cache directory its environment names
  (``SGLANG_DG_CACHE_DIR``, ``TRITON_CACHE_DIR``, ...), as a real start fills those caches; a later
  start then finds them warm.
* With ``--node-rank`` above 0 (a multi-node rank other than 0) it replays up to the HTTP
  server start and then keeps running without listening, as such SGLang ranks do.
* ``--config FILE`` reads SGLang's flat YAML config file (the collection passes the API key
  that way); command-line words win over it, as in SGLang.
* It COUNTS its requests as SGLang does (never constants): ``/metrics`` (with ``--enable-metrics``) has
  ``sglang:num_running_reqs`` and ``sglang:num_queue_reqs`` of the generation requests in flight (running
  at most ``--max-running-requests``, SGLang's flag, the rest queued), ``sglang:num_requests_total`` and
  the token counters of the finished ones; ``/get_load`` answers SGLang 0.5's list (``num_reqs`` counts
  running and waiting). SGLang sets its gauges from the scheduler at its log intervals; the stand-in's
  are live.
* Once ready, SIGTERM is SGLang's drain (``TokenizerManager.sigterm_watchdog``, 0.5.x): ``/health`` answers
  503, requests in flight run to their end and new ones are still accepted and served; every 5 s it looks,
  and at the first look with nothing in flight it kills itself with SIGKILL (SGLang's
  ``kill_process_tree(include_parent=True)``), so systemd records ``Result=signal``. Before it is ready,
  and on SIGINT, it exits at once (status 0).
* RUNTIME FAULTS (stand-in extension, standin_faults.py): ``--hang-after N`` hangs every generation request after the
  N-th while ``/health`` stays 200 (sgl-project/sglang#22779); ``--kernel-log PATH --xid-lines FILE --xid-after N``
  appends recorded kernel-log lines (an Xid of the server's GPU) to the host's kernel-log stand-in after N generation
  requests (0: once ready); ``--hang-armed-by`` / ``--xid-armed-by FILE`` fire a fault only when FILE exists at the
  start and remove it when it fires (the restart that follows runs clean).
* PREFILL/DECODE DISAGGREGATION (standin_pd.py, which says what is SGLang's and what the stand-in's): with
  ``--disaggregation-mode prefill`` it runs SGLang's KV bootstrap server on ``--disaggregation-bootstrap-port`` and
  keeps a request of a PD gateway in flight until the decode of its bootstrap room bootstrapped, then answers one
  token; with ``decode`` it looks the prefill up there, takes its (stand-in) KV transfer and streams.
* ``--sigterm-while-loading ignore`` is SGLang's own behaviour (sgl-project/sglang#16145: its SIGTERM handling is
  installed only once serving, so a stop during load waits out the unit's stop timeout); the default, ``exit``, keeps
  the quick stop the other tests rely on. ``--children N`` starts N scheduler processes titled
  ``sglang::scheduler_TP<i>`` that hold the ``--gpu-device`` paths and ignore SIGTERM as their parent does while
  loading; the stand-in kills them with SIGKILL on its way out, as SGLang's kill_process_tree does.
* When the replay ends it behaves as the recording did (``--outcome auto`` reads
  ``expected.json``): ``ready`` keeps serving until SIGTERM (SGLang's drain, above) or SIGINT (exit 0), unless the recording
  crashed after it became ready (``post_ready_crash``): then it exits with status 1; ``crashed`` exits
  with status 1, or kills itself with SIGKILL when the recorded signature is
  ``silent_exit``; ``stalled`` hangs until signalled.

What is real around it: the systemd unit, the role that installs and starts it, the
log it writes, the TCP port and the HTTP status codes the watcher polls. What is not:
no model is loaded and no token is generated. It never prints a line of its own except
on a usage error, and such lines start with ``[llmops-standin]``.

Usage (no shebang: run it with the host's interpreter, e.g. ``/usr/bin/python3``)::

    python3 sglang_standin.py --recording DIR [--outcome auto|ready|crashed|stalled]
                      [--max-seconds 8] [--time-scale F] [--generation auto|stream|hang]
                      [--tokens-per-second N] [--hang-after N] [--kernel-log PATH --xid-lines FILE --xid-after N]
                      [--sigterm-while-loading exit|ignore] [--children N --gpu-device PATH...] <SGLang server args...>

Standard library only; runs on Python 3.9+ (the test hosts' Debian python3).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import glob
import gzip
import json
import os
import re
import select
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NoReturn

# beside this file: the recorded performance profile (--profile) and generation pacing; also when loaded by path
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standin_profile  # noqa: E402  pylint: disable=wrong-import-position
import standin_faults  # noqa: E402  pylint: disable=wrong-import-position
import standin_pd  # noqa: E402  pylint: disable=wrong-import-position

MARK = b'[llmops-standin] '
READY_LINE = b'The server is fired up and ready to roll!'
LISTEN_LINE = b'Uvicorn running on'
# SGLang's own prefix: "[2026-08-01 23:37:38]", "[2026-08-01 23:37:38 DP0 TP1 EP1]", optional fraction
TIMESTAMP_RE = re.compile(rb'\[(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(?:[.,]\d+)?(?: [^\]\r\n]{0,60})?\]')
SERVER_ARGS_MODEL_RE = re.compile(rb"server_args=ServerArgs\(model_path='([^']*)'")
SERVER_ARGS_CTX_RE = re.compile(rb'server_args=ServerArgs\(.*?\bcontext_length=(\d+)')
CRASH_HINTS = (b'hit an exception', b'Initialization failed', b'Traceback (most recent call last)',
               b'Received sigquit', b'scheduler died', b'Error:')
EPOCH = datetime.datetime(1970, 1, 1)


def note(message: str) -> None:
    """Write one line of the stand-in's own (never from a recording), clearly marked."""
    try:
        os.write(2, MARK + message.encode('utf-8', 'replace') + b'\n')
    except OSError:
        pass


def write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(2, view)
        except BrokenPipeError:
            return
        except InterruptedError:
            continue
        view = view[written:]


# --------------------------------------------------------------------------- recording


class Recording:
    """A corpus case: the log bytes to replay and what the recording did in the end."""

    def __init__(self, path: str):
        self.path = path
        log_path = os.path.join(path, 'server.log')
        if not os.path.exists(log_path) and os.path.exists(log_path + '.gz'):
            # recordings may be stored compressed (keeps CR/LF bytes and non-UTF-8 text out of text-file checks)
            with gzip.open(log_path + '.gz', 'rb') as f:
                data = f.read()
        else:
            with open(log_path, 'rb') as f:
                data = f.read()
        self.expected = {}
        exp_path = os.path.join(path, 'expected.json')
        if os.path.exists(exp_path):
            with open(exp_path, 'r', encoding='utf-8') as f:
                self.expected = json.load(f)
        offset = self.expected.get('new_run_offset_bytes') or 0
        if not 0 <= offset <= len(data):
            offset = 0
        self.offset = offset
        self.data = data[offset:]

    def outcome(self) -> tuple[str, str | None]:
        """(outcome, signature) the recording shows."""
        outcome = self.expected.get('outcome')
        if outcome in ('ready', 'crashed', 'stalled'):
            return outcome, self.expected.get('signature')
        # no expected.json: infer from the text
        if READY_LINE in self.data:
            return 'ready', None
        if any(h in self.data for h in CRASH_HINTS):
            return 'crashed', None
        return 'stalled', None

    def model_path(self) -> str | None:
        m = SERVER_ARGS_MODEL_RE.search(self.data)
        return m.group(1).decode('utf-8', 'replace') if m else None

    def context_length(self) -> int | None:
        for line in self.data.split(b'\n'):
            if b'server_args=ServerArgs(' in line:
                m = SERVER_ARGS_CTX_RE.search(line)
                return int(m.group(1)) if m else None
        return None


def parse_timestamp(segment: bytes) -> float | None:
    m = TIMESTAMP_RE.search(segment)
    if not m:
        return None
    try:
        dt = datetime.datetime.strptime((m.group(1) + b' ' + m.group(2)).decode('ascii'), '%Y-%m-%d %H:%M:%S')
    except ValueError:
        return None
    return (dt - EPOCH).total_seconds()


def split_segments(data: bytes) -> list[bytes]:
    """Physical lines split further at '\\r' (each piece keeps its terminator); joined they give data back."""
    segments = []
    for line in _split_keep(data, b'\n'):
        segments.extend(_split_keep(line, b'\r'))
    return segments


def _split_keep(data: bytes, sep: bytes) -> list[bytes]:
    parts = data.split(sep)
    out = [p + sep for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def schedule(segments: list[bytes], max_seconds: float, time_scale: float | None = None) -> list[float]:
    """Offsets in seconds from the replay start at which each segment is written.

    Segments without a timestamp inherit the previous time; time never runs backwards;
    the recorded span is scaled down (never up) to fit into max_seconds. With time_scale the
    recorded pace is multiplied by it (never above 1), so a longer recorded start replays longer,
    still within max_seconds.
    """
    times = []
    first = None
    prev = None
    for seg in segments:
        ts = parse_timestamp(seg)
        if ts is not None and first is None:
            first = ts
        times.append(ts)
    if first is None:
        return [0.0] * len(segments)
    eff = []
    prev = first
    for ts in times:
        if ts is not None and ts > prev:
            prev = ts
        eff.append(prev - first)
    span = eff[-1] if eff else 0.0
    scale = min(1.0, max_seconds / span) if span > 0 else 0.0
    if time_scale is not None:
        scale = min(scale, max(0.0, time_scale))
    return [t * scale for t in eff]


# --------------------------------------------------------------------------- generation (stand-in extension)

GENERATION_PATHS = ('/generate', '/v1/completions', '/v1/chat/completions')
# SGLang's decode log line: "Decode batch, #running-req: 1, ... gen throughput (token/s): 17.39, #queue-req: 0"
DECODE_RE = re.compile(rb'Decode batch[.,] #running-req: (\d+),.*?gen throughput \(token/s\): ([0-9.]+)')
# For recordings that logged no decode batch: the median single-request rate of the corpus case
# gb10-dflash-spec-decoding-ready (20 lines with #running-req: 1, 0.10 - 54.21 token/s).
FALLBACK_TOKENS_PER_SECOND = 19.8
STANDIN_WORDS = ('This', ' is', ' the', ' SGLang', ' stand-in', ' (test', ' tooling,', ' NOT', ' SGLang);', ' no',
                 ' model', ' is', ' loaded.')
# Compile/JIT caches a real start fills (docs/sglang_service.md, "Warm caches"); the stand-in marks them.
CACHE_ENV_VARS = ('SGLANG_DG_CACHE_DIR', 'SGLANG_CACHE_DIR', 'TORCHINDUCTOR_CACHE_DIR', 'TRITON_CACHE_DIR',
                  'FLASHINFER_WORKSPACE_BASE', 'CUDA_CACHE_PATH')


def recorded_decode_rate(data: bytes) -> float | None:
    """Median decode rate (token/s) of the recording's single-request decode batches; None when it logged none."""
    rates = sorted(float(m.group(2)) for m in DECODE_RE.finditer(data) if m.group(1) == b'1')
    if not rates:
        return None
    mid = len(rates) // 2
    return rates[mid] if len(rates) % 2 else (rates[mid - 1] + rates[mid]) / 2.0


def generation_mode(option: str, recording: Recording) -> str:
    """'stream' or 'hang' (a zombie start: health 200, generation never answers)."""
    if option != 'auto':
        return option
    return 'hang' if recording.expected.get('zombie') else 'stream'


def fill_caches() -> None:
    """Leave a marker in each compile-cache directory named by the environment, once (a later start finds it warm)."""
    for name in CACHE_ENV_VARS:
        directory = os.environ.get(name)
        if not directory:
            continue
        marker = os.path.join(directory, 'llmops-standin.cache')
        try:
            os.makedirs(directory, exist_ok=True)
            if not os.path.exists(marker):
                with open(marker, 'w', encoding='utf-8') as f:
                    f.write('written by the SGLang stand-in (test tooling, NOT SGLang) when it became ready\n')
        except OSError:
            pass  # a read-only or foreign directory: SGLang would warn and run without the cache


class GenerationRequest:
    """One generation request in SGLang's native (/generate) or OpenAI (/v1/...) form, and its answer's events."""

    def __init__(self, api: str, max_tokens: int, stream: bool, model: str, usage: bool, prompt_tokens: int = 1):
        self.api = api  # 'generate', 'completions' or 'chat'
        self.max_tokens = max_tokens
        self.prompt_tokens = prompt_tokens
        self.stream = stream
        self.model = model
        self.usage = usage
        self.created = int(time.time())
        self.id = 'llmops-standin-%d' % int(time.monotonic() * 1000)
        self.bootstrap = (None, None, None)  # bootstrap_host, bootstrap_port, bootstrap_room (a PD gateway's request)

    @classmethod
    def parse(cls, path: str, body: bytes, served_model_name: str) -> GenerationRequest:
        try:
            data = json.loads(body.decode('utf-8') or '{}')
        except ValueError as exc:
            raise ValueError('request body is not JSON: %s' % exc)
        if not isinstance(data, dict):
            raise ValueError('request body must be a JSON object')
        if path == '/generate':
            params = data.get('sampling_params') or {}
            max_tokens = params.get('max_new_tokens', 128)
            api = 'generate'
        else:
            max_tokens = data.get('max_completion_tokens') or data.get('max_tokens') or 16
            api = 'chat' if path.endswith('/chat/completions') else 'completions'
        if not isinstance(max_tokens, int) or max_tokens < 0:
            raise ValueError('max tokens must be a non-negative integer, got %r' % (max_tokens,))
        usage = bool((data.get('stream_options') or {}).get('include_usage'))
        # token ids count as tokens; a text prompt counts its words (no tokenizer here), at least 1
        prompt = len(data.get('input_ids') or []) or len(str(data.get('text') or data.get('prompt') or '').split()) or 1
        out = cls(api, max_tokens, bool(data.get('stream')), data.get('model') or served_model_name, usage, prompt)
        out.bootstrap = standin_pd.bootstrap_of(data)
        return out

    def text(self, count: int) -> str:
        return ''.join(STANDIN_WORDS[i % len(STANDIN_WORDS)] for i in range(count))

    def _meta(self, count: int, done: bool) -> dict:
        return {'id': self.id, 'finish_reason': {'type': 'length', 'length': self.max_tokens} if done else None,
                'prompt_tokens': self.prompt_tokens, 'completion_tokens': count, 'llmops_standin': True}

    def _openai(self, delta: str | None, finish: str | None) -> dict:
        if self.api == 'chat':
            choice = {'index': 0, 'delta': {} if delta is None else {'role': 'assistant', 'content': delta},
                      'logprobs': None, 'finish_reason': finish}
            kind = 'chat.completion.chunk'
        else:
            choice = {'index': 0, 'text': delta or '', 'logprobs': None, 'finish_reason': finish}
            kind = 'text_completion'
        return {'id': self.id, 'object': kind, 'created': self.created, 'model': self.model, 'choices': [choice]}

    def event(self, index: int, since: int | None = None) -> bytes:
        """The server-sent event up to token ``index`` (0-based) of a chunk that began at token ``since`` (default: a
        chunk of one token); /generate sends the text so far, as SGLang does, the OpenAI forms the chunk's delta."""
        if self.api == 'generate':
            done = index + 1 == self.max_tokens
            payload = {'text': self.text(index + 1), 'meta_info': self._meta(index + 1, done)}
        else:
            first = index if since is None else since
            payload = self._openai(''.join(STANDIN_WORDS[i % len(STANDIN_WORDS)] for i in range(first, index + 1)), None)
        return b'data: ' + json.dumps(payload).encode('utf-8') + b'\n\n'

    def tail_events(self) -> list[bytes]:
        events = []
        if self.api != 'generate':
            events.append(self._openai(None, 'length'))
            if self.usage:
                usage = dict(self._openai(None, None), choices=[])
                usage['usage'] = {'prompt_tokens': 1, 'completion_tokens': self.max_tokens, 'total_tokens': self.max_tokens + 1}
                events.append(usage)
        return [b'data: ' + json.dumps(e).encode('utf-8') + b'\n\n' for e in events] + [b'data: [DONE]\n\n']

    def whole_response(self) -> dict:
        text = self.text(self.max_tokens)
        if self.api == 'generate':
            return {'text': text, 'meta_info': self._meta(self.max_tokens, True)}
        body = self._openai(None, 'length')
        choice = body['choices'][0]
        if self.api == 'chat':
            body['object'] = 'chat.completion'
            choice.pop('delta')
            choice['message'] = {'role': 'assistant', 'content': text}
        else:
            choice['text'] = text
        body['usage'] = {'prompt_tokens': 1, 'completion_tokens': self.max_tokens, 'total_tokens': self.max_tokens + 1}
        return body


# --------------------------------------------------------------------------- requests in flight (SGLang's counts)


class Ticket:
    """One generation request in flight: its prompt tokens and the tokens sent so far."""

    def __init__(self, prompt_tokens: int):
        self.prompt_tokens = prompt_tokens
        self.tokens = 0
        self.finished = False


class Flight:
    """The requests this server has in flight, counted as SGLang counts them: ``running`` (in the running batch, at most
    ``--max-running-requests`` when given) and ``queued`` (accepted, waiting for a place in the batch); finished ones
    are counted in ``finished`` (``sglang:num_requests_total``). A request leaves when its answer ends or its client goes
    away (SGLang aborts it then)."""

    def __init__(self, max_running: int | None = None):
        self.max_running = max_running if max_running and max_running > 0 else None
        self.cond = threading.Condition()
        self.running = []
        self.queued = 0
        self.finished = 0
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0

    @contextlib.contextmanager
    def admit(self, prompt_tokens: int):
        ticket = Ticket(prompt_tokens)
        with self.cond:
            self.queued += 1
            while self.max_running is not None and len(self.running) >= self.max_running:
                self.cond.wait()
            self.queued -= 1
            self.running.append(ticket)
        try:
            yield ticket
        finally:
            with self.cond:
                self.running.remove(ticket)
                if ticket.finished:
                    self.finished += 1
                    self.prompt_tokens_total += ticket.prompt_tokens
                    self.generation_tokens_total += ticket.tokens
                self.cond.notify()

    def counts(self) -> tuple[int, int, int]:
        """(running, queued, tokens held: prompt plus generated of every request in flight)."""
        with self.cond:
            held = sum(t.prompt_tokens + t.tokens for t in self.running)
            return len(self.running), self.queued, held

    @property
    def in_flight(self) -> int:
        with self.cond:
            return len(self.running) + self.queued


def metrics_text(state) -> bytes:
    """``/metrics`` in SGLang's names and Prometheus text format, from the stand-in's own counts (never constants)."""
    running, queued, _held = state.flight.counts()
    labels = 'model_name="%s",engine_type="unified",tp_rank="0",pp_rank="0"' % state.served_model_name.replace('"', '')
    lines = ['# llmops-standin: counts of the SGLang stand-in (test tooling, NOT SGLang) of its own requests']
    for name, kind, doc, value in (
            ('sglang:num_running_reqs', 'gauge', 'The number of running requests.', running),
            ('sglang:num_queue_reqs', 'gauge', 'The number of requests in the waiting queue.', queued),
            ('sglang:num_requests_total', 'counter', 'Number of requests processed.', state.flight.finished),
            ('sglang:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.', state.flight.prompt_tokens_total),
            ('sglang:generation_tokens_total', 'counter', 'Number of generation tokens processed.',
             state.flight.generation_tokens_total)):
        lines += ['# HELP %s %s' % (name, doc), '# TYPE %s %s' % (name, kind), '%s{%s} %.1f' % (name, labels, value)]
    if state.pd is not None:
        lines += state.pd.metrics_lines()
    return ('\n'.join(lines) + '\n').encode('utf-8')


def get_load_answer(state) -> list:
    """``GET /get_load`` as SGLang 0.5.x answers it: one entry per DP rank; ``num_reqs`` counts running and waiting."""
    running, queued, held = state.flight.counts()
    return [{'dp_rank': 0, 'num_reqs': running + queued, 'num_waiting_reqs': queued, 'num_tokens': held,
             'ts_tic': time.perf_counter()}]


# SGLang's TokenizerManager.sigterm_watchdog looks every 5 s (asyncio.sleep(5)) whether SIGTERM came, then every 5 s
# whether requests remain, and kills its process tree (itself with SIGKILL) once none does.
SIGTERM_POLL_SECONDS = 5.0


def sigterm_watchdog(state, poll: float = SIGTERM_POLL_SECONDS) -> None:
    """SGLang's drain after SIGTERM (tokenizer_manager.sigterm_watchdog): requests in flight run to their end, new
    ones are still accepted and served, ``/health`` answers 503; at the first look with nothing in flight the process
    kills itself (SIGKILL, as SGLang's ``kill_process_tree(include_parent=True)`` does)."""
    while not state.gracefully_exit:
        time.sleep(poll)
    while state.flight.in_flight > 0:
        time.sleep(poll)
    state.children.kill()
    os.kill(os.getpid(), signal.SIGKILL)


# --------------------------------------------------------------------------- HTTP


def installed_sglang_version(venv: str | None) -> str | None:
    """The SGLang release installed under ``venv`` (its dist-info), None when there is none."""
    if not venv:
        return None
    for info in sorted(glob.glob(os.path.join(venv, 'lib', 'python3*', 'site-packages', 'sglang-*.dist-info'))):
        return os.path.basename(info)[len('sglang-'):-len('.dist-info')]
    return None


class State:
    def __init__(self, args: argparse.Namespace, recording: Recording):
        self.args = args
        self.recording = recording
        self.ready = False
        self.created = int(time.time())
        self.model_path = args.model_path or recording.model_path() or 'llmops-standin/model'
        self.served_model_name = args.served_model_name or self.model_path
        self.context_length = args.context_length or recording.context_length() or 32768
        self.api_key = args.api_key if args.api_key is not None else os.environ.get('SGLANG_API_KEY') or None
        self.version = installed_sglang_version(args.sglang_venv) or recording.expected.get('sglang_version') or 'unknown'
        # prefill/decode disaggregation (standin_pd.py): None for a server of its own (--disaggregation-mode null)
        self.pd = None if args.disaggregation_mode == 'null' else standin_pd.PD(
            args.disaggregation_mode, args.host, args.disaggregation_bootstrap_port, self.version, os.environ)
        self.generation = generation_mode(args.generation, recording)
        self.tokens_per_second = args.tokens_per_second or recorded_decode_rate(recording.data) or FALLBACK_TOKENS_PER_SECOND
        # How tokens are paced: at the recorded single-request rate, or by the --profile entry (all streams together)
        self.pacing = standin_profile.FixedRate(self.tokens_per_second)
        self.gpus = 1
        self.stopping = threading.Event()
        self.flight = Flight(args.max_running_requests)
        # set by SIGTERM once serving (SGLang's TokenizerManager.gracefully_exit)
        self.gracefully_exit = False
        self.faults = standin_faults.Faults(args)
        self.faults.note = note
        self.children = standin_faults.Children()


class Handler(BaseHTTPRequestHandler):
    server_version = 'uvicorn'
    sys_version = ''
    protocol_version = 'HTTP/1.1'
    state: State = None  # set on the subclass per server

    def log_message(self, format, *args):  # noqa: A002  (signature of the base class)
        pass  # no access log: every stderr byte comes from the recording

    def _send(self, status: int, body: object = None) -> None:
        payload = b'' if body is None else json.dumps(body).encode('utf-8')
        self.send_response(status)
        if body is not None:
            self.send_header('content-type', 'application/json')
        self.send_header('content-length', str(len(payload)))
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(payload)

    def _authorized(self, path: str) -> bool:
        key = self.state.api_key
        if not key or path.startswith('/health') or path.startswith('/metrics'):
            return True
        return self.headers.get('Authorization') == 'Bearer ' + key

    def _read_body(self) -> bytes:
        length = int(self.headers.get('content-length') or 0)
        return self.rfile.read(length) if length > 0 else b''

    def do_GET(self):
        self._route()

    def do_POST(self):
        self._route()

    def do_HEAD(self):
        self._route()

    def _route(self) -> None:
        st = self.state
        path = self.path.split('?', 1)[0]
        body = self._read_body() if self.command == 'POST' else b''
        if not self._authorized(path):
            self._send(401, {'error': 'Unauthorized'})
            return
        if path in ('/health', '/health_generate'):
            # SGLang: 503 until warmup marks it up, and 503 once SIGTERM started its drain
            self._send(200 if st.ready and not st.gracefully_exit else 503)
        elif path in ('/model_info', '/get_model_info'):
            self._send(200, {
                'model_path': st.model_path,
                'tokenizer_path': st.model_path,
                'is_generation': True,
                'preferred_sampling_params': None,
                'weight_version': 'default',
                'has_image_understanding': False,
                'model_type': None,
                'architectures': None,
                'served_model_name': st.served_model_name,
            })
        elif path == '/v1/models':
            self._send(200, {'object': 'list', 'data': [{
                'id': st.served_model_name,
                'object': 'model',
                'created': st.created,
                'owned_by': 'sglang',
                'root': st.served_model_name,
                'max_model_len': st.context_length,
            }]})
        elif path in ('/server_info', '/get_server_info'):
            self._send(200, {
                'model_path': st.model_path,
                'served_model_name': st.served_model_name,
                'host': st.args.host,
                'port': st.args.port,
                'context_length': st.context_length,
                'version': st.version,
                'internal_states': [{'ready': st.ready}],
                'llmops_standin': {
                    'note': 'SGLang stand-in server (test tooling, NOT SGLang): replays a recorded startup log',
                    'recording': st.recording.path,
                },
            })
        elif path == '/metrics' and st.args.enable_metrics:
            body = metrics_text(st)
            self.send_response(200)
            self.send_header('content-type', 'text/plain; version=0.0.4; charset=utf-8')
            self.send_header('content-length', str(len(body)))
            self.end_headers()
            if self.command != 'HEAD':
                self.wfile.write(body)
        elif path == '/get_load':
            self._send(200, get_load_answer(st))
        elif path in GENERATION_PATHS and self.command == 'POST':
            self._generate(path, body)
        elif path == '/llmops-standin/gpu' and isinstance(st.pacing, standin_profile.Pacer):
            # the profile's power figure, for nvidia_smi_standin.py (stand-in extension)
            self._send(200, standin_profile.gpu_answer(st.pacing, st.gpus))
        else:
            self._send(404, {'detail': 'Not Found'})

    # ------------------------------------------------------------------ generation (stand-in extension)

    def _generate(self, path: str, body: bytes) -> None:
        """Answer a generation request with stand-in tokens at the recorded rate (or hang: zombie start)."""
        st = self.state
        try:
            request = GenerationRequest.parse(path, body, st.served_model_name)
        except ValueError as exc:
            self._send(400, {'object': 'error', 'message': str(exc), 'code': 400})
            return
        if st.faults.request() or st.generation == 'hang':
            # A zombie, or #22779's hang after N requests: the request was accepted, nothing ever comes back.
            with st.flight.admit(request.prompt_tokens):
                st.stopping.wait()
            return
        if st.pd is not None and st.pd.mode == 'prefill':
            request.max_tokens = 1  # SGLang runs a request on a prefill server with max_new_tokens=1
        with st.flight.admit(request.prompt_tokens) as ticket, st.pacing.request():
            if not request.stream:
                if not self._disaggregated(request, headers_sent=False):
                    return
                st.pacing.take(request.max_tokens, first=True)
                ticket.tokens = request.max_tokens
                self._send(200, request.whole_response())
                ticket.finished = True
                return
            self.send_response(200)
            self.send_header('content-type', 'text/event-stream; charset=utf-8')
            self.send_header('transfer-encoding', 'chunked')
            self.end_headers()
            try:
                if not self._disaggregated(request, headers_sent=True):
                    return
                self._stream(request, st.args.stream_interval or st.pacing.chunk_tokens, ticket)
                ticket.finished = True
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up; so does the stream (SGLang aborts the request)

    def _disaggregated(self, request: GenerationRequest, headers_sent: bool) -> bool:
        """A PD server's part before its tokens (standin_pd.py): the prefill waits for the decode of its bootstrap room,
        the decode takes the prefill's KV transfer. False when SGLang would abort the request (answered here)."""
        pd = self.state.pd
        if pd is None:
            return True
        try:
            if pd.mode == 'prefill':
                pd.prefill(request.bootstrap)
            else:
                pd.decode(request.bootstrap)
            return True
        except standin_pd.PDError as exc:
            error = {'error': {'message': str(exc)}}
            if headers_sent:
                # SGLang's stream_results: an error event, then the end of the stream
                self._chunk(b'data: ' + json.dumps(error).encode('utf-8') + b'\n\n')
                self._chunk(b'data: [DONE]\n\n')
                self._chunk(b'')
            else:
                self._send(exc.status, error)
            return False

    def _stream(self, request: GenerationRequest, interval: int, ticket: Ticket) -> None:
        """The first token alone, then chunks of ``interval`` tokens (SGLang's --stream-interval), each when paced."""
        sent = 0
        while sent < request.max_tokens:
            step = 1 if sent == 0 else min(interval, request.max_tokens - sent)
            self.state.pacing.take(step, first=sent == 0)
            self._chunk(request.event(sent + step - 1, since=sent))
            sent += step
            ticket.tokens = sent
        for tail in request.tail_events():
            self._chunk(tail)
        self._chunk(b'')

    def _chunk(self, data: bytes) -> None:
        """One HTTP/1.1 chunk (an empty one ends the body)."""
        self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # a benchmark connects many clients at once (uvicorn's backlog is 2048)


def start_http(state: State) -> Server:
    host = state.args.host
    handler = type('BoundHandler', (Handler,), {'state': state})
    server_cls = Server
    if ':' in host:
        server_cls = type('Server6', (Server,), {'address_family': socket.AF_INET6})
    server = server_cls((host, state.args.port), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={'poll_interval': 0.1}, daemon=True)
    thread.start()
    return server


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog='sglang_standin.py',
        description='SGLang stand-in server (test tooling, NOT SGLang): replays a recorded SGLang startup log '
                    'and serves SGLang\'s HTTP endpoints with SGLang\'s status semantics.')
    p.add_argument('--recording', required=True, help='corpus case directory holding server.log (+ expected.json)')
    p.add_argument('--outcome', default='auto', choices=['auto', 'ready', 'crashed', 'stalled'],
                   help='what to do when the replay ends; auto = what expected.json recorded')
    p.add_argument('--max-seconds', type=float, default=8.0, help='upper bound of the replay duration (seconds)')
    p.add_argument('--time-scale', type=float, default=None,
                   help='replay at this fraction of the recorded pace (still at most --max-seconds); default: '
                        'compress the whole recording into --max-seconds')
    p.add_argument('--generation', default='auto', choices=['auto', 'stream', 'hang'],
                   help='how generation requests are answered; auto = hang when expected.json marks a zombie start')
    p.add_argument('--tokens-per-second', type=float, default=None,
                   help='decode rate of the streamed stand-in tokens; default: the rate the recording logged')
    # SGLang's own server arguments that the stand-in honours; everything else is accepted and ignored
    p.add_argument('--host', default='127.0.0.1')
    p.add_argument('--port', type=int, default=30000)
    p.add_argument('--api-key', default=None)
    p.add_argument('--served-model-name', default=None)
    p.add_argument('--model-path', '--model', dest='model_path', default=None)
    p.add_argument('--context-length', type=int, default=None)
    p.add_argument('--enable-metrics', action='store_true')
    p.add_argument('--node-rank', type=int, default=0)
    p.add_argument('--disaggregation-mode', default='null', choices=list(standin_pd.MODES))
    p.add_argument('--disaggregation-bootstrap-port', type=int, default=standin_pd.DEFAULT_BOOTSTRAP_PORT)
    p.add_argument('--config', default=None)
    p.add_argument('--stream-interval', type=int, default=None,
                   help='tokens per streamed chunk (SGLang\'s flag); default 1, with --profile %d'
                        % standin_profile.DEFAULT_CHUNK_TOKENS)
    p.add_argument('--tp-size', '--tp', dest='tp_size', type=int, default=1)
    p.add_argument('--max-running-requests', type=int, default=None,
                   help='requests in the running batch at most (SGLang\'s flag); more wait in the queue. Default: no limit')
    p.add_argument('--profile', default=None,
                   help='recorded performance profile (JSON, see standin_profile.py): crash or stream at its figures')
    p.add_argument('--sglang-venv', default=None, help='venv of the installed SGLang, for the profile\'s SM120 patch state')
    faults = p.add_argument_group('runtime faults (stand-in extension, standin_faults.py)')
    faults.add_argument('--hang-after', type=int, default=None, help='hang every generation request after the N-th (health stays 200)')
    faults.add_argument('--hang-armed-by', default=None, help='hang only when this file exists at the start; removed when it hangs')
    faults.add_argument('--kernel-log', default=None, help='the host\'s kernel-log stand-in file')
    faults.add_argument('--xid-lines', default=None, help='recorded kernel-log lines to append to --kernel-log')
    faults.add_argument('--xid-after', type=int, default=0, help='append them after N generation requests (0: once ready)')
    faults.add_argument('--xid-armed-by', default=None, help='append them only when this file exists at the start; removed then')
    faults.add_argument('--sigterm-while-loading', default='exit', choices=['exit', 'ignore'],
                        help='SIGTERM before ready: exit at once, or ignore it as SGLang does (#16145)')
    faults.add_argument('--children', type=int, default=0, help='scheduler processes (sglang::scheduler_TP<i>) holding --gpu-device')
    faults.add_argument('--gpu-device', action='append', default=[], help='a GPU device node the schedulers hold open')
    return p


def read_config(path: str) -> list[str]:
    """SGLang's --config YAML (flat ``key: value`` lines) as command-line words."""
    words = []
    with open(path, encoding='utf-8') as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith('#') or ':' not in line:
                continue
            key, value = line.split(':', 1)
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in '\'"':
                value = value[1:-1]
            words.extend(['--' + key.strip(), value])
    return words


class SignalWake:
    """The main thread's sleeps, cut short by a signal whichever thread the kernel hands it to.

    Python runs a signal's handler in the main thread only, and the kernel may deliver SIGTERM to any thread (the HTTP
    server's, the watchdog's): a main thread in time.sleep() then runs the handler when its sleep ends. In a run at
    load 10 the drain never started (/health 200 for 8 s after SIGTERM, the main thread in an hour's sleep). The C-level
    handler writes to the wakeup fd from whichever thread took the signal, and the select() here returns, as SGLang's
    event loop does with its own wakeup fd."""

    def __init__(self) -> None:
        self._read, write = os.pipe()
        os.set_blocking(write, False)
        signal.set_wakeup_fd(write)

    def sleep(self, seconds: float | None = None) -> None:
        """Up to SECONDS (None: until a signal); returns at once on a signal, whose handler then runs."""
        if select.select([self._read], [], [], seconds)[0]:
            os.read(self._read, 512)

    def idle(self) -> NoReturn:
        """Until a signal's handler ends the process (SIGINT; SIGTERM before serving), forever otherwise."""
        while True:
            self.sleep()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, _ignored = parser.parse_known_args(argv)
    if args.config:
        # As SGLang does: values from the --config file, command-line words win.
        args, _ignored = parser.parse_known_args(read_config(args.config) + list(sys.argv[1:] if argv is None else argv))

    serving = {}

    def on_term(signum, frame):
        # Once serving, SIGTERM starts SGLang's drain (its handler is installed with the first request, at warmup);
        # before that it exits, or ignores SIGTERM as SGLang does (#16145); SIGINT always exits.
        if signum == signal.SIGTERM and serving:
            serving['state'].gracefully_exit = True
            return
        if signum == signal.SIGTERM and args.sigterm_while_loading == 'ignore':
            return
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    wake = SignalWake()

    entry = None
    if args.profile:
        try:
            entry = standin_profile.select(standin_profile.load(args.profile), {
                'args': standin_profile.server_flags(list(sys.argv[1:] if argv is None else argv)),
                'env': dict(os.environ), 'sm120_patch': standin_profile.sm120_patch_state(args.sglang_venv)})
        except (OSError, ValueError, KeyError) as exc:
            note('cannot use profile %s: %s' % (args.profile, exc))
            return 2
        if entry.get('crash'):
            # this configuration crashed at start on the recorded hardware: replay that crash instead
            args.recording = os.path.join(os.path.dirname(os.path.abspath(args.recording)), entry['crash'])
    try:
        recording = Recording(args.recording)
    except (OSError, ValueError) as exc:
        note('cannot read recording %s: %s; pass --recording DIR holding server.log (and expected.json)'
             % (args.recording, exc))
        return 2
    outcome, signature = recording.outcome()
    if args.outcome != 'auto':
        outcome = args.outcome
        if outcome != 'crashed':
            signature = None

    state = State(args, recording)
    state.children.spawn(args.children, args.gpu_device, args.sigterm_while_loading == 'ignore')
    try:
        return run(args, recording, state, entry, outcome, signature, serving, wake)
    finally:
        state.children.kill()


def run(args, recording, state, entry, outcome, signature, serving, wake):  # pylint: disable=too-many-arguments
    """Replay the recording and behave as it did (main's body once the recording is read)."""
    if entry is not None and not entry.get('crash'):
        state.pacing = standin_profile.Pacer(entry)
        state.gpus = max(1, args.tp_size)
    server = None

    def listen() -> None:
        nonlocal server
        if server is None:
            try:
                if state.pd is not None:
                    state.pd.start()  # SGLang starts the bootstrap server with its TokenizerManager, before HTTP
                server = start_http(state)
            except OSError as exc:
                note('cannot listen on %s:%s: %s' % (args.host, args.port, exc))
                raise SystemExit(1)

    def became_ready() -> None:
        if serving:
            return
        # the drain's handler first: a SIGTERM that follows the first 200 of /health must find it (it came between
        # the two once, at low load: the process exited and /health never answered 503)
        serving['state'] = state
        threading.Thread(target=sigterm_watchdog, args=(state,), daemon=True).start()
        state.ready = True
        fill_caches()
        state.faults.ready()

    segments = split_segments(recording.data)
    offsets = schedule(segments, max(0.0, args.max_seconds), args.time_scale)
    t0 = time.monotonic()
    for seg, off in zip(segments, offsets):
        while t0 + off > time.monotonic():  # a signal cuts the sleep short (its handler runs); the pace holds
            wake.sleep(max(0.0, t0 + off - time.monotonic()))
        if args.node_rank > 0 and (LISTEN_LINE in seg or b'Application startup' in seg or READY_LINE in seg):
            # SGLang ranks >= 1 of a multi-node server run no HTTP server and never log the ready line.
            outcome = 'stalled' if outcome == 'ready' else outcome
            break
        write_all(seg)
        if LISTEN_LINE in seg:
            listen()
        if READY_LINE in seg:
            listen()  # a recording may lack the Uvicorn line (excerpt); the ready line implies listening
            became_ready()

    if outcome == 'ready':
        listen()
        became_ready()
        if args.outcome == 'auto' and recording.expected.get('post_ready_crash'):
            # the recording became ready, then crashed at runtime: so does the stand-in, after its replay
            if server is not None:
                server.server_close()
            return 1
        wake.idle()
    if outcome == 'crashed':
        if server is not None:
            server.server_close()
        if signature == 'silent_exit':
            state.children.kill()
            os.kill(os.getpid(), signal.SIGKILL)
        return 1
    wake.idle()  # stalled


if __name__ == '__main__':
    sys.exit(main())
