"""LoCoMo evaluation harness: scoring, statistics, runs, reports and comparisons."""
