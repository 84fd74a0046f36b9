# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The SGLang model gateway (``smg``, earlier ``sglang-router``) in front of several SGLang servers, and changes of such
a fleet that drop no request.

What this package owns, one job a file:

* ``_metrics``: Prometheus text exposition (what SGLang's and the gateway's ``/metrics`` answer) and the figures the
  rest reads from it: a server's in-flight requests (``sglang:num_running_reqs`` + ``sglang:num_queue_reqs``, or
  ``/get_load``), its finished-request counter, the gateway's circuit-breaker state per worker.
* ``_control``: the gateway's control plane, its worker API (``GET/POST /workers``, ``DELETE /workers/{id}``), and
  what the gateway says about each worker (``GatewayWorker``).
* ``_reconcile``: which workers to add or remove so the gateway holds the wanted set, and whether it reports them
  the way the caller waits for (pure).
* ``_drain``: the drain of one server: readings of its own load, the decision after each (idle twice, or the policy
  past ``drain_timeout``) (pure decide, small observe).
* ``_route``: the proof that the gateway routes to a worker: requests through the gateway until the worker's own
  counter of finished requests moves.
* ``_release``: which gateway release is installed in a venv and whether it has the control-plane API.
* ``_roll``: the rolling change on the controller: the workers the inventory names, batches (canary first),
  ``min_in_service``, prefill/decode pairs and versions, the refusal of bad input, the outcome of a batch (pure).

Private module_utils: what runs on hosts is Python 3.9+ and the standard library only.
"""
