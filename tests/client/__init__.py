"""Tests of the client library: decoding, folding, following the deltas."""
