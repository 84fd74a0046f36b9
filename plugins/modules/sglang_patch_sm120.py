#!/usr/bin/python
# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r'''
---
module: sglang_patch_sm120
short_description: Enable or revert SGLang's SM90/SM100 FlashInfer fusion and MoE paths on SM120 (RTX PRO 6000) GPUs
version_added: 0.1.0
description:
  - Edits the installed SGLang source so that consumer Blackwell GPUs (compute capability 12.0, SM120, for example the
    RTX PRO 6000 Blackwell) take code paths that upstream SGLang gates on SM90/SM100, and restores the released text
    byte for byte with O(state=absent).
  - "Four sites are known, each in every form it had in the SGLang releases 0.4.6 to 0.5.23:
    V(allreduce_fusion_gate) (the FlashInfer allreduce-fusion gate in C(sglang/srt/layers/communicator.py), from 0.5.21
    C(layers/layer_boundary/residual/add_norm.py)),
    V(allreduce_fusion_auto_enable) (the fusion auto-enable in C(server_args.py), from 0.5.15
    C(arg_groups/overrides.py)),
    V(glm5_moe_runner_backend) (the C(flashinfer_trtllm) MoE runner choice for GLM-5, C(GlmMoeDsaForCausalLM), 0.5.9+) and
    V(allreduce_fusion_backend_resolver) (the SM check of C(_resolve_backend) in C(layers/flashinfer_comm_fusion.py),
    0.5.14+)."
  - Each site is recognised by its exact released text, anchored on its context (the enclosing function, the
    C(if) statement with the model allow-list and the flag it sets, the import block, the neighbouring line), never by
    a blind replace across the file. A site whose text is not one of the known shapes (a newer release, a local edit)
    fails the task naming the file, the SGLang version, the expected and the found text, and B(no file is written);
    all sites of a run succeed or none is written.
  - SGLang is located with O(python) or given as O(sglang_path); RV(version_source) tells where its version was read.
  - Writes are atomic (a temporary file in the same directory, then a rename), keep owner, group and mode, and happen
    only after every new text has been byte-compiled with O(python). Stale C(__pycache__/<name>.cpython-*.pyc) files
    of changed modules are removed.
  - B(Performance warning.) Upstream measured a large throughput regression with FlashInfer allreduce fusion on PCIe
    SM120 systems (TP4, about 1867 to 236 tokens/s; sgl-project/sglang pull request 32330, closed for that reason).
    From SGLang 0.5.13 upstream routes SM120 NVFP4 MoE to C(flashinfer_cutlass) on purpose, because the trtllm-gen MoE
    kernels need SM100-only instructions; V(glm5_moe_runner_backend) pre-empts that rule. FlashInfer
    (C(flashinfer-python)) before 0.6.17 cannot build the allreduce-fusion kernels for SM120 at all
    (C(No supported CUDA architectures found for major versions [9, 10].)). Benchmark before and after, and keep
    O(state=absent) at hand.
options:
  state:
    description:
      - V(present) applies the patches; V(absent) restores the released text of every patched site.
    type: str
    choices: [present, absent]
    default: present
  patches:
    description:
      - Sites to patch or revert.
      - Default is every site that exists in the installed version, including V(allreduce_fusion_backend_resolver)
        on 0.5.14 and later (without it, fusion enabled by the other sites fails at workspace set-up with
        C(FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.)).
      - A site named here that cannot be enabled in the installed release (RV(sites[].status) V(not_present),
        V(unsupported) or V(upstream_supports_sm120)) fails the task with O(state=present); with the default, such
        sites are only reported.
    type: list
    elements: str
    choices: [allreduce_fusion_gate, allreduce_fusion_auto_enable, glm5_moe_runner_backend, allreduce_fusion_backend_resolver]
  glm5_only:
    description:
      - >-
        Restrict the V(glm5_moe_runner_backend) change to GLM-5 (C(GlmMoeDsaForCausalLM)); the patched line reads
        'if is_sm100_supported() or (is_sm120_supported() and model_arch == "GlmMoeDsaForCausalLM"):'
        (with get_platform().is_sm100 / .is_sm120 from 0.5.19).
      - >-
        With V(false) the line reads 'if is_sm100_supported() or is_sm120_supported():', which also changes
        DeepSeek V3/V3.2, Kimi K2.5, Mistral Large 3 and other DeepSeek-family models on SM120.
      - Switching between the two forms rewrites the line; O(state=absent) reverts either form.
    type: bool
    default: true
  backup:
    description:
      - Keep a timestamped copy of each file before it is changed (RV(backup_files)).
    type: bool
    default: false
