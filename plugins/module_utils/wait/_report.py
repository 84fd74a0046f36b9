# Copyright (c) llmops.sglang contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The report step of llmops.sglang.wait_for_sglang: the module's result and its message (what was decided, why,
and what to try) from the classifier's verdict and the round's WaitState. Reads only; decides nothing.

Private module_utils: runs on the target host, Python 3.9+, standard library only.
"""

from __future__ import annotations

from ansible_collections.llmops.sglang.plugins.module_utils.log._classifier import is_exception_line
from ansible_collections.llmops.sglang.plugins.module_utils.wait._decide import HEALTH_ONLY_SECONDS, LOG_QUIET_SECONDS
from ansible_collections.llmops.sglang.plugins.module_utils.wait._observe import LOG_TIME_RE, display_line, log_seconds

CRASH_HINTS = {
    "cuda_oom": "try a lower --mem-fraction-static or --cuda-graph-max-bs (or a smaller --max-running-requests / "
                "--chunked-prefill-size), and check with nvidia-smi that no other process holds GPU memory",
    "cuda_error": "a CUDA runtime error: check nvidia-smi and the kernel log (dmesg) for Xid errors, rerun with "
                  "CUDA_LAUNCH_BLOCKING=1 to name the failing kernel, and check the driver with llmops.sglang.nvidia_driver_match",
    "nccl_error": "check the NCCL_* environment (NCCL_DEBUG=INFO for details, NCCL_P2P_DISABLE=1, NCCL_IB_DISABLE=1, "
                  "NCCL_SOCKET_IFNAME), that kernel module and user-space driver match (llmops.sglang.nvidia_driver_match), "
                  "and the network between the nodes",
    "import_error": "the venv lacks SGLang's dependencies or has mismatched versions: reinstall sglang with its extras "
                    "in the venv the service uses and check that the unit's ExecStart points at that venv",
    "arg_error": "a server argument or the model configuration was rejected before start: fix the flag or model path "
                 "named in the error line (see the server_args dump at the top of the log)",
    "driver_mismatch": "the NVIDIA kernel module and the user-space libraries differ: run llmops.sglang.nvidia_driver_match "
                       "(fix: true) or reboot into the installed driver",
    "unsupported_arch": "the kernels were not built for this GPU architecture: use a build for this SM (for SM120 see "
                        "llmops.sglang.sglang_patch_sm120) or another --attention-backend / --moe-runner-backend",
    "device_error": "an accelerator runtime error: check nvidia-smi / dmesg for Xid errors and the driver with "
                    "llmops.sglang.nvidia_driver_match; the error context names the failing operator",
    "warmup_failed": "the HTTP server came up but the warmup request failed: read the error context; start once with "
                     "--skip-server-warmup to isolate it and check the model's chat template and config",
    "sigquit_child": "a child process (scheduler, detokenizer) died first: its traceback is in the error context "
                     "or just before the sigquit line",
    "silent_exit": "the process was killed without a traceback: check the kernel log for the OOM killer "
                   "(journalctl -k | grep -i 'killed process'), MemoryMax= and TimeoutStartSec= of the unit",
    "traceback": "read the traceback in error_context; its last line names the root cause",
    "unit_failed": "the unit stopped without a log line that explains it: check 'systemctl status' and 'journalctl -u' "
                   "for the unit (ExecStart path, User=, EnvironmentFile=)",
    "post_ready_crash": "the server died after its ready line (within stable_for): a scheduler or detokenizer crash "
                        "under the first requests; read error_context and log_tail, and rerun once it is fixed (the "
                        "deployment record was not written, so the next run restarts it)",
    "process_exited": "the process exited without a log line that explains it: check its stdout/stderr and the kernel log",
}

STALL_HINTS = {
    "start": "hangs before any SGLang stage: check the model download (HF_HUB_OFFLINE, network, disk space) and the "
             "python environment",
    "init_distributed": "hangs at NCCL init: check driver match (llmops.sglang.nvidia_driver_match), NCCL_P2P_DISABLE=1, "
                        "and the firewall for --dist-init-addr (every node of a multi-node start must be started)",
    "load_weights": "hangs loading weights: check the model path and the throughput of its file system (NFS, HF download)",
    "kv_cache": "hangs allocating the KV cache: check with nvidia-smi for other processes on the GPUs",
    "cuda_graph": "hangs capturing CUDA graphs: try a lower --cuda-graph-max-bs or --disable-cuda-graph; on several GPUs "
                  "check NCCL_P2P_DISABLE=1 and the driver match",
    "http_listening": "the HTTP server is up but the warmup request never ran: check that nothing else answers on the port",
    "warmup": "hangs in the warmup request: the first generation does not finish; check SGLANG_HEALTH_CHECK_TIMEOUT and "
              "start once with --skip-server-warmup to isolate it",
    "ready": "no progress after the ready line",
}


def root_cause(context):
    """The last exception line of a traceback in `context` (list of str), or None."""
    for line in reversed(context or []):
        text = (display_line(line) or "").strip()
        if is_exception_line(text):
            return text
    return None


def short(text, limit=200):
    text = (display_line(text) or "").strip()
    return text if len(text) <= limit else text[:limit - 4] + " ..."


class Report:
    """Builds the result of a round: ``Report(params, state, source, tail).result(status, verdict, elapsed)``."""

    def __init__(self, params, state, source_kind, tail):
        self.p = params
        self.state = state
        self.kind = source_kind
        self.tail = tail
        self.cause = None

    def where(self, lineno):
        if self.kind == "file":
            w = "log %s" % self.p.log_path
            if lineno:
                off = self.state.log.run_offset or 0
                w += ", line %d" % lineno if not off else ", line %d after byte %d" % (lineno, off)
            return w
        if self.kind == "journal":
            w = "journal of %s, InvocationID %s" % (self.p.unit, self.state.log.journal_invocation or "?")
            return w + (", line %d" % lineno if lineno else "")
        return "no log watched"

    def stages(self, res):
        out = []
        first = self.state.log.first_log_time
        for st in res.get("stages") or []:
            t = st.get("time")
            m = LOG_TIME_RE.match(st.get("line") or "")
            if m and first is not None:
                log_elapsed = round(max(0.0, log_seconds(m) - first), 1)
            else:
                log_elapsed = 0.0 if st.get("stage") == "start" and first is not None else None
            out.append({"stage": st.get("stage"),
                        "elapsed": round(max(0.0, t - self.state.start), 1) if isinstance(t, (int, float)) else None,
                        "log_elapsed": log_elapsed,
                        "line": display_line(st.get("line"))})
        return out

    def signature(self, status, res):
        if status != "crashed":
            return None
        if res.get("post_ready_crash") and self.state.ready_at is not None:
            return "post_ready_crash"
        sig = res.get("signature")
        exited = self.state.exited
        if exited is not None and exited.by == "unit" and sig in (None, "process_exited"):
            return "unit_failed"
        return sig or "process_exited"

    def result(self, status, elapsed, classifier_result, log_offset_end):
        res = classifier_result
        crashed = status == "crashed"
        st = self.state
        out = {
            "status": status,
            "ready": status == "ready",
            "elapsed": round(elapsed, 1),
            # ready by /health alone: the log never printed its stages, but the server is at the ready stage
            "stage": "ready" if status == "ready" and st.ready_by == "health_only" else (res.get("stage") or "start"),
            "stages": self.stages(res),
            "signature": self.signature(status, res),
            "error_line": res.get("error_line") if crashed else None,
            "error_lineno": res.get("error_lineno") if crashed else None,
            "error_context": [display_line(x) for x in (res.get("error_context") or [])] if crashed else [],
            "log_tail": self.tail,
            "log_source": self.kind,
            "log_reset": st.log.reset,
            "unit": st.unit.props,
            "http": st.http.results,
            "models": st.http.models,
            "log_offset_end": log_offset_end,
            "progress": st.log.progress,
            "exited": st.exited.public() if st.exited is not None else None,
            "ready_elapsed": None if st.ready_at is None else round(st.ready_at - st.start, 1),
            "boot_id": st.boot_id,
        }
        if crashed and st.ready_at is not None and not out["error_line"]:
            out["error_line"] = res.get("post_ready_line")
        self.cause = res.get("root_cause") or root_cause(out["error_context"])
        # the run's table reads it from here: the controller need not load the classifier to find it again
        out["root_cause"] = self.cause if crashed else None
        out["msg"] = self.message(out, res.get("last_line"))
        return out

    # ------------------------------------------------------------------------------------------ messages
    def message(self, out, last_line):
        status = out["status"]
        if status == "ready":
            return self._ready(out)
        if status == "crashed":
            return self._crashed(out)
        if status in ("stalled", "timeout"):
            return self._not_ready(out, short(last_line or (self.tail or [None])[-1]))
        if status == "error":
            return self._error()
        if status == "rebooted":
            old, new = self.state.rebooted
            return ("SGLang on %s: the host rebooted during the wait (boot id %s -> %s) at stage %s after %.1fs; this is "
                    "not a crash of the server: rerun to wait for the start the unit made at boot (nothing is "
                    "restarted while it is starting or ready)" % (self.p.host, old, new, out["stage"], out["elapsed"]))
        return "SGLang on %s is still starting after %.1fs at stage %s" % (self.p.host, out["elapsed"], out["stage"])

    def _ready(self, out):
        msg = "SGLang on %s is ready after %.1fs" % (
            self.p.host, out["elapsed"] if out["ready_elapsed"] is None else out["ready_elapsed"])
        if out["ready_elapsed"] is not None:
            msg += " and stayed up for stable_for=%ss" % int(self.p.stable_for)
        if self.p.node_rank >= 1:
            msg += " (node rank %d: weights and KV cache done, schedulers up, process alive)" % self.p.node_rank
        if self.state.ready_by == "health_only":
            msg += (" (/health answered 200 for %ds but the log never printed the ready line: is the server started "
                    "with --log-level above info?)" % HEALTH_ONLY_SECONDS)
        if out["models"]:
            msg += "; serving %s" % ", ".join(out["models"])
        return msg

    def _crashed(self, out):
        sig = out["signature"]
        exited = self.state.exited
        if out["ready_elapsed"] is not None:
            msg = "SGLang on %s crashed %.1fs after ready (within stable_for=%ss) at stage %s: %s" % (
                self.p.host, out["elapsed"] - out["ready_elapsed"], int(self.p.stable_for), out["stage"], sig)
        else:
            msg = "SGLang on %s crashed after %.1fs at stage %s: %s" % (self.p.host, out["elapsed"], out["stage"], sig)
        if out["error_line"]:
            msg += ': "%s" (%s)' % (short(out["error_line"]), self.where(out["error_lineno"]))
        elif exited is not None:
            msg += " (%s; %s)" % (exited.reason, self.where(None))
        cause = self.cause
        if cause and cause != short(out["error_line"]):
            msg += '; root cause: "%s"' % short(cause)
        if exited is not None and out["error_line"]:
            msg += "; %s" % exited.reason
        if self.state.log_only_crash:
            msg += ("; no process was watched: the log went quiet for %ds after a traceback that ends the server, so "
                    "it was read as a crash from the log alone; pass pid (or unit) to see the process exit"
                    % LOG_QUIET_SECONDS)
        if sig in ("traceback", "sigquit_child") and out["error_context"] and not cause:
            # no exception line: the process died while writing its traceback
            return msg + ("; the traceback was cut short (no exception line after it): read the whole log from the "
                          "error line on (%s) and the kernel log for a kill" % self.where(out["error_lineno"]))
        return msg + "; " + CRASH_HINTS.get(sig, CRASH_HINTS["traceback"])

    def _silent(self):
        if self.kind is None or self.state.log.bytes_read:
            return ""
        if self.kind == "file":
            return ("; nothing was written to %s since the wait started (offset %s): check that the server logs "
                    "there (the unit's StandardOutput=/StandardError=) and that log_offset is where this run starts"
                    % (self.p.log_path, self.state.log.run_offset))
        return ("; the journal of %s has no line for InvocationID %s: check the unit's StandardOutput= and that the user "
                "running the task may read the journal" % (self.p.unit, self.state.log.journal_invocation))

    def _not_ready(self, out, last):
        host, stage, status = self.p.host, out["stage"], out["status"]
        last = 'last log line: "%s"' % last if last else "no log line yet"
        if status == "stalled":
            return ("SGLang on %s stalled at stage %s after %.1fs: no new log output and no state change for %ds "
                    "(%s; %s); %s; raise stall_timeout (sglang_service_stall_timeout in the sglang_service role) if "
                    "this stage is legitimately slow%s"
                    % (host, stage, out["elapsed"], self.p.stall_timeout, last, self.where(None),
                       STALL_HINTS.get(stage, ""), self._silent()))
        parts = ["last stage %s" % stage]
        u = self.state.unit.props
        if u and not u.get("error"):
            parts.append("unit %s is %s/%s" % (self.p.unit, u.get("ActiveState"), u.get("SubState")))
        h = (out["http"] or {}).get("health")
        if h:
            parts.append("%s -> %s" % (h["url"], h["status"] if h["status"] is not None else h["error"]))
        return ("SGLang on %s did not become ready within %ds: %s; %s (%s); raise timeout (sglang_service_wait_timeout "
                "in the sglang_service role) or read the log%s"
                % (host, self.p.timeout, ", ".join(parts), last, self.where(None), self._silent()))

    def _error(self):
        host, e = self.p.host, self.state.error
        if e.kind == "unit":
            return ("SGLang on %s: cannot watch unit %s: %s; check the unit name (systemctl list-units 'sglang*'), "
                    "or watch the server with pid and log_path when the host does not run systemd" % (host, e.unit, e.error))
        if e.kind == "log":
            return ("SGLang on %s: cannot read the log %s (%s); make it readable for the user running the task "
                    "(become: true) or check log_path" % (host, e.path, e.error))
        if e.kind == "auth":
            return ("SGLang on %s answers %s with HTTP %s: authentication problem, not waited out; pass api_key (the "
                    "server runs with --api-key) or check the key in the unit's EnvironmentFile" % (host, e.url, e.status))
        return ("SGLang on %s serves %s at %s, not served_model_name %r: another server may still hold the port, or "
                "--served-model-name differs; stop the old server or fix served_model_name"
                % (host, ", ".join(e.models or []) or "no model", e.url, self.p.served_model_name))
