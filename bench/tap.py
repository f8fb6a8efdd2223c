"""The replay tap as a process of its own, so its CPU can be measured apart from the harness:

    python -m bench.tap CORPUS TARGET --summary FILE [--cadence-s S] [--chunk-bytes N]

Appends CORPUS into TARGET at the production line rates with ``local_time`` rewritten to the
moment of the append, then writes the replay summary as JSON to FILE.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from hyperdata_sidecar.tools.replay import replay


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tap")
    parser.add_argument("corpus", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--summary", type=Path, required=True)
    parser.add_argument("--cadence-s", type=float, default=0.1)
    parser.add_argument("--chunk-bytes", type=int, default=64 * 1024)
    args = parser.parse_args(argv)
    summary = asyncio.run(
        replay(
            args.corpus,
            args.target,
            chunk_bytes=args.chunk_bytes,
            cadence_s=args.cadence_s,
            rewrite_local_time=True,
            progress=False,
        )
    )
    args.summary.write_text(json.dumps(summary.to_dict()))


if __name__ == "__main__":
    main()
