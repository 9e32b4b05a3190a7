#!/bin/bash
# The hot-prefix relief sweep of 2026-11-30 (docs/benchmarks/ab.md, "Relief for hot prefixes"): kv_aware only, the
# rho 0.9 suite of the decode-weight sweep (seeds 1-3), and its RAG specs on seeds 1 and 4-7. Run from the
# repository root after `mvn -q -B -ntp -pl dist -am package -DskipTests`; writes to $OUT (default
# /tmp/hot-prefix-relief). sweep.json here holds every run's kv_aware figures, including two prototypes that are
# not in the code (the relief counted from zero heat, min(1, heat x owners), at 1 and 0.5: variants hr1, hr0.5).
# The other variants ran with the relief off, the default before this sweep.
set -euo pipefail
export OUT=${OUT:-/tmp/hot-prefix-relief}
export TAGS=${TAGS:-"d0:hot_prefix_relief=0 hx1:hot_prefix_relief=1 hx05:hot_prefix_relief=0.5 \
d05:hot_prefix_relief=0,overlap_credit_decay=0.5 d1:hot_prefix_relief=0,overlap_credit_decay=1 \
d2:hot_prefix_relief=0,overlap_credit_decay=2 n05:hot_prefix_relief=0,new_prefill_weight=0.5 \
n025:hot_prefix_relief=0,new_prefill_weight=0.25"}
export EXTRA_SEEDS=${EXTRA_SEEDS:-"1 4 5 6 7"}
exec bash "$(dirname "$0")/../decode-weight-sweep/run.sh"
