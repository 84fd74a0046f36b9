# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """Attributes that ansible.builtin.action_common_attributes does not define."""

    # Private fragments: not part of the collection's public API.

    # What every module of this collection shares: idempotent, runs on POSIX targets. A plain literal (not
    # IDEMPOTENT + ...): ansible-test's yamllint sanity reads fragments as literals and crashes on an expression. Use it after
    # ansible.builtin.action_common_attributes; a module adds its own check_mode, diff_mode (and idempotent details).
    MODULE = r'''
attributes:
  idempotent:
    description:
      - When run twice in a row with the same arguments, the second run reports RV(ignore:changed=false)
        and changes nothing on the target.
    support: full
  platform:
    platforms: posix
'''

    # A module run by an action plugin of this collection (wait_for_sglang, sglang_host_lock, sglang_run_report): the
    # plugin runs on the controller, once per host, without async. Use it after ansible.builtin.action_common_attributes
    # and ansible.builtin.action_common_attributes.flow; a module adds its own check_mode, diff_mode and idempotent support.
    ACTION = r'''
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  idempotent:
    description:
      - When run twice in a row with the same arguments, the second run reports RV(ignore:changed=false)
        and changes nothing on the target.
  platform:
    platforms: posix
'''
