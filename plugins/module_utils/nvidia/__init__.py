# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The NVIDIA driver pipeline: evidence (kernel module, NVML, libraries, packages) -> verdict (match, mismatches) -> fix
or install plan -> apt/dnf backends -> verify. And the GPUs' health as NVIDIA's tools report it: Xid lines of the kernel
log read against NVIDIA's Xid catalog (``_xid``), ``nvidia-smi -q`` (``_smi_q``), ``dcgmi diag`` (``_dcgm``).

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""
