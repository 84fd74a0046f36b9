# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The other pre-flight checks on real parts: ports held by real listeners (read from the real /proc/net/tcp),
shared memory files held open, mapped or left behind, the Hugging Face cache layout and free space, the decisions and
their one-line summary, and the comparison of ranks (module_utils; the rank_differences filter: tests/unit/plugins/filter/test_preflight_filter.py)."""

from __future__ import annotations

import os
import socket

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _gpu_holders as gh
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _model_disk as md
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _ports as pt
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _checks as pf
from ansible_collections.llmops.sglang.plugins.module_utils.preflight import _shm_leaks as sl
from ansible_collections.llmops.sglang.plugins.module_utils.host._procfs import read_processes

import preflight_procs as pp


@pytest.fixture
def spawner():
    spawn = pp.Spawner()
    yield spawn
    spawn.close()


# ---- ports -----------------------------------------------------------------------------------------------------------

def test_ports_the_server_binds():
    assert pt.server_ports({}) == [{'port': 30000, 'flag': '--port'}]
    ports = pt.server_ports({'--port': 8000, 'nccl_port': 29500, 'dist-init-addr': '10.0.0.1:50000', 'node-rank': 0,
                             'disaggregation-mode': 'prefill'})
    assert ports == [{'port': 8000, 'flag': '--port'}, {'port': 29500, 'flag': '--nccl-port'},
                     {'port': 50000, 'flag': '--dist-init-addr'}, {'port': 8998, 'flag': '--disaggregation-bootstrap-port'}]
    # Only rank 0 listens on the dist-init port.
    assert pt.server_ports({'dist-init-addr': '10.0.0.1:50000', 'node-rank': 1}) == [{'port': 30000, 'flag': '--port'}]


def test_a_real_listener_is_found_with_its_process():
    for family, address in ((socket.AF_INET, '127.0.0.1'), (socket.AF_INET6, '::1')):
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.bind((address, 0))
            listener.listen(1)
            port = listener.getsockname()[1]
            found = [entry for entry in pt.read_listeners() if entry['port'] == port]
            assert [entry['address'] for entry in found] == [address]
            owners = pt.listener_pids(found, read_processes())
            assert owners[found[0]['inode']] == [os.getpid()]
        finally:
            listener.close()


def test_port_decision_names_a_foreign_holder_and_collects_orphans():
    ports = [{'port': 30000, 'flag': '--port'}, {'port': 29500, 'flag': '--nccl-port'}]
    listeners = [{'address': '0.0.0.0', 'port': 30000, 'inode': 11}, {'address': '127.0.0.1', 'port': 29500, 'inode': 12}]
    classified = {501: (gh.FOREIGN, 'runs as alice, not as the service user', 'pid 501 python3 (user alice)'),
                  502: (gh.ORPHAN, 'an SGLang process re-parented', 'pid 502 sglang::scheduler_TP0 (user sglang)')}
    check, orphans = pf.decide_ports(ports, listeners, {11: [501], 12: [502]}, classified, cleanup=True, check_mode=False)
    assert check.status == pf.FAILED and orphans == [502]
    assert check.problems == ['port 30000 (--port) is held by pid 501 python3 (user alice): runs as alice, not as the service user. '
                              'Stop it or set --port to a free port.']
    check, orphans = pf.decide_ports(ports[1:], listeners[1:], {12: [502]}, classified, cleanup=True, check_mode=True)
    assert (check.status, orphans) == (pf.WOULD_CLEAN, [502])


# ---- shared memory ---------------------------------------------------------------------------------------------------

def test_leaked_shared_memory_is_only_the_unheld_files_of_the_user(tmp_path, spawner):
    shm = tmp_path / 'shm'
    shm.mkdir()
    for name in ('sem.mp-leaked', 'torch_4242_0', 'sem.mp-open', 'psm_mapped', 'nccl-other-user'):
        (shm / name).write_bytes(b'\0' * 4096)
    os.chown(str(shm / 'nccl-other-user'), pp.NOBODY, pp.NOBODY)
    spawner.start([shm / 'sem.mp-open', 'map:%s' % (shm / 'psm_mapped')], title='sglang::scheduler_TP0')
    leaks = sl.find_leaks(str(shm), read_processes(), os.getuid())
    assert [(os.path.basename(leak['path']), leak['kind']) for leak in leaks] == [('sem.mp-leaked', 'semaphore'), ('torch_4242_0', 'segment')]
    check = pf.decide_shm(leaks, cleanup=False, check_mode=False)
    assert check.status == pf.FAILED and check.summary == '2 leaked (1 semaphores)'
    assert sl.remove(leaks, os.getuid()) == [leak['path'] for leak in leaks]
    assert sorted(os.listdir(str(shm))) == ['nccl-other-user', 'psm_mapped', 'sem.mp-open']


# ---- model and disk --------------------------------------------------------------------------------------------------

COMMIT = 'c1899de289a04d12100db370d81485cdf75e47ca'


def hub(tmp_path):
    cache = tmp_path / 'hub'
    repo = cache / 'models--Qwen--Qwen3-0.6B'
    (repo / 'refs').mkdir(parents=True)
    (repo / 'refs' / 'main').write_text(COMMIT)
    (repo / 'snapshots' / COMMIT).mkdir(parents=True)
    (repo / 'snapshots' / COMMIT / 'config.json').write_text('{}')
    return str(cache)


def test_hub_cache_and_offline_from_the_environment(tmp_path):
    assert md.hub_cache({'HF_HUB_CACHE': '/c'}) == '/c'
    assert md.hub_cache({'HF_HOME': '/h'}) == '/h/hub'
    assert md.hub_cache({'HOME': '/var/lib/sglang'}) == '/var/lib/sglang/.cache/huggingface/hub'
    assert md.offline({'HF_HUB_OFFLINE': '1'}) and not md.offline({'HF_HUB_OFFLINE': '0'})
    cache = hub(tmp_path)
    assert md.cached_revision(cache, 'Qwen/Qwen3-0.6B') == (COMMIT, os.path.join(cache, 'models--Qwen--Qwen3-0.6B', 'snapshots', COMMIT))
    assert md.cached_revision(cache, 'Qwen/Qwen3-0.6B', 'v2') == (None, None)
    assert md.cached_revision(cache, 'zai-org/GLM-5-FP8') == (None, None)


def test_disk_decision(tmp_path):
    cache = hub(tmp_path)
    hub_model = md.model_of({'model-path': 'zai-org/GLM-5-FP8'}, '/')
    assert hub_model['kind'] == 'hub'
    spaces = md.free_space([cache, str(tmp_path / 'not' / 'yet')])
    assert len(spaces) == 1 and spaces[0]['free_bytes'] > 0
    check = pf.decide_disk(dict(hub_model, path_exists=False), cache, True, (None, None), spaces, 0.001)
    assert check.status == pf.FAILED and 'zai-org/GLM-5-FP8 is not in the hub cache' in check.problems[0]
    local = md.model_of({'model-path': str(tmp_path / 'missing-model')}, '/')
    check = pf.decide_disk(dict(local, path_exists=False), cache, False, (None, None), spaces, 10 ** 9)
    assert check.status == pf.FAILED and len(check.problems) == 2 and 'only' in check.problems[1]
    qwen = md.model_of({'model-path': 'Qwen/Qwen3-0.6B'}, '/')
    check = pf.decide_disk(dict(qwen, path_exists=False), cache, True, md.cached_revision(cache, 'Qwen/Qwen3-0.6B'), spaces, 0.001)
    assert check.status == pf.OK and check.summary.endswith('GB free, model cached')


# ---- decisions and the line ----------------------------------------------------------------------------------------

def holder(pid, kind, gpus, unit=''):
    return gh.Holder(pid=pid, user='sglang', command='x', title='sglang::scheduler_TP0', unit=unit, kind=kind, reason='r',
                     devices=['/dev/nvidia%d' % g for g in gpus], gpus=gpus)


def test_gpu_decision_per_class():
    gpus = {0: '/dev/nvidia0', 1: '/dev/nvidia1'}
    own = holder(10, gh.OWN, [0], 'sglang.service')
    check, stop = pf.decide_gpus([own], gpus, cleanup=True, check_mode=False)
    assert (check.status, stop, check.summary) == (pf.OK, [], '2 GPUs, no other holder')
    check, stop = pf.decide_gpus([own], gpus, cleanup=True, check_mode=False, unit_stopped=True)
    assert check.status == pf.FAILED and 'after the unit was stopped' in check.problems[0]
    orphan = holder(11, gh.ORPHAN, [1])
    assert pf.decide_gpus([orphan], gpus, cleanup=True, check_mode=False)[0].status == pf.CLEANED
    assert pf.decide_gpus([orphan], gpus, cleanup=True, check_mode=True)[0].status == pf.WOULD_CLEAN
    assert pf.decide_gpus([orphan], gpus, cleanup=False, check_mode=False)[0].status == pf.FAILED
    # A foreign process on the shared control node only (another GPU's user) is reported, not failed.
    shared = gh.Holder(pid=12, user='alice', command='x', title='python3', unit='', kind=gh.FOREIGN, reason='r',
                       devices=['/dev/nvidiactl'], gpus=[])
    check, stop = pf.decide_gpus([shared, orphan], gpus, cleanup=True, check_mode=False)
    assert (check.status, stop) == (pf.CLEANED, [11])
    check, stop = pf.decide_gpus([holder(13, gh.FOREIGN, [0])], gpus, cleanup=True, check_mode=False)
    assert check.status == pf.FAILED and stop == []
    assert check.problems[0].startswith('GPU 0 is held by pid 13 sglang::scheduler_TP0 (user sglang): r.')


def test_summary_line_and_failure_message():
    checks = [pf.Check('gpus', pf.FAILED, '2 GPUs, 1 other holder', ['GPU 0 is held by pid 13.']),
              pf.Check('ports', pf.OK, '30000 free'), pf.Check('shm', pf.CLEANED, '3 leaked (2 semaphores)')]
    assert pf.summary_line(checks) == 'gpus failed (2 GPUs, 1 other holder), ports ok (30000 free), shm cleaned (3 leaked (2 semaphores))'
    assert pf.failure_message(checks, 'sglang.service') == ('pre-flight for sglang.service failed (gpus), nothing was started: '
                                                            'gpus: GPU 0 is held by pid 13.')
    assert pf.Check.from_json('gpus', checks[0].to_json()) == checks[0]