author:
  - llmops.sglang contributors (@llmops)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - llmops.sglang._attributes.MODULE
  - llmops.sglang._sglang_install
attributes:
  check_mode:
    support: full
    details: Computes and byte-compiles the new text but writes nothing; RV(changed) and the diff are what a real
      run would do.
  diff_mode:
    support: full
    details: One before/after diff per changed file.
  idempotent:
    details: The state of every site is read from the file content; a second run reports RV(changed=false).
notes:
  - Restart the SGLang server after a change (RV(changed)); a running server keeps the old code. The role
    C(llmops.sglang.sglang_sm120_patch) registers C(sglang_sm120_patch_result) for its caller to do that; the
    C(llmops.sglang.sglang_service) role runs this module itself and restarts its unit.
  - "Release support (see the collection's C(docs/sm120-patch-matrix.md)): before 0.5.4 SGLang has no
    C(is_sm120_supported) helper, so nothing can be enabled (V(unsupported)); 0.5.7's auto-enable already includes SM120
    through C(is_blackwell_supported) (V(upstream_supports_sm120)); GLM-5 exists from 0.5.9; the resolver from 0.5.14.
    In 0.5.9 and 0.5.10 the auto-enable allow-list does not contain GLM-5 yet."
  - Reinstalling or upgrading SGLang (C(pip install)) replaces the patched files; run the module again afterwards.
  - A file whose owner write bit is off is treated as read-only and fails the task cleanly, also for root.
seealso:
  - module: llmops.sglang.wait_for_sglang
  - name: sgl-project/sglang pull request 32330 (SM120 allreduce fusion, closed after a TP4 PCIe regression)
    description: Upstream's measurement of the throughput regression with fusion on SM120.
    link: https://github.com/sgl-project/sglang/pull/32330
  - name: flashinfer-ai/flashinfer pull request 3903
    description: Builds the TRT-LLM allreduce-fusion kernels for SM120 (flashinfer-python 0.6.17).
    link: https://github.com/flashinfer-ai/flashinfer/pull/3903
'''

EXAMPLES = r'''
- name: Enable the SM120 paths in the SGLang venv (GLM-5 only for the MoE backend)
  llmops.sglang.sglang_patch_sm120:
    python: /opt/sglang/venv/bin/python
    state: present
    backup: true
  register: sm120

- name: Show what happened per site
  ansible.builtin.debug:
    msg: "{{ sm120.sglang_version }}: {{ sm120.sites | map(attribute='name') | zip(sm120.sites | map(attribute='status')) | list }}"

- name: Restart SGLang when the source changed
  ansible.builtin.systemd_service:
    name: sglang.service
    state: restarted
  when: sm120.changed

- name: Only the communicator gate and the resolver, for an SGLang found by path
  llmops.sglang.sglang_patch_sm120:
    sglang_path: /opt/sglang/venv/lib/python3.12/site-packages/sglang
    python: /opt/sglang/venv/bin/python
    patches:
      - allreduce_fusion_gate
      - allreduce_fusion_backend_resolver

- name: Revert to the released SGLang text (fusion was slower)
  llmops.sglang.sglang_patch_sm120:
    python: /opt/sglang/venv/bin/python
    state: absent
'''

RETURN = r'''
sglang_version:
  description: SGLang release found (V(null) when no version source could be read).
  returned: always
  type: str
  sample: 0.5.9
version_source:
  description: Where RV(sglang_version) was read.
  returned: always
  type: str
  sample: dist-info METADATA (/opt/sglang/venv/lib/python3.12/site-packages/sglang-0.5.9.dist-info/METADATA)
sglang_path:
  description: The sglang package directory that was examined.
  returned: when the package was found
  type: str
  sample: /opt/sglang/venv/lib/python3.12/site-packages/sglang
sites:
  description:
    - One entry per site examined, in the order V(allreduce_fusion_gate), V(allreduce_fusion_auto_enable),
      V(glm5_moe_runner_backend), V(allreduce_fusion_backend_resolver) (or the order of O(patches)).
    - Also returned on failure for the sites planned so far.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Site name.
      type: str
      sample: allreduce_fusion_gate
    file:
      description: File holding the site (V(null) when the site does not exist in this release).
      type: str
      sample: /opt/sglang/venv/lib/python3.12/site-packages/sglang/srt/layers/communicator.py
    line:
      description: 1-based line of the site's condition in the file as it is after the run (or would be, in check mode).
      type: int
      sample: 96
    status:
      description:
        - V(applied) (patched by this run), V(already_applied), V(reverted) (the site now has the released text; the
          reason tells whether this run changed it), V(not_present) (the site does not exist in this release),
          V(upstream_supports_sm120) (upstream already includes SM120 here), V(unsupported) (cannot be enabled in this
          release, for example no C(is_sm120_supported) before 0.5.4).
      type: str
      choices: [applied, already_applied, reverted, not_present, upstream_supports_sm120, unsupported]
      sample: applied
    reason:
      description: Why, including the recognised shape and the release range it belongs to.
      type: str
      sample: SM120 enabled, patched (shape C3, SGLang 0.5.8 - 0.5.18)
