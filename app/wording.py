"""How things are said to the user: counts ("1 translation", "2 translations", never "1
translations") and failures (one line each)."""


def counted(count: int, noun: str) -> str:
    """`count` and the noun, singular for 1."""
    return f"{count} {noun if count == 1 else noun + 's'}"


def one_line(error: BaseException) -> str:
    """An error as one line for the user: its message's first line, else its type's name (a bare
    `MemoryError()` says nothing else)."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
