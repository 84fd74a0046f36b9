#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_compile_cache
short_description: Persistent compile, JIT and autotune cache directories for an SGLang server, per version and GPU
version_added: 0.2.0
description:
  - Creates C(<root>/<version>-<arch>) (for example V(/var/cache/sglang/0.5.9-sm90); without a GPU C(<root>/<version>))
    with one sub-directory per cache, owned by O(owner) and O(group), and returns the environment that points SGLang and
    its libraries at them (RV(environment)), for the server's environment file.
  - "The variables and the source that reads each: C(SGLANG_DG_CACHE_DIR) (DeepGEMM JIT kernels,
    C(sglang/srt/layers/deep_gemm_wrapper/compile_utils.py) sets C(DG_JIT_CACHE_DIR) from it), C(SGLANG_CACHE_DIR)
    (C(sglang/srt/compilation/backend.py), torch.compile cache of piecewise CUDA graphs), C(TORCHINDUCTOR_CACHE_DIR)
    (C(torch/_inductor/runtime/cache_dir_utils.py); its default under C(/tmp) is emptied by the unit's C(PrivateTmp) on
    every restart), C(TRITON_CACHE_DIR) (C(triton/knobs.py)), C(FLASHINFER_WORKSPACE_BASE) (C(flashinfer/jit/env.py), JIT
    modules and cubins) and C(CUDA_CACHE_PATH) (the CUDA driver's PTX JIT cache)."
  - A variable set in O(environment) (the user's own setting) is left alone; its path is still reported in RV(dirs).
  - An SGLang upgrade (or another GPU) gets a fresh directory. Of the older directories this module created (they hold a
    marker file), the O(keep) - 1 newest stay and the others are removed; no other directory under O(root) is touched.
options:
  root:
    description: The directory holding one cache directory per SGLang version, for example V(/var/cache/sglang).
    type: path
    required: true
  version:
    description: The SGLang version the caches are for.
    type: str
    required: true
  arch:
    description:
      - GPU architecture part of the directory name, for example V(sm90).
      - Default is read from C(nvidia-smi --query-gpu=compute_cap) (several architectures are joined with C(-)); without
        C(nvidia-smi) or a GPU the name has no architecture part.
    type: str
  owner:
    description: Owner of the cache directories (the service user); default is the user running the module.
    type: str
  group:
    description: Group of the cache directories; default is the primary group of O(owner).
    type: str
  keep:
    description: Cache directories kept, the current one included.
    type: int
    default: 3
  environment:
    description: The server's own environment settings; a cache variable set there is not overridden.
    type: dict
    default: {}
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
attributes:
  check_mode:
    support: full
    details: Reports what it would create and prune and returns the environment; changes nothing.
  diff_mode:
    support: full
    details: The cache directories under O(root) before and after.
notes:
  - FlashInfer keys its JIT cache by CUDA architecture inside C(FLASHINFER_WORKSPACE_BASE) itself; the architecture in the
    directory name also separates DeepGEMM, Triton and Inductor, which would otherwise mix kernels of different GPUs on a
    shared file system.
seealso:
  - module: llmops.sglang.sglang_startup_history
author:
  - llmops.sglang contributors (@llmops)
'''

EXAMPLES = r'''
- name: Point SGLang's caches at a persistent directory for this release
  llmops.sglang.sglang_compile_cache:
    root: /var/cache/sglang
    version: "0.5.9"
    owner: sglang
    group: sglang
    environment: "{{ my_environment }}"
  register: caches

- name: Write the environment file with the cache variables
  ansible.builtin.copy:
    content: "{% for k, v in (caches.environment | combine(my_environment)) | dictsort %}{{ k }}={{ v }}\n{% endfor %}"
    dest: /etc/sglang/sglang.env
    mode: "0644"
'''

RETURN = r'''
path:
  description: The cache directory of this version and architecture.
  returned: always
  type: str
  sample: /var/cache/sglang/0.5.9-sm90
arch:
  description: The GPU architecture in the name; V(null) when none was given or seen.
  returned: always
  type: str
  sample: sm90
environment:
  description: Cache variables to add to the server's environment (those not set in O(environment)).
  returned: always
  type: dict
  sample: {SGLANG_DG_CACHE_DIR: /var/cache/sglang/0.5.9-sm90/deep_gemm, TRITON_CACHE_DIR: /var/cache/sglang/0.5.9-sm90/triton}
dirs:
  description: Every cache directory by name (the user's own where O(environment) sets one), for M(llmops.sglang.sglang_startup_history).
  returned: always
  type: dict
  sample: {deep_gemm: /var/cache/sglang/0.5.9-sm90/deep_gemm, triton: /var/cache/sglang/0.5.9-sm90/triton}
created:
  description: Directories created (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [/var/cache/sglang/0.5.9-sm90]
pruned:
  description: Older cache directories removed (or that would be).
  returned: always
  type: list
  elements: str
  sample: [/var/cache/sglang/0.5.7-sm90]
msg:
  description: One line for a person.
  returned: always
  type: str
  sample: "/var/cache/sglang/0.5.9-sm90 (GPU sm90); pruned 0.5.7-sm90"
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _compile_cache as cc
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import module_runner


def main():
    module = AnsibleModule(
        argument_spec=dict(cc.OPTIONS),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result, diff = cc.prepare(p, module.check_mode, module_runner(module), module.get_bin_path, want_diff=module._diff)
    except cc.CacheError as err:
        module.fail_json(msg=err.msg)
    if diff is not None:
        result['diff'] = diff
    module.exit_json(**result)


if __name__ == '__main__':
    main()
