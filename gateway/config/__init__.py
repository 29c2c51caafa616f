"""Configuration: strict YAML schema (model), loading and normalization (load)."""
