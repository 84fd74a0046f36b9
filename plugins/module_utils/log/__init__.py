# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The SGLang start-up log classifier: the rules as data (stages, decisive phrases, root-cause classes, prefilter gates),
the traceback reader, and the incremental classifier that turns log text into stage, signature and first error line.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""
