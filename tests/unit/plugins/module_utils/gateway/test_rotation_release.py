# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A rotation step against a control plane that behaves like the recorded gateway, the release's capability read from
its files, and the gateway launcher's words."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.gateway._control import GatewayWorker
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._reconcile import Wanted
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._release import capabilities, locate
from ansible_collections.llmops.sglang.plugins.module_utils.gateway._rotation import Refused, Rotation

REPO = Path(__file__).resolve().parents[5]
A, B = 'http://10.0.0.11:30000', 'http://10.0.0.12:30000'


class FakePlane:
    """The gateway's registry as smg keeps it: a removed worker is draining at once; an added one is pending, then ready
    at the next read (registration runs in the background)."""

    def __init__(self, workers):
        self.registry = dict((w.url, w) for w in workers)
        self.calls = []

    def workers(self):
        for worker in self.registry.values():
            if worker.status == 'pending':
                worker.status, worker.healthy = 'ready', True
                break
        return [GatewayWorker(**vars(w)) for w in self.registry.values()]

    def remove(self, worker_id):
        self.calls.append(('remove', worker_id))
        for worker in self.registry.values():
            if worker.id == worker_id:
                worker.status = 'draining'

    def add(self, body):
        self.calls.append(('add', body['url']))
        self.registry[body['url']] = GatewayWorker(url=body['url'], id='new', status='pending')


def ready(url, ident):
    return GatewayWorker(url=url, id=ident, status='ready', healthy=True)


def test_out_then_in_as_the_gateway_reports_it(clock):
    plane = FakePlane([ready(A, 'a'), ready(B, 'b')])
    rotation = Rotation(plane, 0.5, clock, clock.sleep)
    out = rotation.step([Wanted(A)], 'absent', 30, min_in_service=1)
    assert (out.verdict.done, [w.url for w in out.changes.remove], plane.calls) == (True, [A], [('remove', 'a')])
    del plane.registry[A]  # dropped after drain_settle_secs
    back = rotation.step([Wanted(A)], 'present', 30, worker_api_key='k')
    assert back.verdict.done and plane.calls[-1] == ('add', A)
    assert [w.url for w in back.workers if w.in_rotation] == [B, A]


def test_a_removal_below_min_in_service_is_refused_before_any_call():
    plane = FakePlane([ready(A, 'a'), GatewayWorker(url=B, id='b', status='not_ready')])
    with pytest.raises(Refused, match=r'1 worker\(s\)|0 worker\(s\) would stay in rotation'):
        Rotation(plane).step([Wanted(A)], 'absent', 30, min_in_service=1)
    assert plane.calls == []


def test_a_worker_that_does_not_come_back_ends_the_wait_at_its_bound(clock):
    plane = FakePlane([ready(B, 'b')])
    plane.add = lambda body: plane.calls.append(('add', body['url']))  # accepted, never registered
    step = Rotation(plane, 1.0, clock, clock.sleep).step([Wanted(A)], 'present', 5)
    assert (step.verdict.done, step.verdict.waiting, step.waited) == (False, {A: 'not registered'}, 5.0)


def test_the_wait_reads_the_gateway_at_its_own_interval(clock):
    # the gateway registers a worker in the background: here it reports it at the third read after the POST; the wait
    # ends at that read, 0.2 s after the first with a 0.1 s interval (the module's poll_interval), not 2 s
    plane = FakePlane([ready(B, 'b')])
    reads = []
    workers = plane.workers

    def slow():
        reads.append(clock())
        return workers() if len(reads) >= 4 else [w for w in workers() if w.url != A]

    plane.workers = slow
    back = Rotation(plane, 0.1, clock, clock.sleep).step([Wanted(A)], 'present', 30)
    assert back.verdict.done and back.waited == pytest.approx(0.2)
    assert len(reads) == 4  # the read before the POST, then three


def test_the_control_plane_capability_is_read_from_the_release_s_own_files(tmp_path):
    assert capabilities('p.add_argument("--control-plane-api-keys")  # control_plane_api_keys') == {'control_plane': True}
    assert capabilities('p.add_argument("--api-key")') == {'control_plane': False}
    site = tmp_path / 'lib' / 'python3.11' / 'site-packages'
    (site / 'sglang_router').mkdir(parents=True)
    (site / 'sglang_router' / 'router_args.py').write_text('api_key: str = None\n')
    (site / 'sglang_router-0.3.0.dist-info').mkdir()
    (site / 'sglang_router-0.3.0.dist-info' / 'METADATA').write_text('Metadata-Version: 2.4\nName: sglang-router\nVersion: 0.3.0\n\nbody\n')
    release = locate(str(tmp_path), 'sglang-router')
    assert (release.version, release.control_plane, release.launch_module) == ('0.3.0', False, 'sglang_router.launch_router')
    assert locate(str(tmp_path), 'smg') is None


