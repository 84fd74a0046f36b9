# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""An installed SGLang release and a running SGLang server: where it is installed and which version, the flags it
defines, the SM120 patch sites, compile caches, HTTP probes and the smoke request.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""
