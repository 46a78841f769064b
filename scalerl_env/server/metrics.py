"""Prometheus metrics of the reward server, in a registry owned by one app (several apps can coexist).

Exposed names (no per-prompt or per-item labels, so cardinality is fixed):
- `scalerl_verdicts_total{domain,status}`            counter of verdicts returned
- `scalerl_item_verify_seconds{domain}`              histogram of each verdict's `elapsed_s`
- `scalerl_request_seconds{route}`                   histogram of request latency, admission to answer
- `scalerl_items_in_flight`                          gauge of admitted, unanswered items
- `scalerl_requests_rejected_total{reason}`          counter: overloaded, too_large, bad_encoding, ...
- `scalerl_ledger_records_total`                     counter of verdicts committed to the ledger
- `scalerl_sandbox_kills_total{reason}`              counter read from the verifier pool at scrape time
- `scalerl_verifier_worker_kills_total{domain,reason}` same, for the verifier worker processes
- `scalerl_build_info{version,python}`               always 1
"""

from __future__ import annotations

import bisect
import itertools
import platform
import threading
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString
from scalerl.env.contracts.domains import domain_names
from scalerl.env.contracts.records import Status

LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class ServerMetrics:
    def __init__(self, info: Callable[[], dict[str, Any]], version: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.items = _ItemStats()
        r.register(self.items)
        self.request_seconds = Histogram("scalerl_request_seconds", "Request latency", ["route"],
                                         buckets=LATENCY_BUCKETS_S, registry=r)
        self.in_flight = Gauge("scalerl_items_in_flight", "Items admitted and not yet answered", registry=r)
        self.rejected = Counter("scalerl_requests_rejected", "Requests refused", ["reason"], registry=r)
        self.ledger_records = Counter("scalerl_ledger_records", "Verdicts committed to the ledger", registry=r)
        self.build = Gauge("scalerl_build_info", "Build information", ["version", "python"], registry=r)
        self.build.labels(version=version, python=platform.python_version()).set(1)
        r.register(_PoolCollector(info))

    def observe(self, domains: Iterable[str], verdicts: Iterable[Any]) -> None:
        """Count a request's verdicts and their verifier times (see `_ItemStats`)."""
        self.items.observe(domains, verdicts)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _ItemStats(Collector):
    """`scalerl_verdicts_total{domain,status}` and `scalerl_item_verify_seconds{domain}` as plain counts under
    one lock, exposed at scrape time: this runs on the event loop for every request, and prometheus_client's
    labelled Counter and Histogram (a lock and a label lookup per item) took about 22 µs of CPU per
    16-item request (the largest single item of the app's own time in the bench_server profile); this
    takes about 10. Every (domain, status) series exists from the start, so rates are defined before the
    first item."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        names = domain_names()
        self.verdicts = {(domain, status.value): 0 for domain in names for status in Status}
        self.buckets = {domain: [0] * (len(LATENCY_BUCKETS_S) + 1) for domain in names}  # last: +Inf
        self.seconds = dict.fromkeys(names, 0.0)

    def describe(self) -> list:
        return []  # collected on demand, like the pool's counters

    def observe(self, domains: Iterable[str], verdicts: Iterable[Any]) -> None:
        seen = [(domain, v.status.value, max(0.0, v.elapsed_s)) for domain, v in zip(domains, verdicts)]
        with self.lock:
            for domain, status, seconds in seen:
                self.verdicts[domain, status] += 1
                self.buckets[domain][bisect.bisect_left(LATENCY_BUCKETS_S, seconds)] += 1  # le is inclusive
                self.seconds[domain] += seconds

    def collect(self) -> Iterable:
        with self.lock:
            verdicts, seconds = dict(self.verdicts), dict(self.seconds)
            buckets = {domain: list(counts) for domain, counts in self.buckets.items()}
        counter = CounterMetricFamily("scalerl_verdicts", "Verdicts returned", labels=["domain", "status"])
        for (domain, status), n in verdicts.items():
            counter.add_metric([domain, status], n)
        histogram = HistogramMetricFamily("scalerl_item_verify_seconds", "Verifier time per item", labels=["domain"])
        bounds = [floatToGoString(b) for b in LATENCY_BUCKETS_S] + ["+Inf"]
        for domain, counts in buckets.items():
            histogram.add_metric([domain], list(zip(bounds, itertools.accumulate(counts))), sum_value=seconds[domain])
        return [counter, histogram]


class _PoolCollector(Collector):
    """Turns the verifier pool's `info()` into kill counters at scrape time (the pool owns the counts)."""

    def __init__(self, info: Callable[[], dict[str, Any]]) -> None:
        self.info = info

    def describe(self) -> list:
        return []  # dynamic: nothing to check at registration

    def collect(self) -> Iterable:
        try:
            info = self.info() or {}
        except Exception:  # a scrape must never fail because the pool is starting or closing
            info = {}
        kills = CounterMetricFamily("scalerl_verifier_kills", "Verifier runs killed (math workers, sandboxed "
                                    "programs), by domain and reason", labels=["domain", "reason"])
        for (domain, reason), count in sorted(verifier_kills(info).items()):
            kills.add_metric([domain, reason], count)
        alive = GaugeMetricFamily("scalerl_verifier_workers", "Verifier worker processes alive", labels=["domain"])
        for domain, count in sorted(workers_alive(info).items()):
            alive.add_metric([domain], count)
        return [kills, alive]


def verifier_kills(info: dict[str, Any]) -> dict[tuple[str, str], float]:
    """(domain, reason) -> count from each domain verifier's `info()["kills"]` (DomainVerifier)."""
    out = {}
    for domain in domain_names():
        part = info.get(domain) if isinstance(info.get(domain), dict) else {}
        out.update({(domain, reason): count for reason, count in _numbers(part.get("kills") or {}).items()})
    return out


def workers_alive(info: dict[str, Any]) -> dict[str, float]:
    out = {}
    for domain in domain_names():
        part = info.get(domain)
        alive = part.get("alive") if isinstance(part, dict) else None
        if isinstance(alive, (int, float)) and not isinstance(alive, bool):
            out[domain] = float(alive)
    return out


def _numbers(mapping: Any) -> dict[str, float]:
    if not isinstance(mapping, dict):
        return {}
    return {str(k): float(v) for k, v in mapping.items() if isinstance(v, (int, float))}
