"""Text that came from outside, made safe to print: control characters escaped, lines cut, secrets masked."""