changed:
  description: Whether a file was (or in check mode would be) changed.
  returned: always
  type: bool
  sample: true
diff:
  description: One before/after pair per changed file, with the file path as header (Ansible shows it as a unified diff).
  returned: in diff mode when a file changes
  type: list
  elements: dict
  sample:
    - before_header: /opt/sglang/venv/lib/python3.12/site-packages/sglang/srt/layers/communicator.py
      after_header: /opt/sglang/venv/lib/python3.12/site-packages/sglang/srt/layers/communicator.py
      before: "..."
      after: "..."
backup_files:
  description: Backup copies written because of O(backup).
  returned: always
  type: list
  elements: str
  sample: [/opt/sglang/venv/lib/python3.12/site-packages/sglang/srt/server_args.py.12345.2026-11-30@08:00:01~]
advice:
  description:
    - Kinds of the warnings given with this result, in their order, for code to act on (the warnings carry the text).
    - V(fusion_regression) (allreduce fusion enabled; upstream measured a throughput regression on PCIe SM120),
      V(flashinfer_too_old) (flashinfer-python before 0.6.17 beside SGLang), V(flashinfer_missing) (none found),
      V(moe_rule_preempted) (the GLM-5 site pre-empts SGLang 0.5.13+'s own SM120 MoE rule).
  returned: success
  type: list
  elements: str
  sample: [fusion_regression, flashinfer_missing]
  version_added: 0.2.0
file:
  description: File of the site that could not be recognised or written.
  returned: failure
  type: str
  sample: /opt/sglang/venv/lib/python3.12/site-packages/sglang/srt/layers/communicator.py
expected:
  description: Known text that was expected at the unrecognised site.
  returned: failure on an unknown shape
  type: str
  sample: (_is_sm90_supported or _is_sm100_supported)
found:
  description: Text found there instead (an excerpt of the anchored region).
  returned: failure on an unknown shape
  type: raw
  sample: "        (_is_sm90_supported or _is_sm100_supported or _is_hopper)\n        and _is_flashinfer_available\n"
site:
  description: Name of the site that failed.
  returned: failure on an unknown shape
  type: str
  sample: allreduce_fusion_gate
files_restored:
  description: Files this run had already replaced when a later write failed; each was written back to its old text.
  returned: failure while writing
  type: list
  elements: str
  sample: [/opt/sglang/venv/lib/python3.12/site-packages/sglang/srt/layers/communicator.py]
rollback_errors:
  description: Files that could not be written back (then reinstall SGLang); empty when the old text is whole again.
  returned: failure while writing
  type: list
  elements: str
  sample: []
no_space:
  description:
    - The file system of a patched file is full; C(path) is the file that could not be written, C(free) and C(needed)
      are bytes. Every file is left in its old text (see RV(files_restored), RV(rollback_errors)).
  returned: failure on a full file system
  type: dict
  sample: {path: /opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/layers/communicator.py, free: 0, needed: 41280}
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _sm120_patch as sm
from ansible_collections.llmops.sglang.plugins.module_utils.host._command import module_runner
from ansible_collections.llmops.sglang.plugins.module_utils.sglang._install import InstallError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type='path', default='python3'),
            sglang_path=dict(type='path'),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            patches=dict(type='list', elements='str', choices=list(sm.SITE_NAMES)),
            glm5_only=dict(type='bool', default=True),
            backup=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )

    try:
        result = sm.run_patch(
            module.params, module_runner(module),
            check_mode=module.check_mode,
            want_diff=module._diff,
            move=lambda src, dest: module.atomic_move(src, dest, unsafe_writes=False),
            backup=module.backup_local if module.params['backup'] else None,
        )
    except (sm.PatchError, InstallError) as err:
        context = dict(err.context)
        context.setdefault('sites', [])
        context.setdefault('changed', False)
        module.fail_json(msg=err.msg, **context)
    found = sm.advice(result)
    for item in found:
        module.warn(item.text)
    result['advice'] = [item.kind for item in found]
    result.pop('_flashinfer_version', None)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
