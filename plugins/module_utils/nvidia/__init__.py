# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The NVIDIA driver pipeline: evidence (kernel module, NVML, libraries, packages) -> verdict (match, mismatches) -> fix
or install plan -> apt/dnf backends -> verify.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""
