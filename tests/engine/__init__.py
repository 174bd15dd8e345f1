"""Tests of the engine: parsing, evaluation and every maintenance algorithm."""
