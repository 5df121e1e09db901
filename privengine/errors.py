"""Error hierarchy of privengine. Every user-facing input error is a ConfigError."""


class PrivengineError(Exception):
    """Base class of privengine's own errors."""


class ConfigError(PrivengineError, ValueError):
    """A configuration value is out of its allowed range or of the wrong kind.

    The message names the field and what is allowed, e.g.
    "`epsilon` must be in [0.01, 100]; got -1".
    """

    def __init__(self, field: str, message: str):
        self.field, self.reason = field, message
        super().__init__(f"`{field}` {message}")


class UnknownMechanismError(ConfigError):
    """The mechanism name is not in the registry."""

    def __init__(self, name: str, known: list[str]):
        super().__init__("mechanism", f"must be one of {', '.join(known) or '(none registered)'}; got {name!r}")


class RunNotFoundError(PrivengineError, LookupError):
    """No run (or sweep) with this id is in the store."""

    def __init__(self, run_id: str, *, what: str = "run"):
        self.run_id = run_id
        super().__init__(f"no {what} with id {run_id!r} in the store")


class StoreError(PrivengineError):
    """The run store refused an operation (deleting a run that is still running, opening a newer schema)."""


class AmbiguousIdError(PrivengineError, LookupError):
    """An id prefix matches several stored runs or sweeps; the message lists them."""

    def __init__(self, prefix: str, matches: list[str]):
        self.prefix = prefix
        shown = ", ".join(matches[:8]) + (", ..." if len(matches) > 8 else "")
        super().__init__(f"id {prefix!r} is ambiguous: it starts {len(matches)} ids ({shown}); give more characters")


class DatasetNotFoundError(PrivengineError, FileNotFoundError):
    """A real dataset is not present under the data root; the message says where we looked."""


class DatasetCorruptError(PrivengineError, ValueError):
    """A dataset file under the data root is not in the format expected (bad header, truncated); the message names
    the file."""
