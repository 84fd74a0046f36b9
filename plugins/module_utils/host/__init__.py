# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Primitives of the managed host that every other package uses: running a command (argv only, C locale), replacing a
file atomically, a configuration file as wanted (observe, decide, write), the one systemctl show reader, the process
table from /proc, and shielding a block of work from a lost session.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""
