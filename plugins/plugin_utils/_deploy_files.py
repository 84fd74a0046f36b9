# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The text of the files the sglang_service role writes: the systemd unit, the environment files and the API-key file.

Controller side only; pure functions of the inputs and the plan. The unit is checked with ``systemd-analyze verify`` on
the host before it replaces the old one (llmops.sglang.sglang_config_file).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

import yaml

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import Inputs
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_plan import Plan
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang_argv import systemd_exec_args

# Hardening that leaves CUDA working (docs/sglang_service.md explains each line and what is left out).
HARDENING = ('NoNewPrivileges=yes', 'PrivateTmp=yes', 'ProtectSystem=full', 'ProtectHome=read-only',
             'ProtectControlGroups=yes', 'ProtectKernelLogs=yes', 'ProtectClock=yes', 'RestrictSUIDSGID=yes',
             'RestrictRealtime=yes', 'LockPersonality=yes')


# A unit that serves on the network starts once the network is up (the server's and the gateway's).
NETWORK_ONLINE = ('Wants=network-online.target', 'After=network-online.target')


def service_head(user: str, group: str, working_directory: str) -> List[str]:
    """The [Service] section's first lines: a simple service of its own account, in its own directory."""
    return ['', '[Service]', 'Type=simple', 'User=%s' % user, 'Group=%s' % group, 'WorkingDirectory=%s' % working_directory]


def _header(managed: str) -> str:
    return '# %s\n' % (managed or 'Ansible managed')


def environment_text(env: Dict[str, Any], managed: str) -> str:
    """An EnvironmentFile=: one NAME="value" per line, sorted, values JSON-quoted (systemd reads the same escapes)."""
    lines = ['%s=%s' % (name, json.dumps('' if env[name] is None else str(env[name]), ensure_ascii=False)) for name in sorted(env)]
    return _header(managed) + ''.join(line + '\n' for line in lines)


def secret_args_text(api_key: str) -> str:
    """SGLang's --config file holding the API key (a YAML mapping, quoted only where YAML needs it)."""
    return yaml.safe_dump({'api-key': api_key}, default_flow_style=False, allow_unicode=True)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return 'yes' if value else 'no'
    return str(value)


def unit_text(inputs: Inputs, plan: Plan, managed: str) -> str:
    """The systemd unit of the server."""
    exec_start = systemd_exec_args(plan.argv)
    lines = [
        '[Unit]',
        'Description=SGLang inference server (%s)' % inputs.name,
        'Documentation=https://docs.sglang.ai/',
        *NETWORK_ONLINE,
        '# Restart=on-failure below must not loop forever on a start that always fails.',
        'StartLimitIntervalSec=%s' % inputs.start_limit_interval_sec,
        'StartLimitBurst=%s' % inputs.start_limit_burst,
        *service_head(inputs.user, inputs.group, inputs.working_directory),
        'EnvironmentFile=%s' % plan.paths.env,
        'EnvironmentFile=%s' % plan.paths.secret_env,
    ]
    if inputs.api_key:
        lines += ['# The API key reaches SGLang as a --config file in the unit\'s credential directory, so it never appears',
                  '# in the unit, the environment or the process list.',
                  'LoadCredential=secret-args.yaml:%s' % plan.paths.secret_args,
                  'ExecStart=%s --config %%d/secret-args.yaml' % exec_start]
    else:
        lines.append('ExecStart=%s' % exec_start)
    if inputs.log_path:
        lines += ['StandardOutput=append:%s' % inputs.log_path, 'StandardError=append:%s' % inputs.log_path]
    lines += [
        'Restart=%s' % inputs.restart_policy,
        'RestartSec=%s' % inputs.restart_sec,
        '# Every stop ends within TimeoutStopSec: SIGTERM to the whole cgroup (the schedulers too), SIGKILL after the bound.',
        '# SGLang ignores SIGTERM while it loads (sgl-project/sglang#16145) and its children can outlive it (#23627).',
        'TimeoutStopSec=%s' % inputs.timeout_stop_sec,
        'KillMode=control-group',
        'SendSIGKILL=yes',
        '# Hugging Face and FlashInfer/Triton JIT caches go under the service\'s own home.',
        'Environment=HOME=%s' % inputs.working_directory,
        '# NCCL pins host memory and opens many sockets/IPC handles per GPU.',
        'LimitMEMLOCK=infinity',
        'LimitNOFILE=1048576',
    ]
    if inputs.hardening:
        lines += ['# Hardening that leaves CUDA working (docs/sglang_service.md explains each line and what is left out):']
        lines += list(HARDENING)
    lines += ['%s=%s' % (key, _value(inputs.unit_extra[key])) for key in sorted(inputs.unit_extra)]
    lines += ['', '[Install]', 'WantedBy=multi-user.target']
    return _header(managed) + '\n'.join(lines) + '\n'
