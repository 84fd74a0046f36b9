# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One guard round's look at the host, as an ``Observation`` for the pure decision: the unit (``systemctl show``),
``GET /health``, one small bounded generation request (the smoke request's code, ``sglang/_smoke``), the unit's
journal since the last round (``journalctl --after-cursor``), the kernel log's NVIDIA lines (the pre-flight's reader)
and which of them are new, and the server's GPUs as ``nvidia-smi -q`` lists them.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import os
from typing import Dict, List

from ansible_collections.llmops.sglang.plugins.module_utils.host._procfs import boot_id
from ansible_collections.llmops.sglang.plugins.module_utils.host._systemd import SystemdError, show
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _smi_q as smi_q
from ansible_collections.llmops.sglang.plugins.module_utils.nvidia import _xid as xid
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _gpu_health as gpu_health
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._probe import http_get
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._smoke import run_smoke
from ansible_collections.llmops.sglang.plugins.module_utils.guard._decide import Observation

UNIT_PROPERTIES = ('ActiveState', 'SubState', 'Result', 'InvocationID', 'NRestarts', 'ActiveEnterTimestampMonotonic')
JOURNAL_KEEP = 40  # journal lines of the unit kept per round for an event's context


def line_keys(text):
    """A key per line that tells a repeated identical line apart: the line and how often it occurred before."""
    counts: Dict[str, int] = {}
    keys = []
    for line in (text or '').splitlines():
        if not line.strip():
            continue
        counts[line] = counts.get(line, 0) + 1
        keys.append('%d\t%s' % (counts[line], line))
    return keys


def new_fault_lines(text, seen, wanted_pcis):
    """One line per GPU and Xid code of the new fault Xids of the server's GPUs (``wanted_pcis``; None: every GPU) in
    ``text``, that is, of its lines not in ``seen``: 'GPU 0000:9b:00: Xid 119 (GSP RPC Timeout; NVIDIA: RESET_GPU) x5,
    last: ...'."""
    seen = set(seen)
    fresh = '\n'.join(key.split('\t', 1)[1] for key in line_keys(text) if key not in seen)
    grouped: Dict[tuple, list] = {}
    for event in xid.parse(fresh):
        if event.severity == xid.FAULT and (wanted_pcis is None or event.pci in wanted_pcis):
            grouped.setdefault((event.pci, event.code), []).append(event)
    return ['GPU %s: %s x%d, last: %r' % (pci, events[-1].describe(), len(events), events[-1].line[-160:])
            for (pci, dummy_code), events in grouped.items()]


def uptime():
    try:
        with open('/proc/uptime', encoding='ascii') as handle:
            return float(handle.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class Observer:
    """Reads the host for one round. ``run`` is a ``host/_command`` runner, ``which`` finds a tool."""

    def __init__(self, config, run, which):
        self.config = config
        self.run = run
        self.which = which

    def unit(self, obs):
        systemctl = self.which('systemctl') or 'systemctl'
        try:
            props = show(self.config.unit, UNIT_PROPERTIES, self.run, systemctl)
        except SystemdError as err:
            obs.result = 'unreadable: %s' % err.msg
            return
        obs.active_state, obs.sub_state = props.get('ActiveState', ''), props.get('SubState', '')
        obs.result, obs.invocation, obs.nrestarts = props.get('Result', ''), props.get('InvocationID', ''), props.get('NRestarts')
        entered, now = props.get('ActiveEnterTimestampMonotonic') or '0', uptime()
        if obs.active and entered.isdigit() and int(entered) > 0 and now is not None:
            obs.active_for = max(0.0, now - int(entered) / 1e6)

    def serving(self, obs):
        """GET /health, then (when anything answered) one small bounded generation request."""
        config = self.config
        health = http_get(config.url, '/health', api_key=config.api_key, timeout=min(5.0, config.smoke_timeout))
        obs.health = health['status']
        if obs.health is None and not obs.active:
            return
        smoke = run_smoke(config.generation_request())
        obs.smoke_ok, obs.smoke_error = smoke.ok, '' if smoke.ok else smoke.message()

    def journal(self, obs, cursor):
        journalctl = self.which('journalctl')
        if not journalctl:
            return
        argv = [journalctl, '-u', self.config.unit, '--show-cursor', '-q', '--no-pager', '-o', 'short-iso']
        argv += ['--after-cursor', cursor] if cursor else ['-n', str(JOURNAL_KEEP)]
        rc, out, dummy = self.run(argv)
        if rc != 0:
            return
        lines = out.splitlines()
        if lines and lines[-1].startswith('-- cursor: '):
            obs.journal_cursor = lines.pop()[len('-- cursor: '):].strip()
        obs.journal = lines[-JOURNAL_KEEP:]

    def gpus(self, obs, seen):
        """The kernel log's new fault Xids of the server's GPUs, and the server's GPUs nvidia-smi no longer lists."""
        config = self.config
        text, dummy = gpu_health.read_kernel_log(self.run, self.which, config.kernel_log or None)
        wanted = gpu_health.wanted_gpus(config.environment, config.gpu_devices, config.server_args)
        smi = config.nvidia_smi if config.nvidia_smi and os.path.exists(config.nvidia_smi) else self.which(config.nvidia_smi or 'nvidia-smi')
        pcis = None
        if smi:
            rc, out, err = self.run([smi, '-q'])
            report = smi_q.parse((out or '') + (err or ''))
            matched = gpu_health.match(wanted, report.gpus)
            if report.failure:
                obs.gone_gpus.append('%s (nvidia-smi: %s)' % (report.failed_pci or 'a GPU', report.failure))
            elif report.gpus:
                obs.gone_gpus.extend('%s (%s; nvidia-smi lists %d)' % (label, wanted.by, len(report.gpus)) for label, gpu in matched if gpu is None)
                pcis = set(gpu.pci for dummy_label, gpu in matched if gpu is not None)
        obs.line_keys = line_keys(text)
        obs.new_faults = new_fault_lines(text, seen, pcis) if text else []

    def observe(self, state):
        obs = Observation(boot_id=boot_id())
        obs.first_round = state.rounds == 0 or (state.boot_id != '' and obs.boot_id != state.boot_id)
        self.unit(obs)
        self.serving(obs)
        self.journal(obs, state.journal_cursor)
        self.gpus(obs, state.seen_lines)
        return obs


def describe(obs) -> List[str]:
    """The observation in a few words per part, for an event's detail."""
    return ['unit %s/%s%s' % (obs.active_state, obs.sub_state, ' (%s)' % obs.result if obs.result not in ('', 'success') else ''),
            'GET /health %s' % (obs.health or 'no answer'),
            'generation %s' % ('ok' if obs.smoke_ok else 'not sent' if obs.smoke_ok is None else 'failed')]
