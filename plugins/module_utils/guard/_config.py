# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The guard's settings: one ``GuardConfig`` the module writes as JSON (mode 0600: it may hold the API key and the
gateway's admin key) and every round reads back; :func:`problems` says what is wrong with one before anything runs.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ansible_collections.llmops.sglang.plugins.module_utils.host._state_file import typed
from ansible_collections.llmops.sglang.plugins.module_utils.preflight._gpu_holders import SHARED_DEVICES
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._smoke import ENDPOINTS, SmokeRequest

FORMAT = 1


@dataclass
class GatewaySettings:
    """The SGLang model gateway in front of this server: its URL, an admin key of its control plane, this server's URL
    as the gateway knows it, and how long a worker may take to be back in rotation."""

    url: str
    worker_url: str
    admin_key: Optional[str] = None
    api_key: Optional[str] = None
    worker_api_key: Optional[str] = None
    worker_type: str = 'regular'
    timeout: float = 10.0
    return_timeout: float = 120.0


@dataclass
class GuardConfig:
    """Everything one round needs. Times in seconds; ``*_window`` are sliding windows ending now."""

    unit: str = 'sglang.service'
    url: str = 'http://127.0.0.1:30000'
    api_key: Optional[str] = None
    endpoint: str = 'generate'
    prompt: str = 'The capital of France is'
    max_tokens: int = 4
    smoke_timeout: float = 20.0
    interval: float = 30.0
    hung_after: int = 2
    restart_max: int = 1
    restart_window: float = 3600.0
    crash_restarts: int = 3
    crash_window: float = 600.0
    start_timeout: float = 1800.0
    stall_timeout: float = 900.0
    stop_timeout: float = 10.0
    log_path: str = ''
    run_file: str = ''
    lock_path: str = ''
    state_path: str = '/var/lib/sglang/sglang.guard.json'
    metrics_path: str = ''
    kernel_log: str = ''
    nvidia_smi: str = ''
    user: Optional[str] = None
    environment: Dict[str, str] = field(default_factory=dict)
    gpu_devices: List[str] = field(default_factory=list)
    shared_devices: List[str] = field(default_factory=lambda: list(SHARED_DEVICES))
    server_args: Dict[str, Any] = field(default_factory=dict)
    # SGLang's --disaggregation-mode: a prefill or decode server answers only requests with bootstrap information
    disaggregation_mode: str = 'null'
    events_keep: int = 20
    gateway: Optional[GatewaySettings] = None
    format: int = FORMAT

    def to_json(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data):
        return typed(cls, data, 'guard settings')

    def generation_request(self):
        """The one small bounded generation request of a round and of a restart's proof (the smoke request's code)."""
        return SmokeRequest(url=self.url, endpoint=self.endpoint, prompt=self.prompt, max_tokens=self.max_tokens,
                            timeout=self.smoke_timeout, api_key=self.api_key, disaggregation_mode=self.disaggregation_mode)

    def text(self):
        return json.dumps(self.to_json(), indent=1, sort_keys=True) + '\n'


def problems(config):
    """What is wrong with a configuration, each with what to do; [] when it can run."""
    found = []
    if not config.url.startswith(('http://', 'https://')):
        found.append('url %r must start with http:// or https:// (the server\'s own address, e.g. http://127.0.0.1:30000)' % config.url)
    if config.disaggregation_mode not in ('null', 'prefill', 'decode'):
        found.append('disaggregation_mode %r is not one of null, prefill, decode (SGLang\'s --disaggregation-mode)' % config.disaggregation_mode)
    if config.endpoint not in ENDPOINTS:
        found.append('endpoint %r is not one of %s' % (config.endpoint, ', '.join(sorted(ENDPOINTS))))
    for name in ('interval', 'smoke_timeout', 'restart_window', 'crash_window', 'start_timeout', 'stop_timeout'):
        if getattr(config, name) <= 0:
            found.append('%s must be more than 0 seconds, got %s' % (name, getattr(config, name)))
    for name in ('hung_after', 'crash_restarts', 'max_tokens', 'events_keep'):
        if getattr(config, name) < 1:
            found.append('%s must be 1 or more, got %s' % (name, getattr(config, name)))
    if config.restart_max < 0:
        found.append('restart_max must be 0 (never restart) or more, got %s' % config.restart_max)
    if config.smoke_timeout >= config.interval:
        found.append('smoke_timeout (%gs) must be shorter than interval (%gs): a round must end before the next one is due'
                     % (config.smoke_timeout, config.interval))
    if config.metrics_path and not config.metrics_path.endswith('.prom'):
        found.append('metrics_path %s must end in .prom: node_exporter\'s textfile collector reads only *.prom files' % config.metrics_path)
    if config.gateway is not None and not config.gateway.worker_url.startswith(('http://', 'https://')):
        found.append('gateway.worker_url %r must be this server\'s URL as the gateway knows it (http://HOST:PORT)' % config.gateway.worker_url)
    return found
