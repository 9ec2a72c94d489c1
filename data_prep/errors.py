class SourceError(ValueError):
    """Bad input: the message names the file or record and what is wrong with it."""
