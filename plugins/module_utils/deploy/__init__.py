# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""One deployment of an SGLang unit on a host: the deployment record (build, read, compare), the one-process restart,
where the current run starts in its log, the startup history, the host lock, the comparison of multi-node ranks and
the collection's own identity on the host.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""
