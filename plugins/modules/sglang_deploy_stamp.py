#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_deploy_stamp
short_description: Record what a deployment of an SGLang unit left on the host, and tell whether the host still has it
version_added: 0.1.0
description:
  - With O(state=present), writes a deployment record to O(path) (JSON, mode C(0600), written atomically) holding
    O(inputs), the sha256, mode and owner of every file in O(files) (mode and owner of directories), a digest of the installed C(sglang) package with its
    version (the distributions installed in its environment, the files of its C(dist-info) by size and modification
    time, and the content of the source files M(llmops.sglang.sglang_patch_sm120) edits), and the current
    C(InvocationID) of O(unit).
  - With O(state=query), compares the host with that record and returns RV(current=true) only when nothing differs
    (the same digest for every input, every managed file has the recorded sha256, mode and owner or is still absent, SGLang has the same version and
    an unchanged installation, the unit is active, enabled, needs no daemon-reload and was not restarted since the
    record was written, and with O(health_url) the server answers C(GET /health) with 200). Otherwise RV(reasons)
    lists every difference. It never fails because the host differs.
  - The P(llmops.sglang.sglang_service#role) role uses it on every run; when the host is current, the run is this one
    module run per host instead of several dozen tasks and a readiness wait.
  - The record is proof of what a previous run did, not a cache of it. Any change on the host (a hand-edited unit or
    environment file, C(pip install), an SM120 patch applied or reverted by hand, a restart by systemd) makes the host
    not current.
options:
  path:
    description:
      - The record file, for example V(/var/lib/sglang/sglang.deployed.json). Its directory must exist for
        O(state=present).
    type: path
    required: true
  state:
    description:
      - V(query) reads and compares; it never writes.
      - V(present) writes the record for the host as it is now (unchanged records are not rewritten).
    type: str
    choices: [query, present]
    default: query
  inputs:
    description:
      - What the deployment was made from, as a dict of input name to digest, computed on the controller. The
        P(llmops.sglang.sglang_service#role) role passes the sha256 of each of its variables (values templated), of the
        multi-node arguments derived from the inventory and of its own task and template files.
      - The values are opaque to the module; O(state=query) names every input whose digest differs, was added or
        was removed.
      - The module adds one input itself (since 0.2.0), C(llmops.sglang code), holding the collection's version and a sha256
        of the source of the module_utils it runs with (the SM120 patcher, the record's own rules), so a collection
        upgrade counts as a change without the caller reading the collection's files.
    type: dict
    required: true
  files:
    description:
      - Files and directories the deployment manages (unit file, environment files, their directories). Content
        (sha256, files only), permission bits and owner and group are recorded; a path that does not exist is
        recorded as absent, so its later appearance counts as a change.
    type: list
    elements: path
    default: []
  python:
    description:
      - Interpreter of the environment where SGLang is installed, for example V(/opt/sglang/venv/bin/python). The
        C(sglang) package is located with C(importlib.util.find_spec) (SGLang is not imported) and its version read from
        its C(dist-info) METADATA.
      - When the interpreter is missing or has no SGLang, SGLang is recorded (or compared) as not installed.
      - Omit it to leave SGLang out of the record.
    type: path
  unit:
    description:
      - systemd unit of the server, for example V(sglang.service). Its C(InvocationID) is recorded; O(state=query)
        requires the unit to be C(active), C(enabled), without a pending daemon-reload, and running the recorded invocation.
    type: str
  process_argv:
    description:
      - The words the server's process must run with (its C(ExecStart=) split back into words; C(%d) stands for the
        unit's credential directory). With O(unit), the unit's C(MainPID) is read from C(/proc) (its C(cmdline),
        C(environ) and start time) and compared with them, O(process_environment) and the modification times of the
        regular files in O(files) and of SGLang's installation (RV(process)).
      - O(state=query) returns the differences; O(state=present) writes no record while there are any (a deployment
        record says what runs) and returns RV(current=false) with them.
      - Omit it to leave the process out (records and queries as before 0.3.0).
    type: list
    elements: str
    version_added: 0.3.0
  process_environment:
    description:
      - The environment variables the server must have, as name to the sha256 (hex) of the value (values are secrets;
        neither the arguments nor the result hold them). Variables not named here are not compared.
      - Used only with O(process_argv).
    type: dict
    default: {}
    version_added: 0.3.0
  process_sglang_sources:
    description:
      - Whether a change of the SGLang sources M(llmops.sglang.sglang_patch_sm120) edits after the process started counts
        as a difference (RV(process)). Set it when the deployment manages the SM120 patch state; leave it off when
        another deployment sharing the environment does (its patch is not this server's configuration).
      - Used only with O(process_argv).
    type: bool
    default: true
    version_added: 0.3.0
  health_url:
    description:
      - Base URL of the server, for example V(http://127.0.0.1:30000). With O(state=query) the host is current only
        when C(GET <health_url>/health) answers 200 within O(health_timeout) seconds. SGLang answers 200 there only
        once it is ready, and serves C(/health) without the API key.
      - Leave it out for ranks other than 0 of a multi-node server, which serve no HTTP.
    type: str
  health_timeout:
    description: Seconds to wait for the answer of O(health_url).
    type: float
    default: 5
  restored:
    description:
      - With O(state=present), record the unit's new run for the deployment the record already describes, after a
        rollback put that deployment back (its files, SGLang release and patch state) and its restart was proven
        ready. The record keeps its inputs (O(inputs) is not used) and only its C(InvocationID) changes, so the next
        deploy of the restored configuration finds the host current.
      - Written only when the record is valid, every file in O(files) and SGLang are as it recorded them and O(unit)
        is active; otherwise nothing is written and RV(current=false) with RV(reasons).
      - O(process_argv) is not used (it describes the configuration that was rolled back).
    type: bool
    default: false
    version_added: 0.3.0
  probe_paths:
    description:
      - Paths whose existence the caller wants to know, read with the rest of the host's state, for example the files
        of the runtime guard (M(llmops.sglang.sglang_guard)), so that the role removes a guard only where one is
        installed. RV(paths_present) lists those that exist.
    type: list
    elements: path
    default: []
    version_added: 0.3.0
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
    details: O(state=query) is read-only; O(state=present) reports whether it would write the record and writes nothing.
  diff_mode:
    support: full
    details: O(state=present) shows the record before and after.
notes:
  - The installation digest covers what a deploy controls (versions, patches), not every one of SGLang's ~3300 files; a
    hand edit of another SGLang source file is not seen (a deploy would not undo it either).
  - The inputs' digests include digests of secrets (API key, tokens); the record is root-only (C(0600)), like the
    files that hold the secrets themselves.
seealso:
  - module: llmops.sglang.wait_for_sglang
  - module: llmops.sglang.sglang_patch_sm120
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Check whether the host still runs exactly the last deployment
  llmops.sglang.sglang_deploy_stamp:
    path: /var/lib/sglang/sglang.deployed.json
    inputs:
      server_args: "{{ my_server_args | to_json | hash('sha256') }}"
      environment: "{{ my_environment | to_json | hash('sha256') }}"
    files:
      - /etc/systemd/system/sglang.service
      - /etc/sglang/sglang.env
    python: /opt/sglang/venv/bin/python
    unit: sglang.service
    health_url: http://127.0.0.1:30000
  register: deployed

- name: Full deploy only when something differs
  ansible.builtin.debug:
    msg: "redeploying because {{ deployed.reasons | join('; ') }}"
  when: not deployed.current

- name: Record the deployment once the server is ready
  llmops.sglang.sglang_deploy_stamp:
    path: /var/lib/sglang/sglang.deployed.json
    state: present
    inputs:
      server_args: "{{ my_server_args | to_json | hash('sha256') }}"
      environment: "{{ my_environment | to_json | hash('sha256') }}"
    files:
      - /etc/systemd/system/sglang.service
      - /etc/sglang/sglang.env
    python: /opt/sglang/venv/bin/python
    unit: sglang.service
'''

RETURN = r'''
current:
  description: Whether the host still runs exactly the recorded deployment (always V(true) after O(state=present)).
  returned: always
  type: bool
  sample: false
reasons:
  description: Every difference found by O(state=query); empty when RV(current=true).
  returned: always
  type: list
  elements: str
  sample: ["inputs changed: sglang_service_args", "/etc/sglang/sglang.env was changed on the host"]
unit_changed:
  description:
    - Whether O(unit) is not the recorded run any more (not active, or started again since the record was written).
      A multi-node deployment restarts every rank then, since a rank started alone cannot rejoin the others.
  returned: always
  type: bool
  sample: false
stale_process:
  description:
    - Whether O(unit) still runs the recorded start although its managed files or the SGLang installation changed since
      (or its unit file waits for a daemon-reload), so the running process predates the change, for example after a run
      that wrote new files and was interrupted before its restart. A deploy must restart it even when it changes no file.
    - Always V(false) with O(state=present).
  returned: always
  type: bool
  sample: false
  version_added: 0.2.0
process:
  description:
    - What the server process runs, read from C(/proc/<MainPID>), with O(process_argv) and O(unit); V(null) otherwise.
    - C(differs) names what differs from what the deployment wants (flags, variable names, files changed after the
      process started), never a value; empty when the process runs the wanted configuration. C(pid) is V(null) when the
      unit has no main process (stopped), and C(differs) is then empty (nothing runs that could differ).
  returned: always
  type: dict
  sample: {"pid": 4242, "started_at": 1764665000.12, "differs": ["arguments: --tp-size", "environment: NCCL_P2P_DISABLE"]}
  version_added: 0.3.0
invocation_id:
  description: The unit's current C(InvocationID); V(null) without O(unit).
  returned: always
  type: str
  sample: 4f5b0a3c2d1e4f6a8b9c0d1e2f3a4b5c
sglang_version:
  description: Version of the SGLang found with O(python); V(null) when none was found or O(python) was not given.
  returned: always
  type: str
  sample: 0.5.9
health:
  description: The C(GET /health) probe of O(health_url) (status code or error, elapsed milliseconds); V(null) without it.
  returned: always
  type: dict
  sample: {"url": "http://127.0.0.1:30000/health", "status": 200, "error": null, "elapsed_ms": 2.1}
recorded_at:
  description: When the record in RV(current) was written (UTC, ISO 8601); V(null) when there is none.
  returned: always
  type: str
  sample: "2026-11-30T11:02:03Z"
paths_present:
  description: The paths of O(probe_paths) that exist on the host (files, directories or links), in the order given.
  returned: success
  type: list
  elements: str
  sample: ["/etc/systemd/system/sglang-guard.timer"]
  version_added: 0.3.0
path:
  description: The record file (O(path)).
  returned: failure
  type: str
  sample: /var/lib/sglang/sglang.deployed.json
no_space:
  description:
    - The file system of O(path) is full; the old record was left as it was. C(free) and C(needed) are bytes.
  returned: failure on a full file system with O(state=present)
  type: dict
  sample: {path: /var/lib/sglang/sglang.deployed.json, free: 0, needed: 5213}
'''

import json
import os


from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _collection
from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _live
from ansible_collections.llmops.sglang.plugins.module_utils.deploy import _stamp as ds
from ansible_collections.llmops.sglang.plugins.module_utils.host import _atomic_write, _command, _systemd
from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _install, _sm120_patch
from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _probe as probe


def _recorded_install(python, record):
    """The query's SGLang read where the record found it, without starting the interpreter (its ~20 ms of the host's
    CPU in every no-change check): only while that directory still holds SGLang below the interpreter's prefix (the
    venv). A release installed over it changes its dist-info, read here; an uninstall removes it, and the interpreter
    locates again. None when the record names no such directory."""
    path = ((record or {}).get('sglang') or {}).get('path')
    if not path or not path.startswith(os.path.dirname(os.path.dirname(_install.resolve_python(python))) + os.sep):
        return None
    try:
        return _install.locate(python, None, sglang_path=path)
    except _install.InstallError:
        return None


def _sglang_now(module, record):
    python = module.params['python']
    if not python:
        return None
    try:
        # a record is written from what the interpreter locates (state present), never from the shortcut
        install = (_recorded_install(python, record) if module.params['state'] == 'query' else None) \
            or _install.locate(python, _command.module_runner(module))
    except _install.InstallError:
        # Not installed (yet): a first deploy creates the venv. Recorded and compared as "not installed".
        return None
    tree, count = ds.install_digest(install.path, _sm120_patch.PATCH_FILES)
    return {'path': install.path, 'version': install.version, 'tree': tree, 'files': count}


def _unit_now(module):
    unit = module.params['unit']
    if not unit:
        return None
    systemctl = module.get_bin_path('systemctl', required=True)
    try:
        return _systemd.show(unit, ds.UNIT_PROPERTIES, _command.module_runner(module), systemctl)
    except _systemd.SystemdError as err:
        module.fail_json(msg=err.msg, rc=err.rc)


def _process_now(module, unit_state, sglang):
    """The running server against what the deployment wants (RV(process)), or None when not asked."""
    p = module.params
    if p['process_argv'] is None or unit_state is None:
        return None
    live = _live.read_process(unit_state.get('MainPID') or 0)
    if live is None:
        return {'pid': None, 'started_at': None, 'differs': []}
    wanted = _live.Wanted(argv=tuple(p['process_argv']), environment=dict((k, str(v)) for k, v in p['process_environment'].items()))
    watched = list(p['files'])
    if sglang and p['process_sglang_sources']:
        watched += [os.path.join(sglang['path'], rel) for rel in _sm120_patch.PATCH_FILES]
    result = live.to_json()
    result.pop('argv')
    result['differs'] = _live.differences(wanted, live, _live.newest_change(watched))
    return result


def _older(process):
    return 'the running server runs an older configuration (%s)' % '; '.join(process['differs'])


# The input the module adds itself: what it runs is part of what a deployment is made from.
CODE_INPUT = 'llmops.sglang code'


def _inputs(given):
    """The caller's inputs plus the collection's version and a digest of the code this module brought along."""
    code = (_atomic_write, _collection, _command, ds, _install, _sm120_patch, _systemd)
    return dict(given, **{CODE_INPUT: '%s %s' % (_collection.VERSION, _collection.code_digest(code))})


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            state=dict(type='str', choices=['query', 'present'], default='query'),
            inputs=dict(type='dict', required=True),
            files=dict(type='list', elements='path', default=[]),
            python=dict(type='path'),
            unit=dict(type='str'),
            health_url=dict(type='str'),
            health_timeout=dict(type='float', default=5.0),
            process_argv=dict(type='list', elements='str'),
            process_environment=dict(type='dict', default={}),
            process_sglang_sources=dict(type='bool', default=True),
            probe_paths=dict(type='list', elements='path', default=[]),
            restored=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        record = ds.read(p['path'], check_mode=module.check_mode)
        if record and record.get('damaged'):
            module.warn('The deployment record %s was damaged (%s); %s.' % (
                p['path'], record['damaged']['why'], 'it was kept as %s' % record['damaged']['kept_as']
                if record['damaged']['kept_as'] else 'check mode left it in place'))
        sglang = _sglang_now(module, record)
        unit_state = _unit_now(module)
        invocation = (unit_state or {}).get('InvocationID') or None
        process = None if p['restored'] else _process_now(module, unit_state, sglang)
        result = dict(changed=False, invocation_id=invocation, sglang_version=(sglang or {}).get('version'), process=process,
                      paths_present=[path for path in p['probe_paths'] if os.path.lexists(path)])
        if p['state'] == 'query':
            health = None
            if p['health_url']:
                health = probe.http_get(p['health_url'], '/health', timeout=p['health_timeout'])
                health.pop('body', None)
            reasons, unit_changed = ds.compare(record, _inputs(p['inputs']), p['files'], sglang, unit_state, health)
            if process and process['differs']:
                reasons.append(_older(process))
            current = not reasons
            stale = ds.stale_process(record, p['files'], sglang, unit_state)
            module.exit_json(current=current, reasons=reasons, unit_changed=unit_changed, stale_process=stale,
                             recorded_at=(record or {}).get('recorded_at'), health=health, **result)
        if process and process['differs']:
            # never record a deployment that is not the one running
            module.exit_json(current=False, reasons=[_older(process)],
                             unit_changed=False, stale_process=False, recorded_at=(record or {}).get('recorded_at'), health=None, **result)
        unit = {'name': p['unit'], 'invocation': invocation} if p['unit'] else None
        if p['restored']:
            reasons = ds.restore_reasons(record, p['files'], sglang, unit_state)
            if reasons:
                # never record a deployment that is not the one running
                module.exit_json(current=False, reasons=reasons, unit_changed=False, stale_process=False,
                                 recorded_at=(record or {}).get('recorded_at'), health=None, **result)
            new = ds.build(record['inputs'], p['files'], sglang, unit)
        else:
            new = ds.build(_inputs(p['inputs']), p['files'], sglang, unit)
        changed = not ds.same_record(record, new)
        if changed and not module.check_mode:
            ds.write(p['path'], new)
        result['changed'] = changed
        if module._diff:
            result['diff'] = dict(before=json.dumps(record, indent=1, sort_keys=True) + '\n' if record else '',
                                  after=json.dumps(new, indent=1, sort_keys=True) + '\n',
                                  before_header=p['path'], after_header=p['path'])
        module.exit_json(current=True, reasons=[], unit_changed=False, stale_process=False, recorded_at=new['recorded_at'], health=None, **result)
    except ds.StampError as err:
        module.fail_json(msg=err.msg, path=p['path'], **({'no_space': err.no_space} if err.no_space else {}))


if __name__ == '__main__':
    main()
