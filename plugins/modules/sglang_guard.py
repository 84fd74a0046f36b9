#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_guard
short_description: Install, remove or read the runtime guard of an SGLang server
version_added: 0.3.0
description:
  - The guard watches one SGLang server after its start, on the host, between Ansible runs (docs/guard.md). A systemd
    timer runs one round of it every O(interval) seconds as a oneshot service.
  - A round sends one small bounded generation request (as M(llmops.sglang.sglang_smoke)), reads the unit, C(/health),
    the unit's journal since the last round and the kernel log. It decides V(hung) when generation timed out or
    returned nothing while C(/health) answered 200, O(hung_after) rounds in a row. It decides V(crash_loop) when systemd
    restarted the unit O(crash_restarts) times within O(crash_window). It decides V(gpu_fault) on a new Xid of one of
    the server's GPUs that NVIDIA's Xid catalog says needs a GPU reset or a reboot, or a GPU that C(nvidia-smi) no
    longer lists.
  - It restarts the unit for V(hung), at most O(restart_max) times within O(restart_window). The restart stops the unit,
    checks that no process of the server still holds its GPUs, starts it, waits until it is ready and a generation
    request answers. It never restarts for V(gpu_fault) or V(crash_loop). It stops the unit then and holds it stopped
    until someone starts it again. With O(gateway), the server leaves the gateway's rotation before an action and comes
    back only after a proven start.
  - Each event is a line in the guard's journal (C(journalctl -u <name>)) and a count in
    C(sglang_guard_events_total{kind=...}) of O(metrics_path).
  - With O(state=present) it writes the guard's own Python code (the collection's module_utils this module runs with,
    standard library only), its settings (mode 0600), the service and the timer, and enables the timer.
    O(state=absent) removes all of it. O(state=query) reads the guard's state and changes nothing.
