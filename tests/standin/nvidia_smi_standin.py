# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""nvidia-smi stand-in for CPU test hosts (test tooling, NOT nvidia-smi).

Power sampling: answers ``--query-gpu=power.draw,power.limit,utilization.gpu --format=csv,noheader,nounits`` the way
nvidia-smi does, one line per GPU, with the figures the SGLang stand-in reports from its recorded profile
(``GET <url>/llmops-standin/gpu``). Utilisation is ``[N/A]``: the profile has no recorded figure for it.
Exits 9 (nvidia-smi's "cannot communicate with the driver") when the stand-in does not answer.

GPU health: with ``--recorded FILE`` (a recorded ``nvidia-smi -q``, tests/fixtures/nvidia_health) it answers ``-q``
with that file and ``--query-gpu=index,pci.bus_id,uuid,name,driver_version --format=csv,noheader`` from it.

    python3 nvidia_smi_standin.py --url http://127.0.0.1:30000 --query-gpu=... --format=...
    python3 nvidia_smi_standin.py --recorded nvidia-smi-q.txt -q

Standard library only; Python 3.9+.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from urllib.request import ProxyHandler, build_opener


def recorded_gpus(text):
    """[{field: value}] of the GPUs of a recorded ``nvidia-smi -q``, in index order."""
    gpus, driver = [], ''
    for line in text.splitlines():
        found = re.match(r'^GPU ([0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)\s*$', line)
        if found:
            gpus.append({'index': str(len(gpus)), 'pci.bus_id': found.group(1), 'driver_version': driver})
            continue
        key, sep, value = line.partition(' : ')
        key = key.strip()
        if sep and key == 'Driver Version':
            driver = value.strip()
        elif sep and gpus and key in ('GPU UUID', 'Product Name'):
            gpus[-1]['uuid' if key == 'GPU UUID' else 'name'] = value.strip()
    return gpus


def answer_recorded(args):
    with open(args.recorded, encoding='utf-8') as handle:
        text = handle.read()
    if args.q:
        sys.stdout.write(text)
        return 0
    fields = [field.strip() for field in args.query_gpu.split(',')]
    for gpu in recorded_gpus(text):
        sys.stdout.write(', '.join(gpu.get(field, '[N/A]') for field in fields) + '\n')
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog='nvidia_smi_standin.py')
    parser.add_argument('--url', default='http://127.0.0.1:30000')
    parser.add_argument('--query-gpu', default='power.draw,power.limit,utilization.gpu')
    parser.add_argument('--format', default='csv,noheader,nounits')
    parser.add_argument('--recorded', default=None, help='a recorded nvidia-smi -q: answer -q and the identity queries from it')
    parser.add_argument('-q', action='store_true')
    args = parser.parse_args(argv)
    if args.recorded:
        return answer_recorded(args)
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
