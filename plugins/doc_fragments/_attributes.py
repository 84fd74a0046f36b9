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

    # A module run by an action plugin of this collection (wait_for_sglang, sglang_deploy, sglang_run_report, ...): the
    # plugin runs on the controller, once per host, without async; it supports check mode, shows no diff and is
    # idempotent. Use it after ansible.builtin.action_common_attributes and ansible.builtin.action_common_attributes.flow.
    # A module states only what differs or adds details: its own entry of an attribute is merged over this one's
    # (ansible.utils.plugin_docs.merge_fragment), e.g. ``check_mode: {details: ...}`` or ``platform: {platforms: all}``.
    ACTION = r'''
attributes:
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    description:
      - When run twice in a row with the same arguments, the second run reports RV(ignore:changed=false)
        and changes nothing on the target.
    support: full
  platform:
    platforms: posix
'''
