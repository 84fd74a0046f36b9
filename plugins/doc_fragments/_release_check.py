# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The options of the GPU release check after a stop that sglang_restart and sglang_guard share (their argument specs
    come from one place too: preflight/_host.gpu_check_options, guard/_config)."""

    # Private fragment: not part of the collection's public API.
    DOCUMENTATION = r'''
options:
  gpu_devices:
    description: The server's GPU device nodes, as O(llmops.sglang.sglang_preflight#module:gpu_devices).
    type: list
    elements: path
    default: []
  shared_devices:
    description: Device nodes every CUDA process opens, as O(llmops.sglang.sglang_preflight#module:shared_devices).
    type: list
    elements: path
    default: [/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools]
'''
