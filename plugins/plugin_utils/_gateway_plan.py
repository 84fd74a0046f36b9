# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The sglang_gateway role's decisions as pure functions over typed inputs and what its steps observed.

Controller side only; nothing here touches a host. ``GatewayInputs`` are the role's variables (templated once),
``GatewayFacts`` what the steps of one run found and did (carried from step to step in the role's one result,
``sglang_gateway_result.facts``), and the rules below decide from both: the files' text (unit, workers, keys), why the
gateway restarts (what changed - release, launcher, keys, unit - and only when the unit is active), whether it starts
(not running), what check mode says (would start / would restart) and the result's fields
(``gateway_result``; documented in the RETURN of ``plugins/modules/sglang_gateway_deploy.py`` and docs/gateway.md).
"""

from __future__ import annotations

import dataclasses
import json
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_files import NETWORK_ONLINE, service_head
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import typed_fields
from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang_argv import cli_args, systemd_exec_args

# The changes that restart a running gateway, in the order a restart names them. A changed worker set is not one: it
# is applied live through the control plane.
RESTART_CAUSES = ('release', 'launcher', 'keys', 'unit')


@dataclass(frozen=True)
class GatewayInputs:
    """The role's variables (``sglang_gateway_<name>``), typed."""

    name: str = 'smg'
    package: str = 'smg'
    version: str = '1.13.0'
    venv: str = '/opt/smg/venv-smg-1.13.0'
    venv_python: str = '/usr/bin/python3'
    pip_extra_args: Tuple[str, ...] = ()
    wheelhouse: str = ''
    wheelhouse_dest: str = '/opt/smg/wheelhouse'
    host: str = '0.0.0.0'
    port: int = 30080
    prometheus_port: int = 29000
    policy: str = 'cache_aware'
    health_check_interval: int = 10
    health_check_timeout: int = 5
    health_failure_threshold: int = 3
    health_success_threshold: int = 2
    health_check_endpoint: str = '/health'
    shutdown_grace_period: int = 180
    args: Dict[str, Any] = field(default_factory=dict)
    log_json: bool = True
    worker_group: str = 'sglang'
    prefill_group: str = ''
    decode_group: str = ''
    api_key: str = ''
    admin_key: str = ''
    control_plane_keys: Tuple[str, ...] = ()
    user: str = 'smg'
    group: str = 'smg'
    config_dir: str = '/etc/smg'
    working_directory: str = '/var/lib/smg'
    hardening: bool = True
    restart_sec: int = 5
    wait_timeout: int = 180
    smoke: bool = True
    smoke_timeout: int = 60

    @classmethod
    def names(cls) -> List[str]:
        """The role's variables the plan reads."""
        return ['sglang_gateway_' + f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_vars(cls, values: Dict[str, Any]) -> 'GatewayInputs':
        """From the role's variables, each in its default's type (missing ones take the role's defaults)."""
        return cls(**typed_fields(cls, cls.names(), values))

    def to_json(self) -> Dict[str, Any]:
        """Without the keys (they never go into a result)."""
        out = dataclasses.asdict(self)
        for secret in ('api_key', 'admin_key', 'control_plane_keys'):
            out.pop(secret)
        return out


@dataclass(frozen=True)
class Paths:
    """Where the role's files are on the host, and where the gateway answers."""

    unit: str
    workers_file: str
    secret_file: str
    launcher: str
    url: str
    metrics_url: str
    launch_module: str


def paths(inputs: GatewayInputs) -> Paths:
    return Paths(unit='/etc/systemd/system/%s.service' % inputs.name,
                 workers_file='%s/%s.workers.json' % (inputs.config_dir, inputs.name),
                 secret_file='%s/%s.secret.json' % (inputs.config_dir, inputs.name),
                 launcher='/opt/%s/gateway_launch.py' % inputs.name,
                 url='http://127.0.0.1:%d' % inputs.port,
                 metrics_url='http://127.0.0.1:%d/metrics' % inputs.prometheus_port,
                 launch_module='%s.launch_router' % inputs.package.replace('-', '_'))


def refusal(inputs: GatewayInputs) -> Optional[str]:
    """Why the role refuses its inputs before anything is touched, or None."""
    if not inputs.admin_key:
        return ('sglang_gateway_admin_key is empty: the role registers the workers and a rolling change takes them out of '
                'rotation through the gateway\'s control plane, which needs an admin key. Set it (from a vault), for '
                'example sglang_gateway_admin_key: "{{ vault_gateway_admin_key }}".')
    return None


def pip_args(inputs: GatewayInputs) -> Dict[str, Any]:
    """ansible.builtin.pip's arguments: the pinned release into its own venv, from the wheelhouse only when there is one."""
    extra = list(inputs.pip_extra_args)
    if inputs.wheelhouse:
        extra += ['--no-index', '--find-links', inputs.wheelhouse_dest]
    return {'name': '%s==%s' % (inputs.package, inputs.version), 'virtualenv': inputs.venv,
            'virtualenv_command': '%s -m venv' % inputs.venv_python, 'extra_args': ' '.join(shlex.quote(a) for a in extra)}


def argv(inputs: GatewayInputs, mode: str) -> List[str]:
    """The unit's command line: the launcher, its own options, then smg's (no key, no worker: those come from files)."""
    p = paths(inputs)
    words = [inputs.venv + '/bin/python', p.launcher, '--launch-module', p.launch_module, '--workers-file', p.workers_file,
             '--credential', 'secrets.json'] + (['--mode', 'pd'] if mode == 'pd' else []) + ['--']
    flags: Dict[str, Any] = {'host': inputs.host, 'port': inputs.port, 'prometheus-port': inputs.prometheus_port,
                             'policy': inputs.policy, 'health-check-interval-secs': inputs.health_check_interval,
                             'health-check-timeout-secs': inputs.health_check_timeout,
                             'health-failure-threshold': inputs.health_failure_threshold,
                             'health-success-threshold': inputs.health_success_threshold,
                             'health-check-endpoint': inputs.health_check_endpoint,
                             'shutdown-grace-period-secs': inputs.shutdown_grace_period, 'log-json': inputs.log_json}
    flags.update(inputs.args)
    return words + cli_args(flags)


# Hardening as the server's unit (docs/gateway.md), and more.
HARDENING = ('NoNewPrivileges=yes', 'PrivateTmp=yes', 'PrivateDevices=yes', 'ProtectSystem=strict', 'ReadWritePaths=%s',
             'ProtectHome=yes', 'ProtectControlGroups=yes', 'ProtectKernelLogs=yes', 'ProtectKernelModules=yes',
             'ProtectKernelTunables=yes', 'ProtectClock=yes', 'RestrictSUIDSGID=yes', 'RestrictRealtime=yes',
             'RestrictNamespaces=yes', 'RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX', 'LockPersonality=yes')


def unit_text(inputs: GatewayInputs, mode: str, managed: str) -> str:
    """The gateway's systemd unit (checked with systemd-analyze verify on the host before it replaces the old one)."""
    p = paths(inputs)
    lines = [
        '# %s' % (managed or 'Ansible managed'),
        '[Unit]',
        'Description=SGLang model gateway (%s: %s %s)' % (inputs.name, inputs.package, inputs.version),
        'Documentation=https://github.com/lightseekorg/smg',
        *NETWORK_ONLINE,
        'StartLimitIntervalSec=300',
        'StartLimitBurst=5',
        *service_head(inputs.user, inputs.group, inputs.working_directory),
        '# The keys (--api-key, --control-plane-api-keys) reach the launcher as a credential file in the unit\'s credential',
        '# directory: never in the unit, the environment or the process list.',
        'LoadCredential=secrets.json:%s' % p.secret_file,
        'ExecStart=%s' % systemd_exec_args(argv(inputs, mode)),
        'Restart=on-failure',
        'RestartSec=%d' % inputs.restart_sec,
        '# smg lets requests in flight run on for --shutdown-grace-period-secs after SIGTERM.',
        'TimeoutStopSec=%d' % (inputs.shutdown_grace_period + 30),
        'KillMode=control-group',
        'SyslogIdentifier=%s' % inputs.name,
        'LimitNOFILE=1048576',
    ]
    if inputs.hardening:
        lines += ['# Hardening as the server\'s unit (docs/gateway.md), and more: the gateway needs no device, no write outside its',
                  '# working directory and only IP and UNIX sockets.']
        lines += [line % inputs.working_directory if '%s' in line else line for line in HARDENING]
    lines += ['', '[Install]', 'WantedBy=multi-user.target']
    return '\n'.join(lines) + '\n'


def _nice_json(value: Any) -> str:
    """As ansible.builtin.to_nice_json writes it."""
    return json.dumps(value, indent=4, sort_keys=True, separators=(',', ': '))


def workers_text(mode: str, api_workers: List[Dict[str, Any]]) -> str:
    """The workers the launcher starts the gateway with (a changed set is applied live, never by a restart)."""
    return _nice_json({'mode': mode, 'workers': api_workers}) + '\n'


def secret_text(inputs: GatewayInputs) -> str:
    """The keys, for the unit's credential: the client key and the control plane's (the role's admin key first)."""
    return _nice_json({'api_key': inputs.api_key or None,
                       'control_plane_api_keys': ['ops:llmops.sglang:admin:' + inputs.admin_key] + list(inputs.control_plane_keys)})


@dataclass
class GatewayFacts:
    """What the steps of one run found and did on the gateway's host (carried in ``sglang_gateway_result.facts``)."""

    mode: str = 'regular'
    api_workers: List[Dict[str, Any]] = field(default_factory=list)
    # what changed: release (pip), launcher, workers (the file), keys, unit
    changed_files: Dict[str, bool] = field(default_factory=dict)
    release_version: Optional[str] = None
    active_state: str = ''
    reasons: List[str] = field(default_factory=list)
    restarted: bool = False
    started: bool = False
    workers: Optional[Dict[str, Any]] = None
    smoke: Optional[Dict[str, Any]] = None
    failure: Optional[Dict[str, Any]] = None

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Optional[Dict[str, Any]]) -> 'GatewayFacts':
        if not isinstance(data, dict):
            return cls()
        names = set(f.name for f in dataclasses.fields(cls))
        return cls(**dict((k, v) for k, v in data.items() if k in names))

    @property
    def running(self) -> bool:
        return self.active_state == 'active'


