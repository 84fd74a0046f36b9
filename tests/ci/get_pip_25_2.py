# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in for ansible-test's pip bootstrap script (get-pip-<version>.py).

ansible-test creates its sanity/units virtual environments without pip and then runs a bootstrap
script it downloads from ci-files.testing.ansible.com, a host these CI machines cannot reach. It
looks for a cached copy first: ~/.ansible/test/cache/get_pip_<pip version with underscores>.py
(pip 25.2 for ansible-core 2.21). tests/run-all.sh copies this file there under the name that the
installed ansible-test asks for. It is run as __main__ with pip-install arguments (among them the
pinned ``pip==X``): bring pip into the venv with the standard library's ensurepip, then let that
pip install exactly what was asked for from PyPI.
"""

from __future__ import annotations

import subprocess
import sys


def main() -> None:
    args = [a for a in sys.argv[1:] if a not in ('--no-setuptools', '--no-wheel')]
    subprocess.check_call([sys.executable, '-m', 'ensurepip', '--default-pip'], stdout=subprocess.DEVNULL)
    subprocess.check_call([sys.executable, '-m', 'pip', 'install', '--upgrade', '--force-reinstall'] + args)


if __name__ == '__main__':
    main()
