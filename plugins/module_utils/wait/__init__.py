# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The readiness wait of llmops.sglang.wait_for_sglang: log sources (file, journal), observe -> decide -> report, typed
state carried between rounds by the action plugin, one round's loop, and the module's argument_spec (_spec: the
action plugin reads it, and nothing else of the pipeline but _state).

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""
