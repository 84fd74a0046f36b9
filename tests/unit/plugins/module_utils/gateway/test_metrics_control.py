# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the gateway and SGLang say, read from their recorded answers (tests/fixtures/gateway/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.gateway import _metrics as metrics
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import (
    ControlPlane, ControlPlaneError, GatewayWorker, parse_workers, same_url)

FIXTURES = Path(__file__).resolve().parents[5] / 'tests' / 'fixtures' / 'gateway'


def fixture(name):
    return (FIXTURES / name).read_text(encoding='utf-8')


def test_sglang_metrics_give_running_and_waiting_requests():
    load = metrics.load_from_metrics(fixture('sglang-metrics-docs.txt'))
    assert (load.running, load.queued, load.busy) == (162, 2826, 2988)
    assert metrics.finished_requests(fixture('sglang-metrics-docs.txt')) is None  # that excerpt has no counter


def test_metrics_sum_every_series_and_skip_comments_and_junk():
    text = ('# HELP sglang:num_running_reqs x\n'
            'sglang:num_running_reqs{model_name="m",dp_rank="0"} 2.0\n'
            'sglang:num_running_reqs{model_name="m",dp_rank="1"} 3\n'
            'sglang:num_queue_reqs{model_name="m"} 1 1700000000000\n'
            'sglang:num_requests_total{model_name="a\\"b"} 7.0\n'
            'broken line\n'
            'sglang:num_running_reqs{} NaNx\n')
    assert metrics.load_from_metrics(text) == metrics.Load(5, 1)
    assert metrics.finished_requests(text) == 7.0
    assert metrics.load_from_metrics('# no sglang here\nprocess_cpu_seconds_total 3\n') is None


def test_get_load_answers_of_sglang_0_5():
    # scheduler_metrics_mixin.get_load: num_reqs = running + waiting, one entry per DP rank
    body = json.dumps([{'dp_rank': 0, 'num_reqs': 5, 'num_waiting_reqs': 2, 'num_tokens': 900, 'ts_tic': 1.0},
                       {'dp_rank': 1, 'num_reqs': 1, 'num_waiting_reqs': 0, 'num_tokens': 10, 'ts_tic': 1.0}])
    assert metrics.load_from_get_load(body) == metrics.Load(4, 2)
    assert metrics.load_from_get_load('{"num_reqs": 0, "num_waiting_reqs": 0}') == metrics.Load(0, 0)
    assert metrics.load_from_get_load('not json') is None
    assert metrics.load_from_get_load('[{"num_reqs": "many"}]') is None


def test_gateway_metrics_give_the_circuit_state_per_worker():
    states = metrics.circuits(fixture('smg-1.13.0-metrics.txt'))
    assert states == {'http://127.0.0.1:31001': 'closed', 'http://127.0.0.1:31002': 'closed'}
    assert metrics.circuits('smg_worker_cb_state{worker="http://a:1"} 1\nsmg_worker_cb_state{worker="http://b:1"} 2\n') == {
        'http://a:1': 'open', 'http://b:1': 'half_open'}


def test_worker_list_of_the_real_gateway():
    workers = parse_workers(json.loads(fixture('smg-1.13.0-workers.json')))
    assert [(w.url, w.status, w.healthy, w.in_rotation, w.version, w.worker_type) for w in workers] == [
        ('http://127.0.0.1:31001', 'ready', True, True, '0.5.16', 'regular'),
        ('http://127.0.0.1:31002', 'ready', True, True, '0.5.16', 'regular')]
    not_ready = parse_workers(json.loads(fixture('smg-1.13.0-workers-not-ready.json')))
    assert [(w.state, w.in_rotation) for w in not_ready] == [('ready', True), ('not ready', False)]
    draining = parse_workers(json.loads(fixture('smg-1.13.0-workers-draining.json')))
    assert [(w.state, w.load, w.in_rotation) for w in draining] == [('draining', 1, False), ('ready', 0, True)]


def test_an_open_circuit_takes_a_ready_worker_out_of_rotation():
    worker = GatewayWorker(url='http://a:1', status='ready', healthy=True, circuit='open')
    assert (worker.in_rotation, worker.state) == (False, 'circuit open')
    assert worker.to_json()['state'] == 'circuit open'


def test_urls_compare_without_case_of_host_and_trailing_slash():
    assert same_url('HTTP://Node1:30000/', 'http://node1:30000')
    assert not same_url('http://node1:30000', 'http://node1:30001')


class Recorder:
    """A control-plane transport that answers from a table and records the calls."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, method, url, body=None, key=None, timeout=10.0, validate_certs=True, accept=None):
        self.calls.append((method, url, body, key))
        return self.answers[(method, url.split('://', 1)[1].split('/', 1)[1] if '/' in url.split('://', 1)[1] else '')]


def test_control_plane_errors_say_what_to_do():
    for answer, kind in (((404, 'Not Found', None), 'no_api'), ((401, 'Missing or invalid Authorization header', None), 'unauthorized'),
                         ((None, '', 'refused: [Errno 111] Connection refused'), 'unreachable'),
                         ((200, '{"not": "workers"}', None), 'bad_answer')):
        plane = ControlPlane('http://127.0.0.1:30080', 'k', call=Recorder({('GET', 'workers'): answer}))
        with pytest.raises(ControlPlaneError) as err:
            plane.workers()
        assert err.value.kind == kind
    plane = ControlPlane('http://127.0.0.1:30080', 'k', call=Recorder({('GET', 'workers'): (404, '', None)}))
    with pytest.raises(ControlPlaneError, match='no control-plane worker API'):
        plane.workers()


def test_control_plane_adds_removes_and_reads_circuits():
    answers = {('GET', 'workers'): (200, fixture('smg-1.13.0-workers.json'), None),
               ('GET', 'metrics'): (200, 'smg_worker_cb_state{worker="http://127.0.0.1:31002"} 1\n', None),
               ('POST', 'workers'): (409, '{"error": "exists"}', None),
               ('DELETE', 'workers/abc'): (404, '', None)}
    rec = Recorder(answers)
    plane = ControlPlane('http://127.0.0.1:30080', 'admin', metrics_url='http://127.0.0.1:29000/metrics', call=rec)
    workers = plane.workers()
    assert [(w.url, w.circuit, w.in_rotation) for w in workers] == [
        ('http://127.0.0.1:31001', None, True), ('http://127.0.0.1:31002', 'open', False)]
    assert plane.add({'url': 'http://x:1'}) == {'error': 'exists'}  # already there: fine
    assert plane.remove('abc') == {}  # already gone: fine
    assert [c[3] for c in rec.calls if c[1].startswith('http://127.0.0.1:30080')] == ['admin'] * 3
