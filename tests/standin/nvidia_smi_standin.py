# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nvidia-smi stand-in for power sampling on CPU test hosts (test tooling, NOT nvidia-smi).

Answers ``--query-gpu=power.draw,power.limit,utilization.gpu --format=csv,noheader,nounits`` the way nvidia-smi
does, one line per GPU, with the figures the SGLang stand-in reports from its recorded profile
(``GET <url>/llmops-standin/gpu``). Utilisation is ``[N/A]``: the profile has no recorded figure for it.
Exits 9 (nvidia-smi's "cannot communicate with the driver") when the stand-in does not answer.

    python3 nvidia_smi_standin.py --url http://127.0.0.1:30000 --query-gpu=... --format=...

Standard library only; Python 3.9+.
"""

from __future__ import annotations

import argparse
import json
import sys
from urllib.request import ProxyHandler, build_opener


def main(argv=None):
    parser = argparse.ArgumentParser(prog='nvidia_smi_standin.py')
    parser.add_argument('--url', default='http://127.0.0.1:30000')
    parser.add_argument('--query-gpu', default='power.draw,power.limit,utilization.gpu')
    parser.add_argument('--format', default='csv,noheader,nounits')
    args = parser.parse_args(argv)
    try:
        with build_opener(ProxyHandler({})).open(args.url.rstrip('/') + '/llmops-standin/gpu', timeout=5) as answer:
            gpu = json.load(answer)
    except (OSError, ValueError) as exc:
        sys.stdout.write('Unable to determine the device handle for the stand-in GPU (%s)\n' % exc)
        return 9
    figures = {'power.draw': '%.2f' % gpu['power_w'], 'power.limit': '%.2f' % gpu['power_limit_w'],
               'utilization.gpu': '[N/A]'}
    line = ', '.join(figures.get(field.strip(), '[N/A]') for field in args.query_gpu.split(','))
    sys.stdout.write((line + '\n') * int(gpu['gpus']))
    return 0


if __name__ == '__main__':
    sys.exit(main())
