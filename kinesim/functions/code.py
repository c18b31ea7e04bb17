"""A function's code on disk: deployment packages (.zip) unpacked once per content, or a local
directory run in place ("hot reload", LocalStack's convention: `Code.S3Bucket="hot-reload"`,
`Code.S3Key=<absolute directory>`).

Layout under the code root: `<FunctionName>/<hex sha256 of the zip>/` (the unpacked files) next to
`<FunctionName>/<hex sha256>.zip` (the package as uploaded, served back by GetFunction's
`Code.Location`). Unpacking goes to a temporary sibling first and is renamed into place, so a
half-written directory is never taken for code.

AWS's checks and texts: a package that is not a zip is "Could not unzip uploaded file. Please
check your file, then try to upload again."; the unzipped size must stay under 262144000 bytes,
checked on the archive's directory before anything is written (and bounded while writing, since
the directory may lie). Entries that would land outside the directory (absolute paths, `..`,
symlinks pointing out) are refused the same way: AWS unpacks into a sandbox, we must not write
outside ours.
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import stat
import tempfile
import zipfile
import zlib
from dataclasses import dataclass

from ..protocol.errors import AwsError

MAX_UNZIPPED_BYTES = 262_144_000
HOT_RELOAD_BUCKET = "hot-reload"
# What LocalStack answers for a hot-reloaded function's CodeSha256: there is no package to hash.
HOT_RELOAD_SHA = "hot-reloading-hash-not-available"

_NOT_A_ZIP = "Could not unzip uploaded file. Please check your file, then try to upload again."
_COPY_CHUNK = 1 << 20


def invalid_parameter(message: str) -> AwsError:
    return AwsError("InvalidParameterValueException", message)


@dataclass(frozen=True)
class StoredCode:
    """Where a function's code lives and what the API reports about it."""
    code_dir: str        # absolute directory the handler is imported from
    sha256: str          # CodeSha256: base64 of the package's SHA-256
    size: int            # CodeSize: bytes of the package
    hot_reload: bool = False
    package_id: str = ""  # hex SHA-256: names the unpacked directory and the kept .zip

    def internal_keys(self) -> dict:
        """What a function document keeps about its code besides the API's fields."""
        return {"CodeDir": self.code_dir, "HotReload": self.hot_reload, "PackageId": self.package_id}


class CodeStore:
    def __init__(self, root: str):
        self.root = os.path.abspath(root)

    # packages

    def check_zip(self, package: bytes) -> StoredCode:
        """What storing a package would report, without storing it (UpdateFunctionCode's DryRun)."""
        _open_zip(package)
        digest = hashlib.sha256(package)
        return StoredCode(code_dir="", sha256=base64.b64encode(digest.digest()).decode(), size=len(package),
                          package_id=digest.hexdigest())

    def store_zip(self, function_name: str, package: bytes) -> StoredCode:
        """Unpack a deployment package for a function (once per distinct content)."""
        archive, entries = _open_zip(package)
        digest = hashlib.sha256(package)
        package_id = digest.hexdigest()
        sha = base64.b64encode(digest.digest()).decode()
        home = self._function_dir(function_name)
        target = os.path.join(home, package_id)
        if not os.path.isdir(target):
            os.makedirs(home, exist_ok=True)
            staging = tempfile.mkdtemp(prefix=".unpack-", dir=home)
            try:
                _extract(archive, entries, staging)
                with open(os.path.join(staging, ".package.zip"), "wb") as f:
                    f.write(package)
                os.replace(os.path.join(staging, ".package.zip"), target + ".zip")
                try:
                    os.rename(staging, target)
                except OSError:  # unpacked meanwhile by a concurrent request: keep that one
                    shutil.rmtree(staging, ignore_errors=True)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        return StoredCode(code_dir=target, sha256=sha, size=len(package), package_id=package_id)

    def hot_reload(self, directory: str) -> StoredCode:
        """Code run in place from a local directory."""
        if not os.path.isabs(directory):
            raise invalid_parameter(
                f"When using hot reloading, the archive key has to be an absolute path! Your archive key: {directory}")
        if not os.path.isdir(directory):
            raise invalid_parameter(f"Hot-reload code directory {directory} does not exist or is not a directory.")
        return StoredCode(code_dir=directory, sha256=HOT_RELOAD_SHA, size=0, hot_reload=True)

    def restore(self, function_name: str, doc: dict) -> str | None:
        """The code directory a function document refers to (recomputed: the data directory may
        have moved since), None if its package is no longer on disk."""
        if doc.get("HotReload"):
            return doc.get("CodeDir")
        package_id = doc.get("PackageId", "")
        target = os.path.join(self._function_dir(function_name), package_id)
        return target if package_id and os.path.isdir(target) else None

    def package_path(self, function_name: str, package_id: str) -> str | None:
        path = os.path.join(self._function_dir(function_name), package_id + ".zip")
        return path if package_id and os.path.isfile(path) else None

    # clean-up

    def prune(self, function_name: str, keep: set[str]) -> None:
        """Remove a function's unpacked packages other than `keep` (package ids)."""
        home = self._function_dir(function_name)
        try:
            names = os.listdir(home)
        except FileNotFoundError:
            return
        for name in names:
            package_id = name[:-4] if name.endswith(".zip") else name
            if package_id in keep:
                continue
            path = os.path.join(home, name)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except OSError:
                    pass

    def remove(self, function_name: str) -> None:
        shutil.rmtree(self._function_dir(function_name), ignore_errors=True)

    def function_names(self) -> list[str]:
        try:
            return [n for n in os.listdir(self.root) if os.path.isdir(os.path.join(self.root, n))]
        except FileNotFoundError:
            return []

    def _function_dir(self, function_name: str) -> str:
        # Function names are [a-zA-Z0-9-_.]+ (the model's pattern, checked before we get here).
        return os.path.join(self.root, function_name)