options:
  state:
    description: V(present) installs or updates the guard, V(absent) removes it, V(query) reads its last events.
    type: str
    choices: [present, absent, query]
    default: present
  name:
    description: Name of the guard's service and timer. The default is the unit's name with C(-guard), C(sglang-guard).
    type: str
  unit:
    description: The server's systemd unit.
    type: str
    default: sglang.service
  enabled:
    description: With O(state=present), whether the timer runs rounds. V(false) installs the guard without starting it.
    type: bool
    default: true
  python:
    description: The interpreter that runs the guard (Python 3.9+). The default is the one this module runs with.
    type: path
  install_dir:
    description: Where the guard's code goes. The default is C(/usr/local/lib/llmops-sglang/<name>).
    type: path
  config_path:
    description: The guard's settings file (JSON, mode 0600). The default is C(/etc/sglang/<name>.json).
    type: path
  state_path:
    description: The guard's state file (its counters and last events). The default is C(/var/lib/sglang/<name>.json).
    type: path
  url:
    description: The server's base URL on the host.
    type: str
    default: http://127.0.0.1:30000
  api_key:
    description: The server's C(--api-key), sent with the generation request.
    type: str
  endpoint:
    description: Where the generation request goes.
    type: str
    choices: [generate, completions, chat_completions]
    default: generate
  disaggregation_mode:
    description:
      - The server's C(--disaggregation-mode). A V(prefill) or V(decode) server of a prefill/decode disaggregated
        deployment answers only requests with bootstrap information; the guard's generation request then carries SGLang's
        own fake bootstrap host, as M(llmops.sglang.sglang_smoke) does. The P(llmops.sglang.sglang_service#role) role
        sets it from the server's arguments.
    type: str
    choices: ['null', prefill, decode]
    default: 'null'
    version_added: 0.3.0
  prompt:
    description: The generation request's prompt.
    type: str
    default: The capital of France is
  max_tokens:
    description: Tokens the generation request asks for.
    type: int
    default: 4
  smoke_timeout:
    description: Seconds the generation request may take in all. Shorter than O(interval).
    type: float
    default: 20
  interval:
    description: Seconds between two rounds.
    type: float
    default: 30
  hung_after:
    description: Rounds in a row with a failed generation request that make a hang.
    type: int
    default: 2
  restart_max:
    description: Restarts for a hang within O(restart_window) at most. V(0) never restarts.
    type: int
    default: 1
  restart_window:
    description: Seconds of the window O(restart_max) counts in.
    type: float
    default: 3600
  crash_restarts:
    description: Restarts by systemd within O(crash_window) that make a crash loop.
    type: int
    default: 3
  crash_window:
    description: Seconds of the window O(crash_restarts) counts in.
    type: float
    default: 600
  start_timeout:
    description: Seconds a restart by the guard may take to be ready (the readiness wait's timeout).
    type: float
    default: 1800
  stall_timeout:
    description: Seconds without progress after which the restart's readiness wait gives up.
    type: float
    default: 900
  stop_timeout:
    description: Seconds an orphan of the server gets after SIGTERM in the GPU release check, before SIGKILL.
    type: float
    default: 10
  log_path:
    description: The server's log file. The restart's readiness wait reads it from the new run's first byte. Empty reads
      the unit's journal.
    type: str
    default: ''
  run_file:
    description: The run record of the unit (as M(llmops.sglang.sglang_restart)), updated by the guard's restarts.
    type: str
    default: ''
  lock_path:
    description: The deploy's host lock (as M(llmops.sglang.sglang_host_lock)). While a deploy holds it, a round only notes
      that and does nothing else.
    type: str
    default: ''
  metrics_path:
    description: A C(.prom) file in node_exporter's textfile-collector directory for the guard's counters. Empty
      writes none.
    type: str
    default: ''
  kernel_log:
    description: A kernel log file to read Xid lines from. The default reads C(journalctl -k -b 0), else C(dmesg).
    type: str
    default: ''
  nvidia_smi:
    description: The C(nvidia-smi) to list the GPUs with. The default is the one on C(PATH).
    type: str
    default: ''
  user:
    description: The service user, for telling the server's orphans apart in the GPU release check.
    type: str
  environment:
    description: The server's environment. Its C(CUDA_VISIBLE_DEVICES) says which GPUs are the server's.
    type: dict
    default: {}
  server_args:
    description: The server's arguments (flag name to value), for the GPUs it takes without C(CUDA_VISIBLE_DEVICES).
    type: dict
    default: {}
  events_keep:
    description: Events kept in the state file.
    type: int
    default: 20
  show:
    description: With O(state=query), how many of the last events to return.
    type: int
    default: 5
  gateway:
    description: The SGLang model gateway in front of the server. The server leaves its rotation before the guard acts
      and returns after a proven start.
    type: dict
    suboptions:
      url:
        description: The gateway's base URL, as the host reaches it.
        type: str
        required: true
      worker_url:
        description: This server's URL as the gateway knows it.
        type: str
        required: true
      admin_key:
        description: An admin key of the gateway's C(--control-plane-api-keys).
        type: str
      api_key:
        description: The gateway's C(--api-key), for the route proof's requests.
        type: str
      worker_api_key:
        description: The server's C(--api-key), given to the gateway when the worker is registered again.
        type: str
      worker_type:
        description: The worker's type in the gateway.
        type: str
        choices: [regular, prefill, decode]
        default: regular
      timeout:
        description: Seconds of one control-plane call, and for the gateway to take the worker out.
        type: float
        default: 10
      return_timeout:
        description: Seconds the worker may take to be back in rotation after a restart.
        type: float
        default: 120
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
  - llmops.sglang._release_check
attributes:
  check_mode:
    support: full
    details: Reports which files would be written or removed and whether the timer would be started; changes nothing.
  diff_mode:
    support: none
notes:
  - Needs root (C(become=true)). The guard runs as root to read the kernel log and the processes of the service user.
  - The guard's code is the module_utils this module runs with; a newer collection updates it at the next run.
seealso:
  - module: llmops.sglang.sglang_smoke
  - module: llmops.sglang.sglang_restart
  - module: llmops.sglang.sglang_preflight
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Guard the server, one round every 30 seconds
  llmops.sglang.sglang_guard:
    unit: sglang.service
    url: http://127.0.0.1:30000
    log_path: /var/log/sglang/sglang.log
    metrics_path: /var/lib/node_exporter/textfile_collector/sglang-guard.prom
    environment:
      CUDA_VISIBLE_DEVICES: "0,1,2,3"

- name: Guard a server behind the SGLang model gateway
  llmops.sglang.sglang_guard:
    unit: sglang.service
    gateway:
      url: http://10.0.0.2:30080
      worker_url: http://10.0.0.5:30000
      admin_key: "{{ gateway_admin_key }}"

- name: Read the guard's last events
  llmops.sglang.sglang_guard:
    state: query
  register: guard

- name: Remove the guard
  llmops.sglang.sglang_guard:
    state: absent
'''

RETURN = r'''
name:
  description: The guard's service and timer name.
  returned: always
  type: str
  sample: sglang-guard
files:
  description: The files written (or, in check mode, to be written) and removed.
  returned: always
  type: dict
  sample: {written: [/etc/systemd/system/sglang-guard.timer], removed: []}
code_digest:
  description: A digest of the guard's Python code on the host.
  returned: when state is present
  type: str
  sample: 3f1c0a9b7d2e4c11
timer:
  description: Whether the guard's timer is enabled and active after the run.
  returned: always
  type: dict
  sample: {enabled: true, active: true}
guard:
  description:
    - The guard's last round and events, from its state file. C(rounds), C(last_round) (UTC), C(last_kind) (what the
      last round decided), C(held) (why the guard keeps the server stopped, or null), C(failures), C(counters) per
      event kind, C(events) (the last O(show), each with C(at), C(kind), C(action), C(reason), C(outcome)).
  returned: always
  type: dict
  sample:
    rounds: 42
    last_round: '2026-12-02T10:31:07Z'
    last_kind: healthy
    held: null
    counters: {hung: 1, crash_loop: 0, gpu_fault: 0}
    events:
      - {at: '2026-12-02T10:20:37Z', kind: hung, action: restart, reason: 'generation failed while GET /health answered 200',
         outcome: 'restarted in 12.1s, ready after 30.2s, a generation request answered'}
summary:
  description: The guard in a few words, as the check playbook's table shows it.
  returned: always
  type: str
  sample: hung 1
'''

import os
import sys

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.guard import _install as gi
from ansible_collections.llmops.sglang.plugins.module_utils.guard import _report as report
from ansible_collections.llmops.sglang.plugins.module_utils.guard import _round
from ansible_collections.llmops.sglang.plugins.module_utils.guard._config import GuardConfig, problems
from ansible_collections.llmops.sglang.plugins.module_utils.guard._state import GuardState, read
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import module_runner
from ansible_collections.llmops.sglang.plugins.module_utils.host._config_file import VerifyError, unit_verifier
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _host as ph

CONFIG_OPTIONS = ('unit', 'url', 'api_key', 'endpoint', 'prompt', 'max_tokens', 'smoke_timeout', 'interval', 'hung_after', 'restart_max',
                  'restart_window', 'crash_restarts', 'crash_window', 'start_timeout', 'stall_timeout', 'stop_timeout', 'log_path',
                  'run_file', 'lock_path', 'state_path', 'metrics_path', 'kernel_log', 'nvidia_smi', 'user', 'environment', 'gpu_devices',
                  'shared_devices', 'server_args', 'disaggregation_mode', 'events_keep', 'gateway')


def argument_spec():
    gateway = dict(url=dict(type='str', required=True), worker_url=dict(type='str', required=True),
                   admin_key=dict(type='str', no_log=True), api_key=dict(type='str', no_log=True),
                   worker_api_key=dict(type='str', no_log=True),
                   worker_type=dict(type='str', choices=['regular', 'prefill', 'decode'], default='regular'),
                   timeout=dict(type='float', default=10.0), return_timeout=dict(type='float', default=120.0))
    spec = ph.gpu_check_options()  # unit, user, environment, gpu_devices, shared_devices, stop_timeout: as the restart's
    del spec['cleanup']  # the guard's release check always stops the server's own orphans
    spec.update(
        state=dict(type='str', choices=['present', 'absent', 'query'], default='present'), name=dict(type='str'),
        enabled=dict(type='bool', default=True), python=dict(type='path'),
        install_dir=dict(type='path'), config_path=dict(type='path'), state_path=dict(type='path'),
        url=dict(type='str', default='http://127.0.0.1:30000'), api_key=dict(type='str', no_log=True),
        endpoint=dict(type='str', choices=['generate', 'completions', 'chat_completions'], default='generate'),
        prompt=dict(type='str', default='The capital of France is'), max_tokens=dict(type='int', default=4, no_log=False),
        smoke_timeout=dict(type='float', default=20.0), interval=dict(type='float', default=30.0),
        hung_after=dict(type='int', default=2), restart_max=dict(type='int', default=1), restart_window=dict(type='float', default=3600.0),
        crash_restarts=dict(type='int', default=3), crash_window=dict(type='float', default=600.0),
        start_timeout=dict(type='float', default=1800.0), stall_timeout=dict(type='float', default=900.0),
        log_path=dict(type='str', default=''), run_file=dict(type='str', default=''), lock_path=dict(type='str', default=''),
        metrics_path=dict(type='str', default=''), kernel_log=dict(type='str', default=''), nvidia_smi=dict(type='str', default=''),
        server_args=dict(type='dict', default={}),
        disaggregation_mode=dict(type='str', choices=['null', 'prefill', 'decode'], default='null'),
        events_keep=dict(type='int', default=20), show=dict(type='int', default=5),
        gateway=dict(type='dict', options=gateway))
    return spec


def layout_of(p):
    name = p['name'] or '%s-guard' % p['unit'].rsplit('.', 1)[0]
    return gi.Layout(name=name, install_dir=p['install_dir'] or '/usr/local/lib/llmops-sglang/%s' % name,
                     config_path=p['config_path'] or '/etc/sglang/%s.json' % name), name


def config_of(p, name):
    values = dict((key, p[key]) for key in CONFIG_OPTIONS if key != 'state_path')
    values['state_path'] = p['state_path'] or '/var/lib/sglang/%s.json' % name
    values['environment'] = dict((str(k), str(v)) for k, v in (p['environment'] or {}).items())
    return GuardConfig.from_json(values)


class Timer:
    """The guard's timer through systemctl."""

    def __init__(self, module, name):
        self.module = module
        self.run = module_runner(module)
        self.systemctl = module.get_bin_path('systemctl', required=True)
        self.timer = name + '.timer'
        self.service = name + '.service'

    def state(self):
        rc_enabled, dummy, dummy_err = self.run([self.systemctl, 'is-enabled', '--quiet', '--', self.timer])
        rc_active, dummy, dummy_err = self.run([self.systemctl, 'is-active', '--quiet', '--', self.timer])
        return {'enabled': rc_enabled == 0, 'active': rc_active == 0}

    def call(self, *argv):
        rc, out, err = self.run([self.systemctl] + list(argv))
        if rc != 0:
            self.module.fail_json(msg='systemctl %s failed (rc=%d): %s' % (' '.join(argv), rc, (err or out).strip()[-300:]))


def present(module, p):
    layout, name = layout_of(p)
    config = config_of(p, name)
    found = problems(config)
    if found:
        module.fail_json(msg='sglang_guard: %s. Nothing was changed.' % '; '.join(found), name=name)
    sources = gi.runtime_sources()
    if _round.__name__.replace('.', '/') + '.py' not in sources:
        module.fail_json(msg='sglang_guard: the source of %s, the guard\'s entry point, cannot be read from this module\'s loader; '
                             'nothing was changed' % _round.__name__, name=name)
    wanted = gi.wanted_files(layout, config, p['python'] or sys.executable, sources)
    todo, stale = gi.plan(wanted), gi.stale_files(layout, wanted)
    timer = Timer(module, name)
    before = timer.state()
    start = p['enabled'] and not (before['enabled'] and before['active'])
    stop = not p['enabled'] and (before['enabled'] or before['active'])
    changed = bool(todo or stale or start or stop)
    if not module.check_mode and changed:
        analyze = module.get_bin_path('systemd-analyze')
        verify = (lambda unit: unit_verifier(unit, module_runner(module), analyze)) if analyze else None
        try:
            gi.apply(wanted, todo, stale, verify)
        except VerifyError as err:
            module.fail_json(msg=err.msg, name=name)
        if any(path in (layout.service, layout.timer) for path, dummy in todo):
            timer.call('daemon-reload')
        if start:
            timer.call('enable', '--now', '--', timer.timer)
        if stop:
            timer.call('disable', '--now', '--', timer.timer)
    summary = guard_summary(config.state_path, p['show'])
    module.exit_json(changed=changed, name=name, code_digest=gi.digest(sources), timer=before if module.check_mode else timer.state(),
                     files={'written': [path for path, dummy in todo], 'removed': stale}, guard=summary, summary=report.short(summary))


def guard_summary(path, show):
    """The guard's summary from its state file, read without setting a damaged one aside (a fresh state then)."""
    state = read(path, check_mode=True)[0] if os.path.exists(path) else GuardState()
    return report.summary(state, show)


def absent(module, p):
    layout, name = layout_of(p)
    state_path = p['state_path'] or '/var/lib/sglang/%s.json' % name
    timer = Timer(module, name)
    before = timer.state()
    paths = [path for path in (layout.timer, layout.service, layout.config_path, layout.entry, state_path, state_path + '.lock')
             + ((p['metrics_path'],) if p['metrics_path'] else ()) if os.path.exists(path)]
    lib = os.path.join(layout.install_dir, 'lib')
    paths += gi.stale_files(layout, {}) if os.path.isdir(lib) else []
    changed = bool(paths or before['enabled'] or before['active'])
    if changed and not module.check_mode:
        if before['enabled'] or before['active']:
            timer.call('disable', '--now', '--', timer.timer)
        timer.run([timer.systemctl, 'stop', '--', timer.service])
        for path in paths:
            os.unlink(path)
        for root, dirs, dummy in os.walk(layout.install_dir, topdown=False):
            for directory in dirs:
                os.rmdir(os.path.join(root, directory))
        if os.path.isdir(layout.install_dir):
            os.rmdir(layout.install_dir)
        timer.call('daemon-reload')
    module.exit_json(changed=changed, name=name, timer=before if module.check_mode else timer.state(),
                     files={'written': [], 'removed': paths}, guard=report.summary(GuardState(), 0), summary='removed')


def query(module, p):
    layout, name = layout_of(p)
    state_path = p['state_path'] or '/var/lib/sglang/%s.json' % name
    installed = os.path.exists(layout.timer)
    summary = guard_summary(state_path, p['show'])
    timer = Timer(module, name).state() if installed else {'enabled': False, 'active': False}
    text = report.short(summary) if installed else 'not installed'
    module.exit_json(changed=False, name=name, timer=timer, files={'written': [], 'removed': []}, guard=summary, summary=text)


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    {'present': present, 'absent': absent, 'query': query}[module.params['state']](module, module.params)


if __name__ == '__main__':
    main()
