"""The ground floor: errors, the option registry and config loading, logging, findings, safe file
creation, disk, accelerator and RNG helpers. Imports nothing else of the framework."""
