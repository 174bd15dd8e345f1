"""Tests of the connectors: files, RDF and OWL, Kafka, the state stores."""
