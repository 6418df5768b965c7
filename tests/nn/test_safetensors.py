"""tt.save / tt.load in the safetensors format (issue 23 item 4): files built by hand from the
documented format load, ours are byte-identical to the reference writer's (when the package is
installed), PyTorch's files load into the same architecture, and nothing is ever unpickled."""

import json
import struct

import numpy as np
import pytest

import tinytensor as tt
from tinytensor import nn


def handmade(tensors, metadata=None):
    """A safetensors file written from the spec: u64 header length, JSON header, raw bytes."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def test_a_file_written_from_the_spec_loads(tmp_path):
    path = tmp_path / "ref.safetensors"
    path.write_bytes(handmade({
        "weight": ("F32", [2, 2], struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)),
        "steps": ("I64", [], struct.pack("<q", 7)),
        "half": ("BF16", [2], struct.pack("<2H", 0x3F80, 0xC000)),     # 1.0, -2.0 in bfloat16
        "mask": ("BOOL", [3], bytes([1, 0, 1])),
    }, metadata={"format": "pt"}))
    state = tt.load(path)
    assert list(state) == ["weight", "steps", "half", "mask"]
    np.testing.assert_array_equal(state["weight"], np.array([[1.0, -2.0], [0.5, 3.0]], np.float32))
    assert state["weight"].dtype == np.float32 and state["steps"].shape == () and state["steps"] == 7
    np.testing.assert_array_equal(state["half"], np.array([1.0, -2.0], np.float32))
    np.testing.assert_array_equal(state["mask"], [True, False, True])
    assert tt.serialization.read_safetensors_metadata(path) == {"format": "pt"}


def test_round_trip_and_the_bytes_follow_the_spec(tmp_path):
    model = nn.Sequential(nn.Linear(3, 4, rng=0), nn.LayerNorm(4), nn.Linear(4, 2, rng=1))
    path = tmp_path / "model.safetensors"
    tt.save(model.state_dict(), path)
    blob = path.read_bytes()
    n = struct.unpack("<Q", blob[:8])[0]
    assert n % 8 == 0
    header = json.loads(blob[8:8 + n])
    assert header["0.weight"]["dtype"] == "F32" and header["0.weight"]["shape"] == [4, 3]
    begin, end = header["0.weight"]["data_offsets"]
    np.testing.assert_array_equal(np.frombuffer(blob[8 + n + begin:8 + n + end], "<f4").reshape(4, 3),
                                  model[0].weight.data)
    other = nn.Sequential(nn.Linear(3, 4, rng=5), nn.LayerNorm(4), nn.Linear(4, 2, rng=6))
    other.load_state_dict(tt.load(path))
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(other(x).data, model(x).data)


def test_refusals(tmp_path):
    with pytest.raises(TypeError, match="flat dict of arrays"):
        tt.save([np.ones(2)], tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="arrays only"):
        tt.save({"a": 1.5}, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="cannot hold"):
        tt.save({"a": np.array(["s"])}, tmp_path / "x.safetensors")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(handmade({"a": ("F32", [2], struct.pack("<2f", 1, 2)), "b": ("F32", [1], b"")}))
    with pytest.raises(ValueError, match="damaged|gaps"):
        tt.load(bad)
    bad.write_bytes(struct.pack("<Q", 10 ** 12) + b"{}")
    with pytest.raises(ValueError, match="not a safetensors file"):
        tt.load(bad)


def test_the_reference_writer_and_reader_agree(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    d = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([1, 2], np.int64),
         "flag": np.array(True), "h": np.ones(3, np.float16), "e": np.zeros((0, 4))}
    st.save_file(d, tmp_path / "ref.safetensors")
    tt.save(d, tmp_path / "ours.safetensors")
    assert (tmp_path / "ref.safetensors").read_bytes() == (tmp_path / "ours.safetensors").read_bytes()
    for name, value in st.load_file(tmp_path / "ours.safetensors").items():
        assert value.dtype == d[name].dtype
        np.testing.assert_array_equal(value, d[name])


def test_pytorchs_safetensors_load_into_the_same_architecture(tmp_path):
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    st_torch.save_file(ref.state_dict(), tmp_path / "torch.safetensors")
    model = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3))
    model.load_state_dict(tt.load(tmp_path / "torch.safetensors"))
    x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    np.testing.assert_allclose(model(x).data, ref(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-7)
    tt.save(model.state_dict(), tmp_path / "back.safetensors")           # and the reverse
    back = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh(), torch.nn.Linear(4, 3))
    back.load_state_dict(st_torch.load_file(tmp_path / "back.safetensors"))
    np.testing.assert_allclose(back(torch.tensor(x)).detach().numpy(), model(x).data, rtol=1e-5, atol=1e-7)
