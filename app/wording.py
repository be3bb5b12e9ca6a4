"""How counts are said to the user: "1 translation", "2 translations", never "1 translations"."""


def counted(count: int, noun: str) -> str:
    """`count` and the noun, singular for 1."""
    return f"{count} {noun if count == 1 else noun + 's'}"