def restart_reasons(changed: Dict[str, bool], active_state: str) -> List[str]:
    """What changed that the running gateway reads at its start only; nothing when the unit is not active (it starts)."""
    if active_state != 'active':
        return []
    return [cause for cause in RESTART_CAUSES if changed.get(cause)]


def check_release(check_mode: bool, release_changed: bool) -> bool:
    """Whether the installed release can be asked for its control-plane API (a dry run does not install it)."""
    return not (check_mode and release_changed)


def start_step(reasons: List[str], check_mode: bool, unit_changed: bool) -> bool:
    """Whether the role runs 'start' (idempotent: starts a unit that is not running): not when it restarts, and not in a
    dry run that would write the unit first (the unit is not there to start; the result says it would start)."""
    return not reasons and not (check_mode and unit_changed)


def talks_to_gateway(check_mode: bool, running: bool) -> bool:
    """Whether the workers and the smoke request run: always for real, in a dry run only against a serving gateway."""
    return not check_mode or running


@dataclass
class GatewayResult:
    """``sglang_gateway_result``: the role's one public result (fields in plugins/modules/sglang_gateway_deploy.py)."""

    status: str
    changed: bool
    restarted: bool
    started: bool
    reasons: List[str]
    release: str
    url: str
    mode: str
    workers: List[Any]
    added: List[Any]
    removed: List[Any]
    in_rotation: int
    smoke: Dict[str, Any]
    check_mode: bool
    msg: str
    failure: Optional[Dict[str, Any]] = None

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def _summary(res: GatewayResult) -> str:
    """One line: what the gateway holds and what the run did (the gateway playbook's line)."""
    if res.failure:
        return 'failed at step %s: %s' % (res.failure.get('step'), res.failure.get('msg'))
    if res.restarted:
        did = '%s: %s changed' % ('would restart' if res.check_mode else 'restarted', ', '.join(res.reasons))
    elif res.started:
        did = 'would start' if res.check_mode else 'started'
    else:
        did = 'not restarted'
    line = '%s at %s, %d worker(s) in rotation (%s%s)' % (res.release, res.url, res.in_rotation, did,
                                                          '; dry run, check mode: nothing was changed' if res.check_mode else '')
    if res.smoke.get('ok'):
        line += '; request through it answered in %ss' % res.smoke.get('total')
    return line


def gateway_result(inputs: GatewayInputs, facts: GatewayFacts, check_mode: bool) -> GatewayResult:
    """The role's result from its inputs and what the steps observed."""
    workers = facts.workers or {}
    verdict = workers.get('verdict') or {}
    res = GatewayResult(
        status='failed' if facts.failure else ('ready' if verdict.get('done') else 'not checked'),
        changed=bool(facts.reasons) or facts.started or bool(workers.get('changed')),
        restarted=bool(facts.reasons),
        started=facts.started or (check_mode and not facts.running and not facts.failure),
        reasons=list(facts.reasons),
        release='%s %s' % (inputs.package, facts.release_version or inputs.version),
        url=paths(inputs).url, mode=facts.mode,
        workers=list(workers.get('workers') or []), added=list(workers.get('added') or []),
        removed=list(workers.get('removed') or []), in_rotation=int(workers.get('in_rotation') or 0),
        smoke=dict(facts.smoke or {}), check_mode=check_mode, msg='', failure=facts.failure)
    res.msg = _summary(res)
    return res