def launcher():
    spec = importlib.util.spec_from_file_location('gateway_launch', REPO / 'roles' / 'sglang_gateway' / 'files' / 'gateway_launch.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_launcher_turns_the_workers_file_and_the_credential_into_smg_launch_words(tmp_path):
    gl = launcher()
    assert gl.worker_words({'mode': 'regular', 'workers': [{'url': A}, {'url': B}]}) == ['--worker-urls', A, B]
    assert gl.worker_words({'mode': 'regular', 'workers': []}) == []
    assert gl.worker_words({'mode': 'pd', 'workers': [
        {'url': A, 'worker_type': 'prefill', 'bootstrap_port': 8998}, {'url': B, 'worker_type': 'decode'}]}) == [
        '--pd-disaggregation', '--prefill', A, '8998', '--decode', B]
    # the unit's --mode wins over the file's: a switch between regular and PD mode is on the unit's command line
    pd = {'mode': 'regular', 'workers': [{'url': A, 'worker_type': 'prefill'}, {'url': B, 'worker_type': 'decode'}]}
    assert gl.worker_words(pd, 'pd') == ['--pd-disaggregation', '--prefill', A, '--decode', B]
    assert gl.worker_words(dict(pd, mode='pd'), None)[0] == '--pd-disaggregation'
    secrets = tmp_path / 'secrets.json'
    secrets.write_text(json.dumps({'api_key': 'sk-1', 'control_plane_api_keys': ['ops:llmops.sglang:admin:k']}))
    assert gl.secret_words(str(secrets)) == ['--api-key', 'sk-1', '--control-plane-api-keys', 'ops:llmops.sglang:admin:k']
    assert gl.split(['--launch-module', 'smg.launch_router', '--workers-file', 'w', '--mode', 'pd', '--', '--port', '1']) == (
        {'--launch-module': 'smg.launch_router', '--workers-file': 'w', '--mode': 'pd'}, ['--port', '1'])


def test_a_worker_put_back_while_still_draining_is_registered_once_the_gateway_dropped_it(clock):
    """A change shorter than the gateway's drain_settle_secs (a failed drain, an unchanged server): the removed entry is
    still there, draining; registering its URL then would be refused (409) and the entry would vanish afterwards."""
    plane = FakePlane([ready(A, 'a'), ready(B, 'b')])
    rotation = Rotation(plane, 0.5, clock, clock.sleep)
    rotation.step([Wanted(A)], 'absent', 30)
    reads = []
    workers = plane.workers

    def settling():
        reads.append(clock.now)
        if len(reads) == 3:
            del plane.registry[A]  # the settle time is over
        return workers()

    plane.workers = settling
    back = rotation.step([Wanted(A)], 'present', 30)
    assert back.verdict.done and [w.url for w in back.changes.add] == [A]
    assert plane.calls[-1] == ('add', A) and len(reads) >= 3


def test_then_out_takes_the_next_workers_out_and_drains_them_and_keeps_a_refusal_in_its_result(clock, monkeypatch):
    from ansible_collections.llmops.sglang.plugins.module_utils.gateway._drain import DrainResult
    from ansible_collections.llmops.sglang.plugins.modules import sglang_gateway_rotation as module

    drained = []

    def drain_all(urls, settings, source, api_key=None):
        drained.append((urls, settings.interval, settings.idle_spacing))
        return dict((u, DrainResult('idle', 0.6, 1, 1, 0, 'nothing in flight in 2 readings in a row')) for u in urls)

    monkeypatch.setattr(module, 'drain_all', drain_all)
    p = dict(min_in_service=1, drain=True, drain_timeout=30.0, drain_policy='fail', drain_interval=0.1, drain_max_wait=3600.0,
             drain_idle_spacing=0.25, drain_source='auto', worker_api_key=None)
    plane = FakePlane([ready(A, 'a'), ready(B, 'b')])
    res = module.then_take_out(p, Rotation(plane, 0.1, clock, clock.sleep), [Wanted(B)])
    assert (res['ok'], res['changed'], res['removed'], plane.calls) == (True, True, [B], [('remove', 'b')])
    assert res['drains'][0]['outcome'] == 'idle' and res['msg'].startswith('out of rotation and drained: ' + B)
    assert drained == [([B], 0.1, 0.25)]
    # the last worker in rotation: refused before any call, in the result (the next batch then stops the roll)
    plane = FakePlane([ready(B, 'b')])
    res = module.then_take_out(p, Rotation(plane, 0.1, clock, clock.sleep), [Wanted(B)])
    assert (res['ok'], res['removed'], res['drains'], plane.calls) == (False, [], [], [])
    assert 'min_in_service=1' in res['msg']


def test_a_removal_that_leaves_the_drain_to_the_change_reads_each_server_once(clock):
    """drain=false (llmops.sglang.roll): out of rotation and confirmed, one real reading of each server's /metrics (a
    server that refuses the connection has nothing in flight), no drain."""
    import http.server
    import socket
    import threading

    from ansible_collections.llmops.sglang.plugins.modules import sglang_gateway_rotation as module

    class Metrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            body = b'sglang:num_running_reqs{model_name="m"} 3.0\nsglang:num_queue_reqs{model_name="m"} 1.0\n'
            self.send_response(200 if self.path == '/metrics' else 404)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    closed = socket.socket()
    closed.bind(('127.0.0.1', 0))
    busy, gone = 'http://127.0.0.1:%d' % server.server_address[1], 'http://127.0.0.1:%d' % closed.getsockname()[1]
    closed.close()
    try:
        plane = FakePlane([ready(busy, 'a'), ready(gone, 'b'), ready(B, 'c')])
        p = dict(min_in_service=1, drain=False, drain_policy='proceed', drain_source='auto', worker_api_key=None)
        out = module.empty_result()
        problem = module.take_out(p, Rotation(plane, 0.1, clock, clock.sleep), [Wanted(busy), Wanted(gone)], out)
    finally:
        server.shutdown()
    assert problem == '' and out['removed'] == [busy, gone]
    assert [(d['url'], d['outcome'], d['in_flight_at_start'], d['policy']) for d in out['drains']] == [
        (busy, 'left', 4, 'proceed'), (gone, 'left', 0, 'proceed')]
    assert module.out_message(out['drains']) == 'out of rotation, its change drains it: %s 4 in flight; %s 0 in flight' % (busy, gone)
