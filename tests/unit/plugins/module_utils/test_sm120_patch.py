# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""module_utils/sglang/_sm120_patch.py against the real released SGLang files of the fixture set.

The wheels are downloaded from PyPI at test time (cached; tests/sglang_wheels.py).  Without
network access these tests FAIL with pip's message: they never skip.

The expected statuses, files and changed lines below were written down by reading the released
source of each wheel (summarised in docs/sglang_patch_sm120.md), not computed by the code under test.
"""

from __future__ import annotations

import difflib
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _install as install
from ansible_collections.llmops.sglang.plugins.module_utils.sglang import _sm120_patch as sm

TESTS = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(TESTS))
import sglang_wheels  # noqa: E402  pylint: disable=wrong-import-position

PY = sys.executable

GATE, AUTO, GLM5, RES = sm.SITE_GATE, sm.SITE_AUTO, sm.SITE_GLM5, sm.SITE_RESOLVER
P = 'applied'

# version -> expected status of (gate, auto-enable, glm5, resolver) on state=present with the default site list
STATUS = {
    '0.4.10': ('unsupported', 'not_present', 'not_present', 'not_present'),
    '0.5.3': ('unsupported', 'unsupported', 'not_present', 'not_present'),
    '0.5.7': (P, 'upstream_supports_sm120', 'not_present', 'not_present'),
    '0.5.9': (P, P, P, 'not_present'),
    '0.5.10': (P, P, P, 'not_present'),
    '0.5.13': (P, P, P, 'not_present'),
    '0.5.14': (P, P, P, P),
    '0.5.18': (P, P, P, P),
    '0.5.20': (P, P, P, P),
    '0.5.23': (P, P, P, P),
}
assert set(STATUS) == set(sglang_wheels.FIXTURE_VERSIONS)

COMM = 'srt/layers/communicator.py'
ADDN = 'srt/layers/layer_boundary/residual/add_norm.py'
SARG = 'srt/server_args.py'
OVER = 'srt/arg_groups/overrides.py'
FUSE = 'srt/layers/flashinfer_comm_fusion.py'

GLM = '"GlmMoeDsaForCausalLM"'
H_GATE_OLD, H_GATE_NEW = '(_is_sm90_supported or _is_sm100_supported)', '(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)'
C2_GATE_OLD, C2_GATE_NEW = '(_is_sm100_supported or _is_sm90_supported)', '(_is_sm100_supported or _is_sm90_supported or _is_sm120_supported)'
A_OLD, A_NEW = 'and (is_sm90_supported() or is_sm100_supported())', 'and (is_sm90_supported() or is_sm100_supported() or is_sm120_supported())'
AP_OLD = 'and (get_platform().is_sm90 or get_platform().is_sm100)'
AP_NEW = 'and (get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120)'
G_OLD, G_NEW = 'if is_sm100_supported():', 'if is_sm100_supported() or (is_sm120_supported() and model_arch == %s):' % GLM
GP_OLD, GP_NEW = 'if get_platform().is_sm100:', 'if get_platform().is_sm100 or (get_platform().is_sm120 and model_arch == %s):' % GLM
F_OLD, F_NEW = 'if not (is_sm90_supported() or is_sm100_supported()):', 'if not (is_sm90_supported() or is_sm100_supported() or is_sm120_supported()):'
FP_OLD = 'if not (get_platform().is_sm90 or get_platform().is_sm100):'
FP_NEW = 'if not (get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120):'
IMP = 'is_sm120_supported,'
CACHE_H = '_is_sm120_supported = _is_cuda and is_sm120_supported()'
CACHE_P = '_is_sm120_supported = _is_cuda and get_platform().is_sm120'


def _c3(path=COMM):
    return {path: ({H_GATE_OLD}, {IMP, CACHE_H, H_GATE_NEW})}


# version -> {file: (removed stripped lines, added stripped lines)} for the default present run (glm5_only)
CHANGES = {
    '0.4.10': {},
    '0.5.3': {},
    '0.5.7': {COMM: ({C2_GATE_OLD}, {IMP, CACHE_H, C2_GATE_NEW})},
    '0.5.9': dict(_c3(), **{SARG: ({A_OLD, G_OLD}, {A_NEW, G_NEW})}),
    '0.5.10': dict(_c3(), **{SARG: ({A_OLD, G_OLD}, {A_NEW, G_NEW})}),
    '0.5.13': dict(_c3(), **{SARG: ({A_OLD, G_OLD}, {A_NEW, G_NEW})}),
    '0.5.14': dict(_c3(), **{SARG: ({A_OLD, G_OLD}, {A_NEW, G_NEW}), FUSE: ({F_OLD}, {IMP, F_NEW})}),
    '0.5.18': dict(_c3(), **{OVER: ({A_OLD, G_OLD}, {A_NEW, G_NEW}), FUSE: ({F_OLD}, {IMP, F_NEW})}),
    '0.5.20': {COMM: ({H_GATE_OLD}, {CACHE_P, H_GATE_NEW}), OVER: ({AP_OLD, GP_OLD}, {AP_NEW, GP_NEW}), FUSE: ({FP_OLD}, {FP_NEW})},
    '0.5.23': {ADDN: ({H_GATE_OLD}, {CACHE_P, H_GATE_NEW}), OVER: ({AP_OLD, GP_OLD}, {AP_NEW, GP_NEW}), FUSE: ({FP_OLD}, {FP_NEW})},
}
# number of changed lines per file for the default run (each edit touches exactly one line)
PATCHABLE = [v for v in sglang_wheels.FIXTURE_VERSIONS if CHANGES[v]]


@pytest.fixture
def release(tmp_path, request):
    """A fresh copy of the released files of request.param; returns (version, package dir)."""
    version = request.param
    try:
        pkg = sglang_wheels.copy_tree(version, tmp_path)
    except sglang_wheels.WheelUnavailable as exc:
        pytest.fail('SGLang %s is needed from PyPI for this test and could not be fetched:\n%s' % (version, exc))
    return version, pkg


def params(pkg, **kw):
    base = {'sglang_path': str(pkg), 'python': PY, 'state': 'present', 'glm5_only': True, 'patches': None}
    base.update(kw)
    return base


def changed_lines(before, after):
    removed, added = set(), set()
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm='', n=0):
        if line.startswith(('---', '+++', '@@')):
            continue
        if line.startswith('-'):
            removed.add(line[1:].strip())
        elif line.startswith('+'):
            added.add(line[1:].strip())
    return removed, added


@pytest.mark.parametrize('release', sglang_wheels.FIXTURE_VERSIONS, indirect=True)
def test_status_and_files_per_release(release):
    version, pkg = release
    before = sglang_wheels.snapshot(pkg)
    res = sm.run_patch(params(pkg), sglang_wheels.run_command, check_mode=True)
    assert res['sglang_version'] == version
    assert res['version_source'].startswith('dist-info METADATA')
    assert [s['name'] for s in res['sites']] == list(sm.SITE_NAMES)
    assert tuple(s['status'] for s in res['sites']) == STATUS[version]
    for site in res['sites']:
        assert site['reason']
        if site['status'] == P:
            assert os.path.relpath(site['file'], str(pkg)) in CHANGES[version]
            assert isinstance(site['line'], int) and site['line'] > 0
        if site['status'] == 'not_present':
            assert site['file'] is None
    assert res['changed'] == bool(CHANGES[version])
    assert sglang_wheels.snapshot(pkg) == before, 'check mode wrote to the package'


@pytest.mark.parametrize('release', PATCHABLE, indirect=True)
def test_apply_idempotent_revert_exact(release, tmp_path):
    version, pkg = release
    pristine = {rel: (pkg / rel).read_bytes() for rel in CHANGES[version]}
    everything = sglang_wheels.snapshot(pkg)

    first = sm.run_patch(params(pkg), sglang_wheels.run_command, want_diff=True)
    assert first['changed'] is True
    assert sorted(os.path.relpath(d['after_header'], str(pkg)) for d in first['diff']) == sorted(CHANGES[version])
    for rel, (removed, added) in CHANGES[version].items():
        text = (pkg / rel).read_text('utf-8')
        assert changed_lines(pristine[rel].decode('utf-8'), text) == (removed, added), rel
        # the site line reported is the patched condition in the new text
        py_compile.compile(str(pkg / rel), cfile=str(tmp_path / 'c.pyc'), doraise=True)
    patched = sglang_wheels.snapshot(pkg)
    for site in first['sites']:
        if site['status'] == P:
            line = Path(site['file']).read_text('utf-8').splitlines()[site['line'] - 1].strip()
            assert 'sm120' in line, (site, line)

    second = sm.run_patch(params(pkg), sglang_wheels.run_command, want_diff=True)
    assert second['changed'] is False and 'diff' not in second
    assert {s['status'] for s in second['sites'] if s['file']} <= {'already_applied', 'upstream_supports_sm120', 'unsupported'}
    assert sglang_wheels.snapshot(pkg) == patched

    third = sm.run_patch(params(pkg, state='absent'), sglang_wheels.run_command)
    assert third['changed'] is True
    for rel in CHANGES[version]:
        assert (pkg / rel).read_bytes() == pristine[rel], 'revert is not byte-exact for %s' % rel
    assert sglang_wheels.snapshot(pkg) == everything

    fourth = sm.run_patch(params(pkg, state='absent'), sglang_wheels.run_command)
    assert fourth['changed'] is False
    assert sglang_wheels.snapshot(pkg) == everything

    sm.run_patch(params(pkg), sglang_wheels.run_command)
    assert sglang_wheels.snapshot(pkg) == patched, 'apply/revert/apply is not stable'


@pytest.mark.parametrize('release', ['0.5.9', '0.5.20'], indirect=True)
def test_check_mode_and_diff_content(release):
    version, pkg = release
    before = sglang_wheels.snapshot(pkg)
    res = sm.run_patch(params(pkg), sglang_wheels.run_command, check_mode=True, want_diff=True)
    assert sglang_wheels.snapshot(pkg) == before
    assert res['changed'] is True
    by_file = {os.path.relpath(d['before_header'], str(pkg)): d for d in res['diff']}
    assert sorted(by_file) == sorted(CHANGES[version])
    for rel, diff in by_file.items():
        assert diff['before_header'] == diff['after_header'] == str(pkg / rel)
        assert diff['before'] == (pkg / rel).read_text('utf-8')
        assert changed_lines(diff['before'], diff['after']) == CHANGES[version][rel]
    # the diff is exactly what a real run writes
    sm.run_patch(params(pkg), sglang_wheels.run_command)
    for rel, diff in by_file.items():
        assert (pkg / rel).read_text('utf-8') == diff['after']


@pytest.mark.parametrize('release', ['0.5.9'], indirect=True)
def test_local_edit_is_unknown_shape_and_nothing_is_written(release):
    version, pkg = release
    comm = pkg / COMM
    edited = comm.read_text('utf-8').replace(H_GATE_OLD, '(_is_sm90_supported or _is_sm100_supported or _is_hopper)')
    comm.write_text(edited, 'utf-8')
    before = sglang_wheels.snapshot(pkg)
    with pytest.raises(sm.PatchError) as info:
        sm.run_patch(params(pkg), sglang_wheels.run_command)
    err = info.value
    assert str(comm) in err.msg and version in err.msg
    assert err.context['file'] == str(comm)
    assert err.context['sglang_version'] == version
    assert err.context['site'] == GATE
    assert H_GATE_OLD in err.context['expected']
    assert '_is_hopper' in err.context['found']
    # server_args.py (sites A and G, recognised) was not written either: all or nothing
    assert sglang_wheels.snapshot(pkg) == before


@pytest.mark.parametrize('release', ['0.5.14'], indirect=True)
def test_partially_patched_site_fails(release):
    version, pkg = release
    comm = pkg / COMM
    # a hand edit of the gate without the helper line: not a state this module writes
    comm.write_text(comm.read_text('utf-8').replace(H_GATE_OLD, H_GATE_NEW), 'utf-8')
    before = sglang_wheels.snapshot(pkg)
    with pytest.raises(sm.PatchError) as info:
        sm.run_patch(params(pkg), sglang_wheels.run_command)
    assert 'partially patched' in info.value.msg and str(comm) in info.value.msg
    assert sglang_wheels.snapshot(pkg) == before
    with pytest.raises(sm.PatchError):
        sm.run_patch(params(pkg, state='absent'), sglang_wheels.run_command)
    assert sglang_wheels.snapshot(pkg) == before


@pytest.mark.parametrize('release', ['0.5.23'], indirect=True)
def test_newer_release_with_moved_file_fails(release):
    version, pkg = release
    meta = next(pkg.parent.glob('sglang-*.dist-info')) / 'METADATA'
    meta.write_text(meta.read_text('utf-8').replace('Version: 0.5.23', 'Version: 0.5.24'), 'utf-8')
    (pkg / ADDN).rename(pkg / 'srt' / 'layers' / 'add_norm_moved.py')
    before = sglang_wheels.snapshot(pkg)
    with pytest.raises(sm.PatchError) as info:
        sm.run_patch(params(pkg), sglang_wheels.run_command)
    assert info.value.context['site'] == GATE
    assert '0.5.24' in info.value.msg
    assert sglang_wheels.snapshot(pkg) == before


@pytest.mark.parametrize('release', ['0.5.13'], indirect=True)
def test_read_only_file_fails_cleanly(release):
    version, pkg = release
    target = pkg / SARG
    os.chmod(str(target), 0o444)
    before = sglang_wheels.snapshot(pkg)
    with pytest.raises(sm.PatchError) as info:
        sm.run_patch(params(pkg), sglang_wheels.run_command)
    assert 'read-only' in info.value.msg and str(target) in info.value.msg
    assert info.value.context['file'] == str(target)
    assert sglang_wheels.snapshot(pkg) == before  # communicator.py (writable) was not written either
    assert not list(target.parent.glob('.*.sm120tmp'))
    # check mode still reports what would change
    assert sm.run_patch(params(pkg), sglang_wheels.run_command, check_mode=True)['changed'] is True


@pytest.mark.parametrize('release', ['0.5.9'], indirect=True)
def test_compile_failure_writes_nothing(release):
    version, pkg = release
    before = sglang_wheels.snapshot(pkg)
    with pytest.raises(sm.PatchError) as info:
        sm.run_patch(params(pkg, python='/bin/false'), sglang_wheels.run_command)
    assert 'does not compile' in info.value.msg
    assert sglang_wheels.snapshot(pkg) == before


@pytest.mark.parametrize('release', ['0.5.7', '0.5.3', '0.4.10'], indirect=True)
def test_explicit_site_that_cannot_be_enabled_fails(release):
    version, pkg = release
    site = {'0.5.7': AUTO, '0.5.3': GATE, '0.4.10': GLM5}[version]
    before = sglang_wheels.snapshot(pkg)
    with pytest.raises(sm.PatchError) as info:
        sm.run_patch(params(pkg, patches=[site]), sglang_wheels.run_command)
    assert site in info.value.msg and version in info.value.msg
    assert sglang_wheels.snapshot(pkg) == before
    # reverting it is vacuous, not an error
    res = sm.run_patch(params(pkg, patches=[site], state='absent'), sglang_wheels.run_command)
    assert res['changed'] is False


@pytest.mark.parametrize('release', ['0.5.20'], indirect=True)
def test_explicit_subset_only_touches_those_sites(release):
    version, pkg = release
    before = sglang_wheels.snapshot(pkg)
    res = sm.run_patch(params(pkg, patches=[RES]), sglang_wheels.run_command)
    assert [s['name'] for s in res['sites']] == [RES]
    after = sglang_wheels.snapshot(pkg)
    assert {k for k in after if after[k] != before.get(k)} == {FUSE}


@pytest.mark.parametrize('release', ['0.5.9', '0.5.18', '0.5.20'], indirect=True)
def test_glm5_variant_switch_and_revert(release):
    version, pkg = release
    rel = CHANGES[version]
    gfile = [f for f in rel if f in (SARG, OVER)][0]
    pristine = (pkg / gfile).read_bytes()
    sm.run_patch(params(pkg), sglang_wheels.run_command)
    res = sm.run_patch(params(pkg, glm5_only=False), sglang_wheels.run_command)
    assert res['changed'] is True
    glm = [s for s in res['sites'] if s['name'] == GLM5][0]
    assert glm['status'] == P and 'all-models' in glm['reason']
    text = (pkg / gfile).read_text('utf-8')
    assert GLM not in Path(glm['file']).read_text('utf-8').splitlines()[glm['line'] - 1]
    assert ('if is_sm100_supported() or is_sm120_supported():' in text) or ('if get_platform().is_sm100 or get_platform().is_sm120:' in text)
    assert sm.run_patch(params(pkg, glm5_only=False), sglang_wheels.run_command)['changed'] is False
    sm.run_patch(params(pkg, state='absent'), sglang_wheels.run_command)
    assert (pkg / gfile).read_bytes() == pristine


@pytest.mark.parametrize('release', ['0.5.9'], indirect=True)
def test_mode_owner_kept_and_stale_bytecode_removed(release):
    version, pkg = release
    comm = pkg / COMM
    os.chmod(str(comm), 0o640)
    if os.geteuid() == 0:
        os.chown(str(comm), 65534, 65534)
    cache = comm.parent / '__pycache__'
    stale = py_compile.compile(str(comm), cfile=str(cache / 'communicator.cpython-312.pyc'), doraise=True)
    other = py_compile.compile(str(comm.parent / 'linear.py') if (comm.parent / 'linear.py').exists() else str(comm),
                               cfile=str(cache / 'unrelated.cpython-312.pyc'), doraise=True)
    st = os.stat(str(comm))
    sm.run_patch(params(pkg), sglang_wheels.run_command)
    st2 = os.stat(str(comm))
    assert (st2.st_mode, st2.st_uid, st2.st_gid) == (st.st_mode, st.st_uid, st.st_gid)
    assert st2.st_ino != st.st_ino  # replaced by rename, not rewritten in place
    assert not os.path.exists(stale)
    assert os.path.exists(other)


@pytest.mark.parametrize('release', ['0.5.9', '0.4.10'], indirect=True)
def test_version_sources_in_order(release):
    version, pkg = release
    assert install.read_version(str(pkg)) == (version, 'dist-info METADATA (%s)' % next(pkg.parent.glob('sglang-*.dist-info/METADATA')))
    for dist in pkg.parent.glob('sglang-*.dist-info'):
        for f in dist.iterdir():
            f.unlink()
        dist.rmdir()
    got, source = install.read_version(str(pkg))
    if (pkg / '_version.py').exists():
        assert got == version and source.startswith('sglang/_version.py')
        (pkg / '_version.py').unlink()
        got, source = install.read_version(str(pkg))
    if version == '0.4.10':
        assert (got, source.split(' ')[0]) == ('0.4.10', 'sglang/version.py')
    else:
        # 0.5.7+ version.py only computes the version at import time: nothing static to read
        assert got is None and source is None


@pytest.mark.parametrize('release', ['0.5.9'], indirect=True)
def test_unknown_version_still_patches_by_content(release):
    version, pkg = release
    for dist in pkg.parent.glob('sglang-*.dist-info'):
        for f in dist.iterdir():
            f.unlink()
        dist.rmdir()
    (pkg / '_version.py').unlink()
    res = sm.run_patch(params(pkg), sglang_wheels.run_command, check_mode=True)
    assert res['sglang_version'] is None
    assert tuple(s['status'] for s in res['sites']) == STATUS[version]


@pytest.mark.parametrize('release', ['0.5.10'], indirect=True)
def test_locate_with_interpreter_does_not_import_sglang(release, tmp_path):
    version, pkg = release
    marker = tmp_path / 'imported'
    init = pkg / '__init__.py'
    init.write_text('open(%r, "w").close()\n' % str(marker) + init.read_text('utf-8'), 'utf-8')
    env = dict(os.environ, PYTHONPATH=str(pkg.parent))

    def run_env(argv, data):
        proc = subprocess.run(argv, input=data, capture_output=True, check=False, env=env, cwd='/')
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    found, info = install.locate_package(PY, run_env)
    assert found == str(pkg)
    assert info['executable']
    assert not marker.exists(), 'locating SGLang imported it'
    res = sm.run_patch({'python': PY, 'state': 'present', 'patches': None, 'glm5_only': True}, run_env, check_mode=True)
    assert res['sglang_path'] == str(pkg) and res['sglang_version'] == version
    assert not marker.exists()


def test_locate_reports_missing_sglang(tmp_path):
    def run_clean(argv, data):
        env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
        proc = subprocess.run(argv, input=data, capture_output=True, check=False, env=env, cwd=str(tmp_path))
        return proc.returncode, proc.stdout.decode(), proc.stderr.decode()

    # an "sglang" directory in the cwd must not count: the snippet drops the cwd from sys.path
    (tmp_path / 'sglang' / 'srt').mkdir(parents=True)
    (tmp_path / 'sglang' / 'srt' / 'server_args.py').write_text('')
    with pytest.raises(install.InstallError) as info:
        install.locate_package(PY, run_clean)
    assert 'not installed' in info.value.msg and PY in info.value.msg
    with pytest.raises(install.InstallError) as info:
        sm.run_patch({'python': str(tmp_path / 'no-such-python'), 'state': 'present'}, run_clean)
    assert 'does not exist or is not executable' in info.value.msg


def test_version_key_orders_releases():
    keys = [install.version_key(v) for v in ('0.4.6', '0.4.6.post5', '0.5.0rc2', '0.5.0', '0.5.10', '0.5.10.post1', '0.5.23')]
    assert keys == sorted(keys)
    assert install.version_key('0.0.0.dev0') is None and install.version_key('garbage') is None


def test_every_shape_has_distinct_old_and_new_forms():
    # an edit whose released text were a substring-identical line of its patched text could not be told apart
    for site in sm.SITE_NAMES:
        for glm5_only in (True, False):
            for shape in sm.site_shapes(site, glm5_only):
                for edit in shape.edits:
                    if shape.status is None and isinstance(edit, sm.Replace):
                        assert edit.old != edit.new and edit.old not in edit.alternates, (site, shape.name)


@pytest.mark.parametrize('release', ['0.5.14'], indirect=True)
def test_failed_write_restores_files_already_written(release):
    version, pkg = release
    before = sglang_wheels.snapshot(pkg)
    calls = []

    def move_then_fail(src, dest):
        # the real rename for the first file, an I/O error (as from a full or read-only file system) for the second
        calls.append(dest)
        if len(calls) == 2:
            raise OSError(28, 'No space left on device', dest)
        sm._default_move(src, dest)  # pylint: disable=protected-access

    with pytest.raises(sm.PatchError) as info:
        sm.run_patch(params(pkg), sglang_wheels.run_command, move=move_then_fail)
    assert 'No space left on device' in info.value.msg
    assert 'already written were restored' in info.value.msg
    assert info.value.context['files_restored'] == [calls[0]]
    assert sglang_wheels.snapshot(pkg) == before
    assert not [p for p in sglang_wheels.snapshot(pkg) if p.endswith('.sm120tmp')]


class HungUp(Exception):
    """Stands for the default action of SIGHUP (the process ends) inside this test process."""


@pytest.mark.parametrize('release', ['0.5.14'], indirect=True)
def test_a_hang_up_between_two_file_writes_does_not_leave_a_mixed_set(release):
    """A real SIGHUP (the controller's session lost) after the first patched file is replaced: the write goes on to the
    last file, so the install is in one of its two whole states, and the process's handler is back afterwards."""
    import signal  # pylint: disable=import-outside-toplevel
    version, pkg = release
    calls = []

    def hung_up(signum, frame):
        raise HungUp()

    def move_then_hang_up(src, dest):
        sm._default_move(src, dest)  # pylint: disable=protected-access
        calls.append(dest)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGHUP)

    before = sglang_wheels.snapshot(pkg)
    previous = signal.signal(signal.SIGHUP, hung_up)
    try:
        result = sm.run_patch(params(pkg), sglang_wheels.run_command, move=move_then_hang_up)
        assert signal.getsignal(signal.SIGHUP) is hung_up
    finally:
        signal.signal(signal.SIGHUP, previous)
    after = sglang_wheels.snapshot(pkg)
    assert result['changed'] and len(calls) > 1, version
    # every file the patch changes was replaced (none left in its released text beside a patched one)
    assert sorted(calls) == sorted(os.path.join(str(pkg), rel) for rel in after if after[rel] != before.get(rel))
    # the whole patched state: a second run finds nothing to do
    assert sm.run_patch(params(pkg), sglang_wheels.run_command)['changed'] is False
