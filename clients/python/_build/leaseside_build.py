"""A PEP 517 build backend for the leaseside client, standard library only.

The package is two modules, leaseside.py (the client) and leaseside_fence.py
(fenced writes in PostgreSQL and Redis), with no dependencies; this backend
builds its wheel and sdist without fetching a build tool from an index, so
`pip install ./clients/python` works offline. Metadata comes from the
[project] table of pyproject.toml, the version from leaseside.py's
__version__.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MODULE = "leaseside.py"
# leaseside_fence.py: fenced writes in PostgreSQL and Redis (no dependencies either).
_MODULES = [_MODULE, "leaseside_fence.py"]
_SDIST_FILES = ["pyproject.toml"] + _MODULES + ["_build/leaseside_build.py"]


def _project():
    """The [project] table's string values, and the module's version."""
    with open(os.path.join(_HERE, "pyproject.toml"), "rb") as f:
        text = f.read().decode("utf-8")
    try:
        import tomllib
    except ImportError:  # before Python 3.11: the table holds only key = "string" lines
        table = text.split("[project]", 1)[1].split("\n[", 1)[0]
        p = dict(re.findall(r'^(\S+)\s*=\s*"([^"]*)"', table, re.M))
    else:
        p = tomllib.loads(text)["project"]
    with open(os.path.join(_HERE, _MODULE), encoding="utf-8") as f:
        p["version"] = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M).group(1)
    return p


def _metadata(p):
    return (
        "Metadata-Version: 2.1\n"
        "Name: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\nLicense: %s\n"
        % (p["name"], p["version"], p["description"], p["requires-python"], p["license"])
    )


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d\n" % (name, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    dist_info = "%s-%s.dist-info" % (p["name"], p["version"])
    wheel = "%s-%s-py3-none-any.whl" % (p["name"], p["version"])
    files = []
    for m in _MODULES:
        with open(os.path.join(_HERE, m), "rb") as f:
            files.append((m, f.read()))
    files.append((dist_info + "/METADATA", _metadata(p).encode()))
    files.append((dist_info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: leaseside_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    record = "".join(_record_line(n, d) for n, d in files) + dist_info + "/RECORD,,\n"
    files.append((dist_info + "/RECORD", record.encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files:
            z.writestr(name, data)
    return wheel


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = "%s-%s" % (p["name"], p["version"])
    path = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        for name in _SDIST_FILES:
            tar.add(os.path.join(_HERE, name), arcname=base + "/" + name)
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = _metadata(p).encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return os.path.basename(path)