def _open_zip(package: bytes) -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(package))
        entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise invalid_parameter(_NOT_A_ZIP) from None
    if sum(e.file_size for e in entries) >= MAX_UNZIPPED_BYTES:
        raise invalid_parameter(f"Unzipped size must be smaller than {MAX_UNZIPPED_BYTES} bytes")
    return archive, entries


def _extract(archive: zipfile.ZipFile, entries: list[zipfile.ZipInfo], root: str) -> None:
    real_root = os.path.realpath(root)
    budget = MAX_UNZIPPED_BYTES
    for entry in entries:
        name = entry.filename.replace("\\", "/")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if not parts or name.startswith("/") or ".." in parts or ":" in parts[0]:
            if not parts:
                continue
            raise invalid_parameter(_NOT_A_ZIP)
        path = os.path.join(real_root, *parts)
        mode = entry.external_attr >> 16
        try:
            if entry.is_dir():
                os.makedirs(path, exist_ok=True)
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if not _inside(os.path.realpath(os.path.dirname(path)), real_root):
                raise invalid_parameter(_NOT_A_ZIP)  # a parent is a symlink leading out
            if stat.S_ISLNK(mode):
                link = archive.read(entry).decode("utf-8")
                resolved = os.path.realpath(os.path.join(os.path.dirname(path), link))
                if os.path.isabs(link) or not _inside(resolved, real_root):
                    raise invalid_parameter(_NOT_A_ZIP)
                os.symlink(link, path)
                continue
            with archive.open(entry) as src, open(path, "wb") as dst:
                while chunk := src.read(_COPY_CHUNK):
                    budget -= len(chunk)
                    if budget <= 0:
                        raise invalid_parameter(f"Unzipped size must be smaller than {MAX_UNZIPPED_BYTES} bytes")
                    dst.write(chunk)
            # Keep execute bits (bundled binaries, bootstrap scripts); always readable by us.
            if mode & 0o777:
                os.chmod(path, (mode & 0o755) | 0o600)
        # What zipfile raises for a damaged or unusable archive: NotImplementedError is its answer to
        # a compression method it lacks (e.g. an entry made with a method Python cannot read),
        # RuntimeError to an encrypted entry; AWS answers every such package the same way.
        except (zipfile.BadZipFile, zlib.error, NotImplementedError, RuntimeError, EOFError, UnicodeDecodeError,
                OSError) as err:
            if isinstance(err, OSError) and not isinstance(err, (FileExistsError, IsADirectoryError, NotADirectoryError)):
                raise
            raise invalid_parameter(_NOT_A_ZIP) from None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)
