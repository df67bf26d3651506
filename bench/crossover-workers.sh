#!/usr/bin/env bash
# Crossover for the cost of the worker machinery: one proxy with `--workers A` and one with
# `--workers B` (default 1 and 2) at the same time on one core, each driven as fast as it answers
# (bench/crossover-rate.sh --rate 0; see there for the method). For the same offered load, run
# bench/crossover-rate.sh --workers A,B '{}' '{}' instead.
# Run from the project root: bench/crossover-workers.sh [A=1] [B=2] [windows=6] [secs=10] [conns=8]
exec "$(dirname "$0")/crossover-rate.sh" --rate 0 --workers "${1:-1},${2:-2}" --windows "${3:-6}" --secs "${4:-10}" --conns "${5:-8}" '{}' '{}'
