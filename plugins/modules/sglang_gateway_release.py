#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_gateway_release
short_description: Read which SGLang model gateway release a venv holds and whether it has the control-plane API
version_added: 0.3.0
description:
  - Reads the gateway package installed in O(venv) from its own files (no import, nothing run) - C(smg), or the older
    C(sglang-router) - its version (dist-info) and whether its C(router_args.py) defines C(--control-plane-api-keys),
    the mark of the control-plane worker API (C(/workers) with admin keys) that registration and rolling changes use.
    C(sglang-router) 0.3.0 has no such API; 0.3.2 and every C(smg) release have it.
  - Fails when the package is not installed there, or, with O(require_control_plane), when the release has no
    control-plane API, saying which release to install.
options:
  venv:
    description: The gateway's venv.
    type: path
    required: true
  package:
    description: The distribution installed there.
    type: str
    choices: [smg, sglang-router]
    default: smg
  require_control_plane:
    description: Fail when the release has no control-plane worker API.
    type: bool
    default: true
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: full
    details: Reads only; the task never reports a change.
seealso:
  - module: llmops.sglang.sglang_gateway_workers
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: The installed gateway has the control-plane API
  llmops.sglang.sglang_gateway_release:
    venv: /opt/smg/venv-1.13.0
'''

RETURN = r'''
distribution:
  description: The distribution read.
  returned: success
  type: str
  sample: smg
version:
  description: Its version.
  returned: success
  type: str
  sample: 1.13.0
control_plane:
  description: Whether the release has the control-plane worker API.
  returned: success
  type: bool
launch_module:
  description: The Python module that launches the gateway alone (C(smg launch)).
  returned: success
  type: str
  sample: smg.launch_router
package_dir:
  description: Where the package is installed.
  returned: success
  type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._release import locate


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type='path', required=True),
            package=dict(type='str', choices=['smg', 'sglang-router'], default='smg'),
            require_control_plane=dict(type='bool', default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    release = locate(p['venv'], p['package'])
    if release is None:
        module.fail_json(msg='no %s is installed in %s (no router_args.py of it under lib/python3*/site-packages); install '
                         'it there first' % (p['package'], p['venv']))
    out = release.to_json()
    if p['require_control_plane'] and not release.control_plane:
        module.fail_json(msg='%s %s has no control-plane worker API (its router_args.py defines no --control-plane-api-keys): '
                         'workers cannot be registered or taken out of rotation at run time; install smg (any 1.x) or '
                         'sglang-router 0.3.2 or later' % (release.distribution, release.version), **out)
    module.exit_json(changed=False, **out)


if __name__ == '__main__':
    main()
