# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The SGLang pre-flight: what is observed on the host (GPU holders, ports, leaked shared memory, model and disk, driver
and CUDA compatibility, the health of the server's GPUs), the pure decisions over it, and the bounded cleanup of the
server's own orphans.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""
