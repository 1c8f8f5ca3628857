"""Object storage (fsspec URLs such as ``s3://bucket/key``): access checks and errors.

fsspec file systems report a missing bucket as ``FileNotFoundError`` and refused
credentials or permissions as ``PermissionError`` (s3fs maps ``NoSuchBucket``,
``AccessDenied``, ``InvalidAccessKeyId``, ``SignatureDoesNotMatch`` ... onto those), with
messages that do not say what to change. The engine checks the bucket of every URL input
and output before any other work (:func:`check_bucket`), and turns the errors of the first
read or write into one-line dask_bid errors (:func:`access_error`).
"""

from __future__ import annotations

from .._errors import OutputLocationError, StoreAccessError, StoreNotFoundError
from .._files import local_path

__all__ = ["is_url", "bucket_of", "check_bucket", "access_error", "missing_credentials",
           "CREDENTIALS_HINT", "BUCKET_PROTOCOLS"]

#: Protocols whose first path component is a bucket (container) that can be checked alone.
BUCKET_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})

#: Where credentials and the endpoint come from (docs/engine.md, "Object storage").
CREDENTIALS_HINT = ("pass them in storage_options ({'key': ..., 'secret': ..., "
                    "'client_kwargs': {'endpoint_url': ...}} for s3://) or set "
                    "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) and "
                    "AWS_ENDPOINT_URL")


def is_url(path) -> bool:
    return "://" in local_path(str(path))


def bucket_of(path):
    """``(protocol, bucket)`` of a URL such as ``s3://bucket/key``."""
    proto, _, rest = str(path).partition("://")
    return proto, rest.split("/", 1)[0]


def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def access_error(path, exc, *, output=False, write=False, what=None):
    """The dask_bid error for ``exc`` raised by a read (or ``write``) of URL ``path``.

    A ``PermissionError`` (refused credentials or permission) becomes
    :class:`~dask_bid.StoreAccessError`; anything else, or a local ``path``, gives None.
    """
    if not is_url(path):
        return None
    _, bucket = bucket_of(path)
    what = what or ("the output" if output else "the input")
    if isinstance(exc, StoreAccessError):  # says what was refused: a delete (_remove)
        return StoreAccessError(f"cannot write {what} {str(path)!r}: {_one_line(exc)}") \
            if write else exc
    if isinstance(exc, PermissionError):
        if write:
            return StoreAccessError(
                f"cannot write {what} {str(path)!r}: access denied ({_one_line(exc)}). The "
                "credentials may read but not write there (a read-only bucket or key); use "
                f"credentials with write permission, or another output location.")
        return StoreAccessError(
            f"access to {what} {str(path)!r} was denied ({_one_line(exc)}). Check the "
            f"credentials and that they may {'write' if output else 'read'} bucket "
            f"{bucket!r}: {CREDENTIALS_HINT}.")
    return None


def check_bucket(path, storage_options=None, *, output=False, what=None):
    """Refuse a URL whose bucket is missing or refused to these credentials (one request).

    Local paths and protocols without buckets pass. Raises
    :class:`~dask_bid.StoreAccessError`, :class:`~dask_bid.StoreNotFoundError` (input) or
    :class:`~dask_bid.OutputLocationError` (output). ``what`` names the store in
    messages (default "the input" / "the output").
    """
    if not is_url(path):
        return
    import fsspec

    proto, bucket = bucket_of(path)
    what = what or ("the output" if output else "the input")
    try:
        fs, _ = fsspec.core.url_to_fs(str(path), **(storage_options or {}))
    except (ImportError, ValueError) as exc:
        extra = " (pip install 'dask_bid[s3]')" if proto in ("s3", "s3a") else ""
        cls = OutputLocationError if output else StoreNotFoundError
        raise cls(f"cannot open {str(path)!r}: {_one_line(exc)}{extra}.") from exc
    if proto not in BUCKET_PROTOCOLS or not bucket:
        return  # not an object store with buckets (local, memory, http, chained URLs ...)
    try:
        fs.info(bucket)  # s3fs: HEAD on the bucket (no listing)
    except FileNotFoundError as exc:
        cls = OutputLocationError if output else StoreNotFoundError
        raise cls(
            f"the bucket {bucket!r} of {what} {str(path)!r} does not exist. Create it, or "
            f"check the URL and the endpoint ({proto}://bucket/key).") from exc
    except PermissionError as exc:
        raise access_error(path, exc, output=output, what=what) from exc
    except Exception as exc:
        if unreachable_endpoint(exc):
            raise StoreAccessError(
                f"cannot reach the object store of {what} {str(path)!r} "
                f"({_one_line(exc)}): check the endpoint (AWS_ENDPOINT_URL, or "
                "storage_options={'client_kwargs': {'endpoint_url': ...}}) and the "
                "network.") from exc
        if not missing_credentials(exc):
            raise
        raise StoreAccessError(
            f"no credentials for {what} {str(path)!r} ({_one_line(exc)}): "
            f"{CREDENTIALS_HINT}.") from exc


#: botocore's and aiohttp's errors for an endpoint that does not answer
_ENDPOINT_ERRORS = ("EndpointConnectionError", "ConnectTimeoutError", "ClientConnectorError",
                    "ConnectionClosedError")


def unreachable_endpoint(exc) -> bool:
    """Whether ``exc`` says that the object store's endpoint could not be reached."""
    return any(type(e).__name__ in _ENDPOINT_ERRORS for e in (exc, exc.__cause__,
                                                             exc.__context__) if e)


#: botocore's errors for credentials that cannot be found or are incomplete (raised as
#: such through s3fs: not PermissionError, which is for refused ones)
_CREDENTIAL_ERRORS = ("NoCredentialsError", "PartialCredentialsError",
                      "CredentialRetrievalError")


def missing_credentials(exc) -> bool:
    """Whether ``exc`` says that no usable credentials were found (botocore)."""
    return any(type(e).__name__ in _CREDENTIAL_ERRORS for e in (exc, exc.__cause__,
                                                                 exc.__context__) if e)
