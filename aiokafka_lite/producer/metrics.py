"""Producer counters, reported by ``Producer.metrics()`` as a plain dict.

Counting is kept to a few integer additions per request or batch (never per record on
the ``send()`` path) so it costs nothing measurable.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["ProducerMetrics"]


class ProducerMetrics:
    """Cumulative counters since the producer started."""

    __slots__ = (
        "_acked_data_lost",
        "_batches_completed",
        "_batches_sent",
        "_bytes_sent",
        "_duplicates",
        "_latency_count",
        "_latency_max",
        "_latency_total",
        "_records_completed",
        "_records_failed",
        "_records_retried",
        "_requests_sent",
        "_started",
    )

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._requests_sent = 0
        self._batches_sent = 0
        self._bytes_sent = 0
        self._batches_completed = 0
        self._records_completed = 0
        self._records_failed = 0
        self._records_retried = 0
        self._duplicates = 0
        self._acked_data_lost = 0
        self._latency_total = 0.0
        self._latency_max = 0.0
        self._latency_count = 0

    def request_sent(self, batches: int, nbytes: int) -> None:
        self._requests_sent += 1
        self._batches_sent += batches
        self._bytes_sent += nbytes

    def request_latency(self, seconds: float) -> None:
        self._latency_total += seconds
        self._latency_count += 1
        if seconds > self._latency_max:
            self._latency_max = seconds

    def batch_completed(self, records: int) -> None:
        self._batches_completed += 1
        self._records_completed += records

    def retried(self, records: int) -> None:
        self._records_retried += records

    def duplicate(self) -> None:
        self._duplicates += 1

    def acknowledged_data_lost(self) -> None:
        self._acked_data_lost += 1

    def failed(self, records: int) -> None:
        self._records_failed += records

    def snapshot(self, **extra: Any) -> dict[str, Any]:
        """The counters, derived averages and the ``extra`` gauges as one dict."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        latency_avg = (
            self._latency_total / self._latency_count * 1000 if self._latency_count else 0.0
        )
        snapshot: dict[str, Any] = {
            "records_sent": self._records_completed,
            "records_failed": self._records_failed,
            "records_retried": self._records_retried,
            "duplicate_batches": self._duplicates,
            # Times a broker was found to have lost records it had acknowledged.
            "acknowledged_data_lost": self._acked_data_lost,
            "batches_sent": self._batches_sent,
            "requests_sent": self._requests_sent,
            "bytes_sent": self._bytes_sent,
            "batch_size_avg": self._bytes_sent / self._batches_sent if self._batches_sent else 0.0,
            "records_per_batch_avg": (
                self._records_completed / self._batches_completed
                if self._batches_completed
                else 0.0
            ),
            "request_latency_avg_ms": latency_avg,
            "request_latency_max_ms": self._latency_max * 1000,
            "record_send_rate": self._records_completed / elapsed,
            "uptime_s": elapsed,
        }
        snapshot.update(extra)
        return snapshot
