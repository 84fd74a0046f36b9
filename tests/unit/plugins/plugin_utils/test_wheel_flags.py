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
from types import SimpleNamespace

import pytest

from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_facts import Facts
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_inputs import Inputs
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_plan import Topology
from ansible_collections.llmops.sglang.plugins.plugin_utils._deploy_steps import (
    Context, StepFailed, check_flags, check_flags_before_install)
from ansible_collections.llmops.sglang.plugins.plugin_utils._wheel_flags import (
    WheelFlagsError, check_from_index, check_with_wheel, check_wheel, find_wheel, index_args)
from ansible_collections.llmops.sglang.plugins.plugin_utils import _wheel_flags

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


def test_the_hosts_of_a_run_parse_the_wheel_once_and_refuse_alike(wheelhouse, tmp_path, monkeypatch):
    """Every host of a run checks against the same wheel: parsed once per run (its temporary directory), then read."""
    house, version = wheelhouse
    path, cache = find_wheel(house, version), str(tmp_path / 'run')
    parses = []
    parse = _wheel_flags.parse_wheel
    monkeypatch.setattr(_wheel_flags, 'parse_wheel', lambda p: parses.append(p) or parse(p))
    first = check_wheel(path, version, GOOD, cache=cache)
    assert check_wheel(path, version, GOOD, cache=cache) == first and parses == [path]
    with pytest.raises(WheelFlagsError) as err:
        check_wheel(path, version, dict(GOOD, **{'mem-fraction-statc': 0.8, 'tp-size': 'eight'}), cache=cache)
    assert err.value.msg.startswith('SGLang %s does not define this flag: --mem-fraction-statc' % version)
    assert "'eight'" in err.value.msg and parses == [path]
    assert check_wheel(path, version, GOOD, cache='') == first and parses == [path, path]  # no cache: parsed each time


@pytest.mark.parametrize('extra, expected', [
    (['--no-deps'], []),
    (['--no-deps', '--index-url', 'https://mirror.example/simple', '--pre'], ['--index-url', 'https://mirror.example/simple', '--pre']),
    (['--no-index', '--find-links=/srv/wheels', '-i', 'https://a/simple', '--trusted-host', 'a'],
     ['--no-index', '--find-links=/srv/wheels', '-i', 'https://a/simple', '--trusted-host', 'a']),
    (['--find-links'], []),
])
def test_the_index_options_of_the_hosts_pip(extra, expected):
    assert index_args(extra) == expected


def test_without_a_wheelhouse_the_wheel_pip_would_install_is_fetched_once(tmp_path):
    """A real `pip download` on the controller from a local index (--no-index --find-links: no network)."""
    index, cache = tmp_path / 'index', tmp_path / 'cache'
    index.mkdir()
    wheel = sglang_wheels.wheel_path('0.5.9')
    shutil.copy(str(wheel), str(index))
    extra = ['--no-deps', '--no-index', '--find-links', str(index)]
    with pytest.raises(WheelFlagsError) as err:
        check_from_index('0.5.9', dict(GOOD, **{'mem-fraction-statc': 0.8}), extra, cache=str(cache))
    assert 'read from the wheel %s' % wheel.name in err.value.msg
    assert sorted(p.name for p in cache.iterdir()) == [wheel.name]  # no temporary directory left
    (index / wheel.name).unlink()  # the second dry run reads the cache, not the index
    checked, why = check_from_index('0.5.9', GOOD, extra, cache=str(cache))
    assert (checked['wheel'], why) == (str(cache / wheel.name), '')


def test_a_release_the_index_does_not_have_is_no_verdict_with_the_reason(tmp_path):
    checked, why = check_from_index('0.4.0', GOOD, ['--no-index', '--find-links', str(tmp_path)], cache=str(tmp_path / 'cache'))
    assert checked is None and why.startswith('pip download sglang==0.4.0 on the controller failed: ')
    assert list((tmp_path / 'cache').iterdir()) == []


def dry_run(pending, **inputs):
    """check_flags' context in a dry run: SGLang installed on the host (pending False) or not yet (True); the host
    records the modules it is asked to run and answers each with an unfailed result."""
    calls = []
    host = SimpleNamespace(name='h', check_mode=True, calls=calls, module=lambda name, args, **_: calls.append(name) or {})
    return Context(inputs=Inputs(**inputs), values={}, topo=Topology(host='h', check_mode=True),
                   facts=Facts(server='sglang', sglang_pending=pending), peers={}, host=host)


