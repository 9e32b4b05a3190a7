#!/usr/bin/env bash
# ReplicaLinkBench, three rounds alternating the link before the sequence numbers (3cd8521, its bench given the
# I/O-thread CPU measurement of this one), with them, and with them and replicas.curve. Needs the two jars:
#   old: git worktree at 3cd8521 with this ReplicaLinkBench (curve lines removed), mvn -pl bench -am package
#   new: this tree, mvn -pl bench -am package
set -euo pipefail
OLD=${OLD:-/tmp/base-bench.jar}
NEW=${NEW:-/tmp/new-bench.jar}
OUT=$(dirname "$0")
# The curve runs in summary.json were run again after the ZAP handler stopped waking every 100 ms (its idle CPU), three
# in a row with the same command.
for i in 1 2 3; do
  java -cp "$OLD" dev.kvrouter.bench.replicas.ReplicaLinkBench --idle-seconds 10 --messages 2000 --out "$OUT/old-$i.json"
  java -cp "$NEW" dev.kvrouter.bench.replicas.ReplicaLinkBench --idle-seconds 10 --messages 2000 --out "$OUT/seq-$i.json"
  java -cp "$NEW" dev.kvrouter.bench.replicas.ReplicaLinkBench --idle-seconds 10 --messages 2000 --curve true \
    --out "$OUT/curve-$i.json"
done
