# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The inputs of the sglang_service role, typed: its documented variables (meta/argument_specs.yml), read once per step
on the controller, and the digest of each one the no-change check compares.

Controller side only. ``Inputs.from_vars`` takes the role's variables (name -> templated value) and never reads anything
else, so a variable of the user's own that shares the prefix, or a registered result, never changes what runs.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

PREFIX = 'sglang_service_'

# The variables whose values change what runs on the host; each gets a digest in the deployment record, so a change of
# any of them makes the no-change check fail and names it. A variable that only says how a run checks or waits
# (timeouts, the smoke request, the benchmark) is not one of them. sglang_service_name ... sglang_service_dist_init_port
# are the role's own; the last three are the SM120 patch role's, which this role includes.
DIGESTED = (
    'sglang_service_name', 'sglang_service_version', 'sglang_service_install', 'sglang_service_venv',
    'sglang_service_venv_python', 'sglang_service_python', 'sglang_service_pip_packages', 'sglang_service_pip_extra_args',
    'sglang_service_wheelhouse', 'sglang_service_wheelhouse_dest', 'sglang_service_launch_command', 'sglang_service_host',
    'sglang_service_port', 'sglang_service_args', 'sglang_service_environment', 'sglang_service_secret_environment',
    'sglang_service_api_key', 'sglang_service_user', 'sglang_service_group', 'sglang_service_create_user',
    'sglang_service_device_groups', 'sglang_service_working_directory', 'sglang_service_config_dir', 'sglang_service_log_path',
    'sglang_service_restart_policy', 'sglang_service_restart_sec', 'sglang_service_timeout_stop_sec',
    'sglang_service_start_limit_burst', 'sglang_service_start_limit_interval_sec', 'sglang_service_hardening',
    'sglang_service_unit_extra', 'sglang_service_sm120_patch', 'sglang_service_deployment_group', 'sglang_service_node_rank',
    'sglang_service_dist_init_host', 'sglang_service_dist_init_port',
    'sglang_sm120_patch_sites', 'sglang_sm120_patch_glm5_only', 'sglang_sm120_patch_backup',
)
NOT_SET = '(not set)'
# The role's documented variables: what ansible-core's role argument validation checks, and what the plan step checks
# (llmops.sglang.deploy includes the role with rolespec_validate false: one task fewer per host and run).
ARGUMENT_SPECS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                              'roles', 'sglang_service', 'meta', 'argument_specs.yml')


def plain(value: Any) -> Any:
    """Templated data as plain JSON types (tagged strings and mappings of the templating engine included)."""
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def digest(value: Any) -> str:
    """sha256 of a value's JSON text (keys in their own order: the order of server arguments is the order of the flags)."""
    return hashlib.sha256(json.dumps(plain(value), ensure_ascii=False, separators=(',', ':')).encode('utf-8')).hexdigest()


