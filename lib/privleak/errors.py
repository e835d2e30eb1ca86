"""One exception type for bad input: its message is the single line the user sees."""


class PrivleakError(ValueError):
    """Bad param, file or model. The message names the culprit and what is allowed."""


def require(condition: bool, message: str) -> None:
    """Raise PrivleakError(message) unless condition holds."""
    if not condition:
        raise PrivleakError(message)
