# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Start the SGLang model gateway alone (what ``smg launch`` does) with its workers read from a file and its keys read
from a systemd credential, so that no key is ever on a command line (``/proc/<pid>/cmdline``, ``ps``, the unit).

Installed by the llmops.sglang.sglang_gateway role and run by its unit with the gateway venv's Python::

    python gateway_launch.py --launch-module smg.launch_router --workers-file FILE [--mode pd] [--credential NAME] -- SMG-ARGS...

* ``--workers-file``: JSON ``{"mode": "regular" | "pd", "workers": [{"url", "worker_type", "bootstrap_port"}]}``; the
  workers become ``--worker-urls URL...`` or ``--pd-disaggregation --prefill URL [PORT] --decode URL``.
* ``--mode``: the mode, when given, wins over the file's. The role puts ``--mode pd`` in the unit's command line, so
  that a switch between regular and PD mode changes the unit and restarts the gateway (smg reads the mode at its
  start only); the file's mode is for a unit written before the option.
* ``--credential NAME``: the JSON file ``$CREDENTIALS_DIRECTORY/NAME`` (systemd ``LoadCredential=``) with ``api_key``
  (``--api-key``: what clients send and what the gateway sends its workers) and ``control_plane_api_keys``
  (``--control-plane-api-keys``, entries ``id:name:role:key``).

The words are handed to the release's own parser and launcher in this process (``parse_router_args``,
``launch_router``), exactly as ``smg launch`` hands them. Python 3.9+ (the gateway venv's), standard library only.
"""

from __future__ import annotations

import importlib
import json
import os
import sys


def worker_words(spec, mode=None):
    """The launch words of the workers file (``mode``, when given, wins over the file's)."""
    workers = spec.get('workers') or []
    if (mode or spec.get('mode')) == 'pd':
        words = ['--pd-disaggregation']
        for worker in workers:
            if worker.get('worker_type') == 'prefill':
                port = worker.get('bootstrap_port')
                words += ['--prefill', worker['url']] + ([str(port)] if port else [])
            elif worker.get('worker_type') == 'decode':
                words += ['--decode', worker['url']]
        return words
    urls = [w['url'] for w in workers]
    return ['--worker-urls'] + urls if urls else []


def secret_words(path):
    with open(path, encoding='utf-8') as handle:
        secrets = json.load(handle)
    words = []
    if secrets.get('api_key'):
        words += ['--api-key', secrets['api_key']]
    if secrets.get('control_plane_api_keys'):
        words += ['--control-plane-api-keys'] + list(secrets['control_plane_api_keys'])
    return words


def split(argv):
    if '--' not in argv:
        raise SystemExit('gateway_launch.py: usage: --launch-module M --workers-file F [--credential NAME] -- SMG-ARGS...')
    cut = argv.index('--')
    own, rest = argv[:cut], argv[cut + 1:]
    options = {}
    for i in range(0, len(own) - 1, 2):
        options[own[i]] = own[i + 1]
    return options, rest


def main(argv):
    options, words = split(argv)
    with open(options['--workers-file'], encoding='utf-8') as handle:
        words += worker_words(json.load(handle), options.get('--mode'))
    if options.get('--credential'):
        directory = os.environ.get('CREDENTIALS_DIRECTORY')
        if not directory:
            raise SystemExit('gateway_launch.py: --credential needs systemd LoadCredential= ($CREDENTIALS_DIRECTORY unset)')
        words += secret_words(os.path.join(directory, options['--credential']))
    launcher = importlib.import_module(options.get('--launch-module', 'smg.launch_router'))
    launcher.launch_router(launcher.parse_router_args(words))


if __name__ == '__main__':
    main(sys.argv[1:])
