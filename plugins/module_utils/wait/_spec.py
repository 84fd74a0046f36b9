# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The argument_spec of llmops.sglang.wait_for_sglang, in a file of its own: the module and the action plugin both read
it, and the action plugin (on the controller, in every fork that runs the task) imports only this, not the module and
through it the log classifier it never uses.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations


def argument_spec():
    return dict(
        log_path=dict(type='path'),
        log_offset=dict(type='int'),
        unit=dict(type='str'),
        pid=dict(type='int'),
        url=dict(type='str'),
        served_model_name=dict(type='str'),
        api_key=dict(type='str', no_log=True),
        secrets=dict(type='list', elements='str', default=[], no_log=True),
        validate_certs=dict(type='bool', default=True),
        ready_probe=dict(type='str', default='auto', choices=['auto', 'log', 'health', 'health_generate']),
        node_rank=dict(type='int', default=0),
        deployment=dict(type='str'),
        deployment_size=dict(type='int'),
        timeout=dict(type='int', default=1800),
        stall_timeout=dict(type='int', default=900),
        stable_for=dict(type='int', default=0),
        unreachable_timeout=dict(type='int', default=120),
        sleep=dict(type='float', default=0.25),
        crash_patterns=dict(type='list', elements='str', default=[]),
        ignore_patterns=dict(type='list', elements='str', default=[]),
        # private, set by the action plugin only; stripped from invocation.module_args
        _state=dict(type='raw'),
        _round_seconds=dict(type='float'),
        _spent=dict(type='float'),
        _host=dict(type='str'),
    )
