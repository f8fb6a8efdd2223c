"""Tools around the sidecar: the fixture generator, the replay tap and the no-loss verifier.

They share no code path with the tailer beyond the pure helpers of ``hyperdata_sidecar.core``
that name tables, hour files and partitions, so that the verifier checks the tailer rather than
repeating it.
"""
