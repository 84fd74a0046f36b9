# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The options of modules that work on an installed SGLang (plugins/module_utils/sglang/_install.py)."""

    # Private fragment: not part of the collection's public API.
    DOCUMENTATION = r'''
options:
  python:
    description:
      - Interpreter of the environment where SGLang is installed, for example V(/opt/sglang/venv/bin/python); a bare
        name is looked up in E(PATH).
      - SGLang is located with it through C(importlib.util.find_spec), which does not import SGLang (importing it needs
        the GPU stack). The version is read from the C(sglang-*.dist-info/METADATA) beside the package, then
        C(sglang/_version.py), then C(sglang/version.py).
      - With O(sglang_path) it is not used to locate SGLang.
    type: path
    default: python3
  sglang_path:
    description:
      - The installed C(sglang) package directory (the one containing C(srt/server_args.py)), instead of locating it
        with O(python).
    type: path
'''
