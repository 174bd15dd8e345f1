"""Helpers shared by the tests (servers, data, generators, the browser); no tests here."""
