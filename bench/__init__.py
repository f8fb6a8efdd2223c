"""The benchmark harness: ``python -m bench`` (what ``make bench`` runs through ``scripts/bench.sh``).

Scenarios, one module each: :mod:`bench.catchup` (a pre-written backlog from empty state),
:mod:`bench.reference` (the same backlog pushed by kcat, the ceiling of this machine),
:mod:`bench.live` (the replay tap at production rates, append-to-receive latency),
:mod:`bench.seal` (finalization and rotation to the seal record), :mod:`bench.stages`
(per-line cost of each stage of the hot path, no broker) and :mod:`bench.compression` (codecs and
levels on the native engine). The catch-up and live scenarios run once per line engine
(:mod:`bench.engines`). Results go to ``var/bench/*.json`` and
a table appended to ``docs/benchmarks.md``; targets are reported as met or missed, never asserted.
"""
