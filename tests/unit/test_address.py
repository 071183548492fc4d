"""--address auto (pool/address.py): the cluster RAY_ADDRESS names, else the one `ray start`
recorded in its address file, checked to answer in seconds; never any other Ray found
running on the machine."""

import socket
import time

import pytest

from distributed_ac.core.errors import ClusterError
from distributed_ac.pool.address import check_address, ray_address_file


@pytest.fixture
def ray_tmpdir(tmp_path, monkeypatch):
    """RAY_TMPDIR at an empty directory, RAY_ADDRESS unset."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    return tmp_path


def write_address_file(root, address: str) -> None:
    (root / "ray").mkdir(exist_ok=True)
    (root / "ray" / "ray_current_cluster").write_text(address + "\n")


def test_auto_resolves_to_the_address_ray_start_recorded(ray_tmpdir):
    with socket.socket() as gcs:  # stands in for the head's GCS: something that listens
        gcs.bind(("127.0.0.1", 0))
        gcs.listen()
        address = f"127.0.0.1:{gcs.getsockname()[1]}"
        write_address_file(ray_tmpdir, address)
        assert ray_address_file() == ray_tmpdir / "ray" / "ray_current_cluster"
        assert check_address("auto") == address


def test_auto_without_an_address_file_is_refused_naming_where_it_looked(ray_tmpdir):
    with pytest.raises(ClusterError, match="no Ray cluster was started on this machine") as e:
        check_address("auto")
    assert str(ray_tmpdir / "ray" / "ray_current_cluster") in str(e.value)


def test_auto_with_a_stale_address_file_is_refused_within_the_timeout(ray_tmpdir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    write_address_file(ray_tmpdir, f"127.0.0.1:{port}")
    start = time.monotonic()
    with pytest.raises(ClusterError, match=f"no Ray cluster answers at auto .*127.0.0.1:{port}"):
        check_address("auto", timeout_s=2.0)
    assert time.monotonic() - start < 5


def test_auto_takes_ray_address_first(ray_tmpdir, monkeypatch):
    write_address_file(ray_tmpdir, "127.0.0.1:1")
    monkeypatch.setenv("RAY_ADDRESS", "http://127.0.0.1:8265")
    with pytest.raises(ClusterError, match=r"auto \(RAY_ADDRESS: http://127.0.0.1:8265\)"):
        check_address("auto")
