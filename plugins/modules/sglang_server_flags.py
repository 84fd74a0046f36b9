#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_server_flags
short_description: List the server flags the installed SGLang release defines and check server arguments against them
version_added: 0.1.0
description:
  - Reads the command-line flags of C(python -m sglang.launch_server) from the source of the installed SGLang release,
    without importing SGLang (importing it needs the GPU stack).
  - The definition is read with Python's C(ast) module from C(sglang/srt/server_args.py), starting at
    C(ServerArgs.add_cli_args) and following every function it hands the parser to. From SGLang 0.5.14 most flags
    are derived from annotated C(ServerArgs) fields (C(A[T, "help"]) or C(A[T, Arg]) with aliases), and from 0.5.23 from the namespace
    classes in C(sglang/srt/arg_groups/fields/); both are read the same way. Aliases (for example
    C(--tensor-parallel-size) for C(--tp-size)) and the C(--no-...) forms of C(argparse.BooleanOptionalAction)
    flags are included.
  - With O(args), checks a dict of server arguments (the input of the P(llmops.sglang.sglang_cli_args#filter)
    filter) and fails when a flag is not defined by the installed release, naming each flag, the SGLang version and
    close matches, or when a switch (a flag that takes no value) is given a value that is not a boolean.
  - SGLang is located with O(python) or given as O(sglang_path); RV(version_source) tells where its version was read.
options:
  args:
    description:
      - Server arguments to check, as given to the P(llmops.sglang.sglang_cli_args#filter) filter; keys are flag names
        with or without C(--), underscores are read as dashes (V(tp_size) is C(--tp-size)).
      - Two keys that name the same flag (V(tp_size) and V(tp-size), V(--tp-size) and V(tp-size)) fail the check
        whatever their values, as in the filter; only identical names count, argparse aliases are not resolved.
      - Values are checked as SGLang's argparse would - switches (RV(boolean_flags)) take V(true), V(false) or V(null);
        a flag with a builtin C(type=int) or C(type=float) (or an C(int) / C(float) field from 0.5.14) takes a value
        that converts to it; a flag with literal C(choices) takes one of them (see RV(flag_values)). A list is accepted
        only for flags with C(nargs).
      - Values of flags whose name contains C(key), C(token), C(secret) or C(password) (for example C(--api-key)) are
        masked in the result. AnsibleModule still logs its arguments to the target's journal when it starts, so keep
        secrets out of O(args) (the names are what is checked) or set the task keyword C(no_log); the
        P(llmops.sglang.sglang_cli_args#filter) filter with O(llmops.sglang.sglang_cli_args#filter:known_flags) runs the
        same check on the controller without sending anything to the host.
    type: dict
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
  - llmops.sglang._sglang_install
attributes:
  check_mode:
    support: full
    details: The module only reads files; it does the same in check mode.
  diff_mode:
    support: none
  idempotent:
    details: Read-only; never reports a change.
notes:
  - Python's argparse also accepts unambiguous prefixes of long flags (C(--tp) for C(--tp-size) while no other flag
    starts with C(--tp)). This module treats them as unknown on purpose, because a prefix stops working as soon as a
    release adds another flag with the same prefix; write the full name.
  - Flags defined with a name that is not a string literal cannot be read from the source; they are reported in
    RV(parser_warnings) (none in the releases 0.4.6 to 0.5.23).
seealso:
  - plugin: llmops.sglang.sglang_cli_args
    plugin_type: filter
  - module: llmops.sglang.sglang_patch_sm120
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Check the server arguments against the installed SGLang before rendering the unit
  llmops.sglang.sglang_server_flags:
    python: /opt/sglang/venv/bin/python
    args:
      model-path: zai-org/GLM-5-FP8
      tp_size: 8
      enable-flashinfer-allreduce-fusion: true
  register: sglang_flags

- name: Render the command line, rejecting anything the installed release does not know
  ansible.builtin.set_fact:
    sglang_argv: >-
      {{ sglang_args | llmops.sglang.sglang_cli_args(known_flags=sglang_flags.flags,
                                                     boolean_flags=sglang_flags.boolean_flags) }}
  vars:
    sglang_args:
      model-path: zai-org/GLM-5-FP8
      tp_size: 8

- name: Only use the new fusion flag where the release has it
  ansible.builtin.debug:
    msg: "SGLang {{ sglang_flags.sglang_version }} has --flashinfer-allreduce-fusion-backend"
  when: "'--flashinfer-allreduce-fusion-backend' in sglang_flags.flags"
'''

RETURN = r'''
sglang_path:
  description: The C(sglang) package directory that was read.
  returned: when SGLang was found
  type: str
  sample: /opt/sglang/venv/lib/python3.12/site-packages/sglang
sglang_version:
  description: Version of the installed SGLang release; V(null) when no version could be read.
  returned: when SGLang was found
  type: str
  sample: 0.5.9
version_source:
  description: Where RV(sglang_version) was read.
  returned: when SGLang was found
  type: str
  sample: dist-info METADATA (/opt/sglang/venv/lib/python3.12/site-packages/sglang-0.5.9.dist-info/METADATA)
flags:
  description: Every option string the server's argument parser defines, aliases included, sorted.
  returned: success
  type: list
  elements: str
  sample: ["--attention-backend", "--config", "--enable-flashinfer-allreduce-fusion", "--tensor-parallel-size", "--tp-size"]
boolean_flags:
  description:
    - Flags that take no value (C(store_true), C(store_false), C(store_const), C(argparse.BooleanOptionalAction) and its
      C(--no-...) forms, SGLang's own actions with C(nargs=0)), sorted.
  returned: success
  type: list
  elements: str
  sample: ["--enable-flashinfer-allreduce-fusion", "--trust-remote-code"]
deprecated_flags:
  description: Flags whose help text or action marks them as deprecated in this release, sorted.
  returned: success
  type: list
  elements: str
  sample: ["--enable-flashinfer-allreduce-fusion"]
unknown:
  description: Flags from O(args) that the installed release does not define (empty without O(args)).
  returned: always
  type: list
  elements: str
  sample: ["--enforce-disable-flashinfer-allreduce-fusion"]
did_you_mean:
  description: For each flag in RV(unknown), the closest flags the release defines (may be empty).
  returned: always
  type: dict
  sample: {"--enforce-disable-flashinfer-allreduce-fusion": ["--enable-flashinfer-allreduce-fusion"]}
invalid_values:
  description:
    - Messages for arguments in O(args) that cannot be right, each failing the module - a switch given a value that is
      not a boolean, a malformed flag name, or two keys that name the same flag.
  returned: always
  type: list
  elements: str
  sample:
    - "--trust-remote-code takes no value (it is a switch); give it true or false, not 'yes please'"
    - "'tp_size' and 'tp-size' both name --tp-size (keys are read without the leading -- and with _ as -), so --tp-size
      would be given 2 times and SGLang would silently use the last; keep one of them"
flag_values:
  description:
    - Per flag whose value argparse checks (an int or float type, or choices), C(type) (what argparse converts the value
      with, V(int), V(float), V(str), or V(custom) for a parser of SGLang's own, whose choices are then compared with the
      word as given), C(choices) (or null), C(nargs) and C(source) (file and line of the definition). Flags without
      either are left out.
    - Pass it to the P(llmops.sglang.sglang_cli_args#filter) filter as
      O(llmops.sglang.sglang_cli_args#filter:flag_values).
  returned: success
  type: dict
  version_added: 0.2.0
  sample: {"--tp-size": {type: int, choices: null, nargs: null, source: "sglang/srt/server_args.py:3301"}}
source_files:
  description: The SGLang source files the flags were read from, relative to the directory above the package.
  returned: when the flags were read (also when O(args) fails the check)
  type: list
  elements: str
  sample: ["sglang/srt/server_args.py"]
parser_warnings:
  description: Parts of the parser definition that could not be followed (flags they add are missing from RV(flags)).
  returned: success
  type: list
  elements: str
  sample: []
'''

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _flags as sf
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import module_runner
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._install import InstallError, locate


_SECRET_NAME = re.compile(r'(?i)(key|token|secret|passw)')


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type='path', default='python3'),
            sglang_path=dict(type='path'),
            args=dict(type='dict'),
        ),
        supports_check_mode=True,
    )
    result = dict(changed=False, unknown=[], did_you_mean={}, invalid_values=[])
    try:
        install = locate(module.params['python'], module_runner(module), module.params['sglang_path'])
    except InstallError as err:
        result.update(err.context)
        module.fail_json(msg=err.msg, **result)
    package_dir, version = install.path, install.version
    result.update(install.to_json())
    try:
        parsed = sf.parse_server_flags(sf.read_package_sources(package_dir))
    except sf.FlagSourceError as err:
        module.fail_json(msg='Could not read the server flags of SGLang %s at %s: %s. Check that the installation is complete '
                             '(pip install --force-reinstall --no-deps sglang==%s) or report the release as unsupported.'
                             % (version or '(unknown version)', package_dir, err, version or '<version>'), **result)
    listing = dict(flags=parsed['flags'], boolean_flags=parsed['boolean_flags'], deprecated_flags=parsed['deprecated_flags'],
                   flag_values=parsed['values'], source_files=parsed['files'], parser_warnings=parsed['warnings'])
    for warning in parsed['warnings']:
        module.warn('SGLang %s: %s' % (version, warning))
    args = module.params['args'] or {}
    for key, value in args.items():
        if _SECRET_NAME.search(str(key)) and isinstance(value, (str, int, float)) and not isinstance(value, bool) and str(value):
            module.no_log_values.add(str(value))
    unknown, problems = sf.check_args(args, parsed)
    result['unknown'] = [u['flag'] for u in unknown]
    result['did_you_mean'] = dict((u['flag'], u['did_you_mean']) for u in unknown)
    result['invalid_values'] = problems
    if unknown or problems:
        parts = []
        if unknown:
            parts.append(sf.unknown_message(unknown, version))
        parts.extend(problems)
        module.fail_json(msg='%s. Fix the server arguments (flag names are checked against %s, read from %s) or install the '
                             'SGLang release that has these flags.' % ('; '.join(parts), ', '.join(parsed['files'][:3]), package_dir),
                         source_files=parsed['files'], **result)
    result.update(listing)
    used_deprecated = sorted(set(sf.flag_for_key(k) for k, v in args.items() if v is not None and v is not False) & set(parsed['deprecated_flags']))
    for flag in used_deprecated:
        module.warn('%s is deprecated in SGLang %s; see python -m sglang.launch_server --help for its replacement' % (flag, version))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
