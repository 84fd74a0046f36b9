# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Measuring a running SGLang server: SGLang's bench_serving or the standard-library streaming client, GPU power
sampling, statistics and the accept / regress decision against the accepted results kept on the host.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""
