"""The compact-core bake-off: candidate representations behind one interface (core_api), one harness (run)."""
