"""The delay proxy in front of the project's Redis Cluster: round trips without netem.

This kernel may lack the netem qdisc, so a delay proxy (data_prep/delay_proxy.c) at
127.0.0.1:PORT+100+I adds the asked round trip, all of it to the client's requests
(Cluster(delay_legs="both"): half each way; the client sees the same round trip, but the proxy
then holds half a round trip of replies in this host's memory, which a real network keeps on the
wire). With a delay the nodes announce the proxies' ports, so a cluster client (CLUSTER SLOTS)
reaches every node through them; without one, the nodes' own ports.
"""
import re
import signal
import subprocess
from pathlib import Path

import toolchain
from data_prep.child_line import first_line
from data_prep.redis_cluster.servers import ClusterError, _read_pid_file, _write_pid_file


class ProxyMixin:
    """The delay proxy of a Cluster (data_prep.redis_cluster.cluster): its delays, start, build and memory."""
    READY_WITHIN_S = 30  # it only binds its ports and says "ready"; a busy 2-core host took well under 1 s
    DELAY_LEGS = {  # where the delay proxy puts an emulated round trip: (requests', replies') share
        "requests": (1.0, 0.0),  # the default: what a client host meets on a real network (delay_proxy.c)
        "both": (0.5, 0.5),      # half each way (until session 16 the only way)
    }

    def _proxy(self):
        return self._process(self.root / "proxy.pid", lambda p: p.cmdline()[:1] == [str(toolchain.DELAY_PROXY)])

    def proxy_pid(self):
        proc = self._proxy()
        return proc.pid if proc else None

    def proxy_source(self):
        """The source digest of the running proxy's build (the word after the pid in proxy.pid)."""
        try:
            return _read_pid_file(self.root / "proxy.pid")[2][0] if self.proxy_pid() else None
        except (OSError, ValueError, IndexError):
            return None

    def proxy_delays(self):
        """The running proxy's delays in ms, (requests', replies') (its first argument), or None
        when clients reach the nodes directly."""
        pid = self.proxy_pid()
        try:
            spec = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1].decode() if pid else None
        except (OSError, IndexError):
            return None
        if spec is None:
            return None
        requests, _, replies = spec.partition("/")
        try:
            return float(requests), float(replies or requests)
        except ValueError:
            return None

    def rtt_asked_ms(self):
        """The round trip the running proxy adds, or None: direct."""
        delays = self.proxy_delays()
        return None if delays is None else sum(delays)

    def delays_for(self, rtt_ms):
        """The proxy's (requests', replies') delays for a round trip, on this cluster's legs."""
        return None if rtt_ms is None else tuple(rtt_ms * share for share in self.DELAY_LEGS[self.delay_legs])

    def _reach(self, delays, timeout):
        """Clients of the running cluster reach it directly (None) or through the proxy at
        `delays` (requests', replies' in ms): the nodes announce the ports (CONFIG SET,
        gossiped in well under a second), the proxy is started, changed or stopped."""
        if delays == self.proxy_delays() and (delays is None or self.proxy_source() == toolchain.delay_proxy_source()):
            return  # kept only when it is today's build: records name the build their delay ran through
        announced = self.node_ports() if delays is None else self.proxy_ports()
        if delays is not None:
            self._start_proxy(delays)
        for c, port in zip(self.nodes(), announced):
            c.config_set("cluster-announce-port", port)
        self._wait_converged(announced, timeout)
        if delays is None:
            self._stop(self._proxy())

    def _start_proxy(self, delays):
        self._stop(self._proxy())
        maps = [f"{p}:{n}" for p, n in zip(self.proxy_ports(), self.node_ports())]
        log = self.root / "proxy.log"
        requests, replies = (f"{d:g}" for d in delays)
        spec = requests if requests == replies else f"{requests}/{replies}"  # one number: both ways, as any build reads it
        with open(log, "wb") as errors:  # not a pipe: nobody reads it while the proxy runs
            proc = subprocess.Popen([str(toolchain.delay_proxy()), spec] + maps, stdout=subprocess.PIPE,
                                    stderr=errors, start_new_session=True,
                                    preexec_fn=self._death_signal(signal.SIGKILL))
        line = first_line(proc, self.READY_WITHIN_S)
        if line != "ready":
            proc.kill()  # ours, just started: a proxy that did not say ready within the limit is stopped
            proc.wait()
            why = f"did not say ready within {self.READY_WITHIN_S} s" if line is None else "failed"
            raise ClusterError(f"delay proxy {why} (its log {log}): {log.read_text(errors='replace').strip()}")
        _write_pid_file(self.root / "proxy.pid", proc.pid, toolchain.delay_proxy_source())

    def proxy_peak_rss(self):
        try:
            status = Path(f"/proc/{self.proxy_pid()}/status").read_text()
            return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1)) * 1024
        except (OSError, AttributeError):
            return None

