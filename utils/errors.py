"""Errors a user can fix: the command lines print them as one line and exit with code 2."""


class UsageError(Exception):
    """Bad input from the user (flag, environment, file): one line saying what to change."""
