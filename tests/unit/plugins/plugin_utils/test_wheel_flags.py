# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The server flags a dry run reads from the wheel it would install (plugins/plugin_utils/_wheel_flags.py), on real
released wheels from the test wheel cache (tests/sglang_wheels.py; skipped, saying how to fill it, when absent): the
same flags as the collection's reading of the release, a misspelled flag and a value the release refuses are refused
naming them, a wheelhouse without the release is no verdict, a broken wheel is an error saying which file."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._wheel_flags import WheelFlagsError, check_with_wheel, find_wheel

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position

# a pure-Python wheel and a platform wheel (0.5.11+), whose server_args.py is split differently
VERSIONS = ('0.5.9', '0.5.20')
GOOD = {'model-path': 'zai-org/GLM-5-FP8', 'tp-size': 8, 'mem-fraction-static': 0.85, 'trust-remote-code': True}


@pytest.fixture(params=VERSIONS)
def wheelhouse(request, tmp_path):
    shutil.copy(str(sglang_wheels.wheel_path(request.param)), str(tmp_path))
    return str(tmp_path), request.param


def test_the_flags_are_the_releases_own(wheelhouse):
    house, version = wheelhouse
    checked = check_with_wheel(house, version, GOOD)
    assert checked == {'wheel': find_wheel(house, version), 'flags': len(sglang_wheels.server_flags(version)['flags'])}
    assert checked['flags'] > 100


def test_a_misspelled_flag_and_a_refused_value_are_named(wheelhouse):
    house, version = wheelhouse
    with pytest.raises(WheelFlagsError) as err:
        check_with_wheel(house, version, dict(GOOD, **{'mem-fraction-statc': 0.8, 'tp-size': 'eight'}))
    # the release is not installed anywhere: the message says the release, read from its wheel
    assert err.value.msg.startswith('SGLang %s does not define this flag: --mem-fraction-statc (did you mean --mem-fraction-static'
                                    % version)
    assert "'eight'" in err.value.msg and '--tp-size' in err.value.msg
    assert find_wheel(house, version).rsplit('/', 1)[1] in err.value.msg


def test_no_wheel_of_the_release_is_no_verdict(wheelhouse, tmp_path):
    house, version = wheelhouse
    assert check_with_wheel(house, '0.4.0', GOOD) is None
    assert check_with_wheel(str(tmp_path / 'absent'), version, GOOD) is None
    assert check_with_wheel('', version, GOOD) is None


def test_a_broken_wheel_is_an_error_naming_it(tmp_path):
    broken = tmp_path / 'sglang-0.5.9-py3-none-any.whl'
    broken.write_bytes(b'not a zip archive')
    with pytest.raises(WheelFlagsError) as err:
        check_with_wheel(str(tmp_path), '0.5.9', GOOD)
    assert str(broken) in err.value.msg