@dataclass(frozen=True)
class Inputs:
    """The role's variables without the ``sglang_service_`` prefix; defaults are the role's (defaults/main.yml)."""

    name: str = 'sglang'
    config_dir: str = '/etc/sglang'
    version: str = '0.5.9'
    install: bool = True
    venv: str = '/opt/sglang/venv'
    venv_python: str = '/usr/bin/python3'
    python: str = ''
    pip_packages: Tuple[str, ...] = ()
    pip_extra_args: Tuple[str, ...] = ()
    wheelhouse: str = ''
    wheelhouse_dest: str = '/opt/sglang/wheelhouse'
    launch_command: Tuple[str, ...] = ()
    host: str = '0.0.0.0'
    port: int = 30000
    args: Dict[str, Any] = field(default_factory=lambda: {'model-path': 'Qwen/Qwen3-0.6B'})
    check_args: bool = True
    environment: Dict[str, Any] = field(default_factory=dict)
    secret_environment: Dict[str, Any] = field(default_factory=dict, repr=False)
    api_key: str = field(default='', repr=False)
    user: str = 'sglang'
    group: str = 'sglang'
    create_user: bool = True
    device_groups: Tuple[str, ...] = ('video', 'render')
    working_directory: str = '/var/lib/sglang'
    log_path: str = '/var/log/sglang/sglang.log'
    restart_policy: str = 'on-failure'
    restart_sec: int = 10
    timeout_stop_sec: int = 60
    start_limit_burst: int = 5
    start_limit_interval_sec: int = 600
    hardening: bool = True
    unit_extra: Dict[str, Any] = field(default_factory=dict)
    sm120_patch: str = ''
    wait: bool = True
    wait_timeout: int = 1800
    stall_timeout: int = 900
    stable_for: int = 15
    lock: bool = True
    lock_timeout: int = 1800
    drain: Dict[str, Any] = field(default_factory=dict)
    deployment_group: str = ''
    node_rank: Optional[int] = None
    dist_init_host: Optional[str] = None
    dist_init_port: int = 50000
    skip_unchanged: bool = True
    smoke: bool = True
    smoke_endpoint: str = 'generate'
    smoke_prompt: str = 'The capital of France is'
    smoke_max_tokens: int = 8
    smoke_timeout: int = 60
    history: bool = True
    history_keep: int = 50
    history_metrics_path: str = ''
    warm_caches: bool = True
    cache_dir: str = '/var/cache/sglang'
    cache_keep: int = 3
    rollback: bool = False
    benchmark: Dict[str, Any] = field(default_factory=dict)
    benchmark_threshold: float = 10.0
    benchmark_policy: str = 'rollback'
    benchmark_unchanged: bool = False
    change_name: str = ''
    preflight: bool = True
    preflight_cleanup: bool = True
    preflight_enforce: bool = True
    preflight_stop_timeout: float = 10.0
    preflight_min_free_gb: float = 2.0
    preflight_gpu_devices: Tuple[str, ...] = ()
    preflight_shared_devices: Tuple[str, ...] = ('/dev/nvidiactl', '/dev/nvidia-uvm', '/dev/nvidia-uvm-tools')
    gpu_health: str = 'fail'
    kernel_log: str = ''
    nvidia_smi: str = ''
    guard: bool = False
    guard_settings: Dict[str, Any] = field(default_factory=dict, repr=False)
    # the SM120 patch role's variables (without its prefix)
    sm120_patch_sites: Tuple[str, ...] = ()
    sm120_patch_glm5_only: bool = True
    sm120_patch_backup: bool = False

    @classmethod
    def names(cls) -> List[str]:
        """The variables the role reads, by their full names."""
        out = []
        for f in dataclasses.fields(cls):
            out.append(f.name.replace('sm120_patch_', 'sglang_sm120_patch_', 1) if f.name.startswith('sm120_patch_')
                       else PREFIX + f.name)
        return out

    @classmethod
    def from_vars(cls, values: Dict[str, Any]) -> 'Inputs':
        """``values``: variable name -> templated value, for the variables that are defined (see ``names``)."""
        return cls(**typed_fields(cls, cls.names(), values))

    @property
    def interpreter(self) -> str:
        """The interpreter that runs SGLang."""
        return self.python or self.venv.rstrip('/') + '/bin/python'

    @property
    def gate(self) -> bool:
        return bool(self.benchmark)

    @property
    def keeps_previous(self) -> bool:
        """A failed start (or, with the gate's policy rollback, a regression) goes back to the previous deployment."""
        return self.rollback or (self.gate and self.benchmark_policy == 'rollback')

    @property
    def change(self) -> str:
        return self.change_name or 'new configuration'


def role_options(path: str = ARGUMENT_SPECS) -> Dict[str, Any]:
    """The options of the role's entry point ``main`` (meta/argument_specs.yml), as an argument spec."""
    with open(path, 'rb') as spec:
        data = yaml.load(spec, Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader))
    return data['argument_specs']['main']['options']


def input_problems(options: Dict[str, Any], values: Dict[str, Any]) -> List[str]:
    """What the role's argument validation says of ``values`` (variable name -> templated value, the defined ones):
    one message per wrong type, choice or missing element, as ansible-core's role validation words it. Pure."""
    given = dict((name, plain(values[name])) for name in options if name in values)
    return list(ArgumentSpecValidator(options).validate(given).error_messages)


def likely_typos(names: Any) -> List[str]:
    """Warnings for the variables among ``names`` that share the role's prefix, are not its inputs and are one slip away
    from one (``sglang_service_arg``): a variable of the user's own stays theirs and changes nothing, but a misspelled
    input would leave the role's default in its place without a word."""
    known = set(Inputs.names()) | {'sglang_service_result'}
    out = []
    for name in sorted(n for n in names if isinstance(n, str) and n.startswith(PREFIX) and n not in known):
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.85)
        if near:
            out.append('%s is not a variable of the sglang_service role and changes nothing: did you mean %s?' % (name, near[0]))
    return out


def typed_fields(cls: Any, names: List[str], values: Dict[str, Any]) -> Dict[str, Any]:
    """The fields of dataclass ``cls`` from ``values`` (variable name -> templated value; ``names`` are the variables of
    its fields, in order), each in the type of the field's default; a variable that is not there keeps the default."""
    kwargs = {}
    for f, var in zip(dataclasses.fields(cls), names):
        if var in values:
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            kwargs[f.name] = _typed(plain(values[var]), default)
    return kwargs


def _typed(value: Any, default: Any) -> Any:
    """A value in the type of the field's default (the argument spec validated it already). A tuple field is a list of
    strings (``type: list, elements: str``): a number in it (``[--timeout, 60]``) becomes its text, as a command line wants."""
    if value is None:
        return default
    if isinstance(default, bool):
        return value if isinstance(value, bool) else str(value).lower() in ('1', 'true', 'yes', 'on')
    if isinstance(default, tuple):
        return tuple(str(v) for v in value) if isinstance(value, list) else (str(value),)
    if isinstance(default, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(default, float):
        return float(value)
    if isinstance(default, str):
        return str(value)
    return value


def input_digests(values: Dict[str, Any]) -> Dict[str, str]:
    """One digest per input that changes what runs (``DIGESTED``); a variable that is not set is "(not set)"."""
    return dict((name, digest(values[name] if name in values else NOT_SET)) for name in DIGESTED)
