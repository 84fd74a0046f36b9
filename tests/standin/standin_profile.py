# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Performance profile of the SGLang stand-in (test tooling, NOT SGLang, NOT a measurement).

A CPU host generates no tokens, yet the benchmark gate and the tune playbook must see a server get faster, slower
or crash when its configuration changes. With ``--profile FILE`` the stand-in looks up what it runs with (its
server arguments, its environment and the SM120 patch state of the installed SGLang, read from ``--sglang-venv``)
in a small profile of RECORDED figures (``tests/standin/profiles/*.json``, each entry naming its source) and then:

* crashes at start by replaying the entry's ``crash`` recording instead of ``--recording``;
* or paces the stand-in's generation answers (``sglang_standin.py``: SGLang's server-sent events, the first token
  alone, then chunks of ``--stream-interval`` tokens, default 8 here) so that all streams together get the entry's
  output tokens/s at the current number of streams (piecewise linear between its points), the first token after
  the entry's time to first token;
* and reports a GPU power figure at ``GET /llmops-standin/gpu`` (the entry's power while streams run, the idle
  figure otherwise), which ``nvidia_smi_standin.py`` prints the way ``nvidia-smi --query-gpu`` does.

Standard library only; Python 3.9+.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import threading
import time

# Where the SM120 gate patch (llmops.sglang.sglang_patch_sm120, site C) leaves its line, by release.
GATE_FILES = ('sglang/srt/layers/communicator.py', 'sglang/srt/layers/layer_boundary/residual/add_norm.py')
GATE_PATCHED = '_is_sm120_supported = _is_cuda and'
# Tokens per streamed chunk unless --stream-interval says otherwise: keeps the stand-in's writes per second low on
# small test hosts; the client divides each chunk's gap by the tokens it brought, as bench_serving does.
DEFAULT_CHUNK_TOKENS = 8


def load(path):
    with open(path, 'r', encoding='utf-8') as handle:
        return json.load(handle)


def server_flags(words):
    """``{flag: value}`` of SGLang command-line words (``--flag value``; a flag followed by a flag is ``True``)."""
    flags = {}
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith('--'):
            name = word[2:].replace('_', '-')
            if '=' in name:
                name, value = name.split('=', 1)
            elif i + 1 < len(words) and not words[i + 1].startswith('--'):
                i += 1
                value = words[i]
            else:
                value = True
            flags[name] = value
        i += 1
    return flags


def sm120_patch_state(venv):
    """``present`` when the installed SGLang under ``venv`` carries the SM120 gate patch, ``absent`` when not,
    None when no SGLang is found there."""
    if not venv:
        return None
    for package in glob.glob(os.path.join(venv, 'lib', 'python3*', 'site-packages', 'sglang')):
        for rel in GATE_FILES:
            path = os.path.join(os.path.dirname(package), rel)
            if os.path.exists(path):
                with open(path, 'r', encoding='utf-8', errors='replace') as handle:
                    return 'present' if GATE_PATCHED in handle.read() else 'absent'
    return None


def _matches(when, config):
    for flag, want in (when.get('args') or {}).items():
        have = config['args'].get(flag)
        if (want is True and have is None) or (want is not True and str(have) != str(want)):
            return False
    for name, want in (when.get('env') or {}).items():
        if config['env'].get(name) != want:
            return False
    return 'sm120_patch' not in when or when['sm120_patch'] == config['sm120_patch']


def select(profile, config):
    """The first entry whose ``when`` the configuration meets (an entry without ``when`` matches everything), with the
    profile's ``defaults`` for what it does not set."""
    for entry in profile['entries']:
        if _matches(entry.get('when') or {}, config):
            return dict(profile.get('defaults') or {}, **entry)
    raise ValueError('no profile entry matches %s; end the profile with an entry without "when"' % (config,))


def interpolate(points, concurrency, field):
    """``field`` of the profile points at ``concurrency``: linear between points, the nearest point outside them."""
    ordered = sorted(points, key=lambda point: point['concurrency'])
    if concurrency <= ordered[0]['concurrency']:
        return float(ordered[0][field])
    for low, high in zip(ordered, ordered[1:]):
        if concurrency <= high['concurrency']:
            share = (concurrency - low['concurrency']) / float(high['concurrency'] - low['concurrency'])
            return low[field] + (high[field] - low[field]) * share
    return float(ordered[-1][field])


class FixedRate:
    """Without a profile: every request gets its tokens at one decode rate, one token per chunk."""

    chunk_tokens = 1

    def __init__(self, tokens_per_second, sleep=time.sleep):
        self.interval = 1.0 / tokens_per_second
        self.sleep = sleep

    @contextlib.contextmanager
    def request(self):
        yield

    def take(self, tokens, first=False):
        del first  # the first token takes one interval like the others
        self.sleep(self.interval * tokens)


class Pacer:
    """Hands out output tokens to all streams together at the entry's rate for the number of streams running, the
    first token of a request after the entry's time to first token."""

    chunk_tokens = DEFAULT_CHUNK_TOKENS

    def __init__(self, entry, clock=time.monotonic, sleep=time.sleep):
        self.entry = entry
        self.clock = clock
        self.sleep = sleep
        self.lock = threading.Lock()
        self.active = 0
        self.next_free = 0.0

    @contextlib.contextmanager
    def request(self):
        """One request in flight for as long as the block runs (the rate and the power follow the count)."""
        with self.lock:
            self.active += 1
        try:
            yield
        finally:
            with self.lock:
                self.active -= 1

    def rate(self):
        return interpolate(self.entry['points'], max(1, self.active), 'output_tps')

    def take(self, tokens, first=False):
        """Wait until ``tokens`` output tokens are this stream's turn (after the prefill when ``first``)."""
        if first:
            self.sleep(self.entry['ttft_ms'] / 1000.0)
        with self.lock:
            now = self.clock()
            start = max(now, self.next_free)
            self.next_free = start + tokens / self.rate()
        if start > now:
            self.sleep(start - now)

    def power(self):
        """(watts, limit) of one GPU now: the entry's figure while streams run, the profile's idle figure otherwise."""
        if self.active:
            return interpolate(self.entry['points'], self.active, 'power_w'), self.entry['power_limit_w']
        return self.entry['idle_power_w'], self.entry['power_limit_w']


def gpu_answer(pacer, gpus):
    watts, limit = pacer.power()
    return {'gpus': gpus, 'power_w': round(watts, 2), 'power_limit_w': limit, 'active_streams': pacer.active,
            'profile_entry': pacer.entry.get('name'), 'note': 'SGLang stand-in: recorded profile figures, not a GPU'}
