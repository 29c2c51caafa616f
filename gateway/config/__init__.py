"""Configuration: strict YAML schema (model), loading and normalization (load)."""

from gateway.config.load import ConfigError, Settings, json_schema, load_config, parse_config

__all__ = ["ConfigError", "Settings", "json_schema", "load_config", "parse_config"]
