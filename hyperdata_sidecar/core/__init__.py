"""Pure core of the sidecar: paths, lines, sequence, seals and partitions; no Kafka, Faust or file I/O."""
