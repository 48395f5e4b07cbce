"""replimon: live safety and liveness monitoring for replicated database groups."""
__version__ = "0.1.0"
