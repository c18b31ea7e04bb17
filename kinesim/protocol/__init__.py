"""Wire protocols shared by every service: codecs, auth header checks, model validation, errors."""