def test_the_dry_run_checks_the_installed_release_on_the_host_else_the_wheel_it_would_install(tmp_path, monkeypatch):
    installed = dry_run(False, args=dict(GOOD, **{'mem-fraction-statc': 0.8}))
    check_flags(installed)
    assert installed.host.calls == ['llmops.sglang.sglang_server_flags']  # the host's own release decides there
    index = tmp_path / 'index'
    index.mkdir()
    shutil.copy(str(sglang_wheels.wheel_path('0.5.9')), str(index))
    monkeypatch.setenv('LLMOPS_SGLANG_CACHE', str(tmp_path / 'cache'))  # the controller's cache starts empty
    for where in ({'wheelhouse': str(index)}, {'pip_extra_args': ('--no-index', '--find-links', str(index))}):
        ctx = dry_run(True, args=dict(GOOD, **{'mem-fraction-statc': 0.8}), **where)
        with pytest.raises(StepFailed) as err:
            check_flags(ctx)
        assert err.value.what == 'server arguments' and err.value.msg.startswith('SGLang 0.5.9 does not define this flag')
        assert ctx.host.calls == []


def test_a_dry_run_that_cannot_read_the_release_warns_and_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv('LLMOPS_SGLANG_CACHE', str(tmp_path / 'cache'))
    ctx = dry_run(True, version='0.4.0', pip_extra_args=('--no-index', '--find-links', str(tmp_path)))
    check_flags(ctx)
    prefix = ('check mode: the server arguments were not checked against SGLang 0.4.0, which is not installed on h yet and '
              'pip download sglang==0.4.0 on the controller failed: ')
    assert len(ctx.warnings) == 1 and ctx.warnings[0].startswith(prefix) and len(ctx.warnings[0]) > len(prefix)


def release_change(installed, wheelhouse, **inputs):
    """The plan step's context on a host that has SGLang INSTALLED (None: none) and records the modules it runs."""
    calls = []
    host = SimpleNamespace(name='h', check_mode=False, calls=calls, module=lambda name, args, **_: calls.append(name) or {},
                           say=lambda text, detail=False: None)
    inputs.setdefault('args', GOOD)
    return Context(inputs=Inputs(wheelhouse=wheelhouse, **inputs), values={}, topo=Topology(host='h'),
                   facts=Facts(server='sglang', stamp={'sglang_version': installed}), peers={}, host=host)


@pytest.mark.parametrize('installed', [None, '0.5.7'])
def test_a_release_change_is_checked_from_its_wheel_before_the_install(tmp_path, installed):
    # an upgrade with a misspelled flag installed the new release under the running server before it was refused
    shutil.copy(str(sglang_wheels.wheel_path('0.5.9')), str(tmp_path))
    ctx = release_change(installed, str(tmp_path), args=dict(GOOD, **{'mem-fraction-statc': 0.8}))
    with pytest.raises(StepFailed) as err:
        check_flags_before_install(ctx)
    assert err.value.what == 'server arguments' and err.value.msg.startswith('SGLang 0.5.9 does not define this flag')
    assert ctx.host.calls == []
    good = release_change(installed, str(tmp_path))
    check_flags_before_install(good)
    assert good.facts.flags_checked == '0.5.9'
    check_flags(good)  # the install step: already read from the release's wheel, no module run on the host
    assert good.host.calls == []


@pytest.mark.parametrize('installed, inputs', [
    ('0.5.9', {}),                          # the same release: the installed one is checked after the install
    (None, {'install': False}),             # the operator installs SGLang: nothing to read a wheel of
    (None, {'check_args': False}),
])
def test_no_wheel_is_read_when_the_release_does_not_change(tmp_path, installed, inputs):
    shutil.copy(str(sglang_wheels.wheel_path('0.5.9')), str(tmp_path))
    ctx = release_change(installed, str(tmp_path), **inputs)
    check_flags_before_install(ctx)
    assert ctx.facts.flags_checked == ''


def test_a_rolling_changes_plan_checks_the_flags_of_the_same_release_before_any_worker_leaves_rotation(tmp_path):
    """Found by a newcomer's run: a misspelled flag with the release unchanged passed the roll's plan and failed the
    canary's change only once it was out of rotation."""
    shutil.copy(str(sglang_wheels.wheel_path('0.5.9')), str(tmp_path))
    ctx = release_change('0.5.9', str(tmp_path), args=dict(GOOD, **{'enable-metrix': True}))
    ctx.preview = True
    with pytest.raises(StepFailed) as err:
        check_flags_before_install(ctx)
    assert err.value.msg.startswith('SGLang 0.5.9 does not define this flag: --enable-metrix') and ctx.host.calls == []
    good = release_change('0.5.9', str(tmp_path))
    good.preview = True
    check_flags_before_install(good)
    assert good.facts.flags_checked == '0.5.9'


def test_a_release_without_a_wheel_to_read_is_checked_on_the_host_after_the_install(tmp_path):
    ctx = release_change('0.5.7', str(tmp_path))  # an empty wheelhouse
    check_flags_before_install(ctx)
    check_flags(ctx)
    assert (ctx.facts.flags_checked, ctx.host.calls) == ('', ['llmops.sglang.sglang_server_flags'])
