"""TLS for the Dask cluster a run uses, for clusters on shared networks (docs/clusters.md,
"Clusters on shared networks (TLS)").

Dask's TLS is mutual: a client of a `tls://` scheduler needs the cluster's CA certificate (to check
the scheduler and workers) and a certificate of its own with its key (the scheduler checks it).
They come from our flags `--tls-ca-file`, `--tls-cert` and `--tls-key` (named as those of
`dask scheduler` and `dask worker`), else from Dask's config (`distributed.comm.tls.ca-file`,
`distributed.comm.tls.client.cert`, `distributed.comm.tls.client.key`: in Dask's config files or
`DASK_DISTRIBUTED__COMM__TLS__...` environment variables). They are checked before connecting, so
a missing or unreadable file is named rather than met as a failed handshake.

Clusters this package starts itself listen on loopback only and use a throwaway certificate made
for that one cluster, unless `--plain-cluster` asks for plain TCP.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import astuple, dataclass


class TLSSettingsError(ValueError):
    """TLS settings that cannot give a secure connection to the scheduler."""


@dataclass(frozen=True)
class TLSFiles:
    """PEM files given on the command line; empty ones come from Dask's config."""

    ca_file: str = ""
    cert: str = ""
    key: str = ""

    def __bool__(self) -> bool:
        """Whether any file was given."""
        return any(astuple(self))


@dataclass(frozen=True)
class _Setting:
    """One client TLS setting: the Security field it fills, our flag, and Dask's config key."""

    what: str
    field: str
    flag: str
    config: str

    @property
    def environment(self) -> str:
        """The environment variable Dask reads the config key from."""
        return "DASK_" + self.config.upper().replace(".", "__").replace("-", "_")


_CA, _CERT, _KEY = _SETTINGS = (
    _Setting("CA certificate", "tls_ca_file", "--tls-ca-file", "distributed.comm.tls.ca-file"),
    _Setting("client certificate", "tls_client_cert", "--tls-cert",
             "distributed.comm.tls.client.cert"),
    _Setting("client key", "tls_client_key", "--tls-key", "distributed.comm.tls.client.key"),
)


def client_security(address: str, files: TLSFiles = TLSFiles()):
    """The `distributed.Security` of our client of the scheduler at `address`: None (Dask's
    defaults) for a plain address, checked TLS settings for a `tls://` one."""
    from distributed.comm.addressing import parse_address
    from distributed.security import Security

    given = dict(zip(_SETTINGS, astuple(files)))
    # an address without a scheme gets Dask's default one
    if not address or parse_address(address)[0] != "tls":
        flags = [setting.flag for setting, value in given.items() if value]
        if flags:
            what = f"the scheduler address is {address!r}" if address else "none is given"
            raise TLSSettingsError(
                f"{', '.join(flags)} {'is' if len(flags) == 1 else 'are'} for a tls:// scheduler "
                f"address, but {what}: start the cluster with `dask scheduler --protocol tls` and "
                f"pass its tls:// address")
        return None
    security = Security(require_encryption=True,
                        **{setting.field: value for setting, value in given.items() if value})
    origin = {setting: setting.flag if given[setting] else setting.config for setting in given}
    _require(address, [s for s in (_CA, _CERT) if not getattr(security, s.field)])
    for setting in _SETTINGS:
        path = getattr(security, setting.field)
        if path and "\n" not in path and not os.path.isfile(path):  # (Dask also takes PEM text)
            raise TLSSettingsError(f"TLS {setting.what} {path!r} ({origin[setting]}) is not a file")
    if not security.tls_client_key and not _holds_private_key(security.tls_client_cert):
        _require(address, [_KEY])
    try:
        security.get_connection_args("client")  # loads the files into an SSL context
    except (ssl.SSLError, ValueError) as error:
        sources = ", ".join(f"{origin[s]}={getattr(security, s.field)!r}" for s in _SETTINGS
                            if getattr(security, s.field))
        raise TLSSettingsError(f"TLS files for {address} could not be loaded ({sources}): "
                               f"{error}") from None
    return security


def _require(address: str, missing: list[_Setting]) -> None:
    """Refuse a tls:// address whose `missing` settings are not set, naming where to set them."""
    if missing:
        raise TLSSettingsError(
            f"the scheduler address {address} needs TLS files, and the "
            f"{' and '.join(s.what for s in missing)} {'is' if len(missing) == 1 else 'are'} not "
            f"set: give {' '.join(f'{s.flag} FILE' for s in missing)} (as to `dask worker`), or "
            f"set {' and '.join(s.config for s in missing)} in Dask's config (environment: "
            f"{' and '.join(s.environment for s in missing)})")


def _holds_private_key(cert: str) -> bool:
    """Whether a certificate (a file or PEM text) carries its private key too."""
    if "\n" not in cert:
        with open(cert, errors="replace") as file:
            cert = file.read()
    return "PRIVATE KEY-----" in cert


def encryption_required() -> bool:
    """Whether Dask's config asks for TLS on every connection."""
    import dask

    return bool(dask.config.get("distributed.comm.require-encryption", default=None))


def local_cluster_tls(plain: bool) -> bool:
    """Whether a cluster we start on this machine uses TLS (a throwaway certificate, in memory
    and in files only this user can read): unless `plain` (`--plain-cluster`), which Dask's config
    cannot also require encryption for. Nothing but our own client ever joins such a cluster;
    without TLS any local process could (it listens on loopback only)."""
    if plain and encryption_required():
        raise TLSSettingsError("--plain-cluster asks for a plain TCP local cluster, but Dask's "
                               "config requires encryption (distributed.comm.require-encryption)")
    return not plain
