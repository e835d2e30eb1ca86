"""gguf_reads.read_once: one parse of a GGUF per conversion, gguf's own functions outside it."""

from __future__ import annotations

import gguf
import numpy as np

from privleak.gguf_reads import read_once


def tiny_gguf(path) -> str:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("tiny.value", 7)
    writer.add_tensor("blk.0.attn_q.weight", np.arange(8, dtype=np.float32).reshape(2, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(path)


def test_inside_the_block_a_file_is_parsed_once_and_outside_each_call_parses(tmp_path):
    path = tiny_gguf(tmp_path / "tiny.gguf")
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with read_once():
        first = gguf.GGUFReader(path)
        assert gguf.GGUFReader(path) is first
        assert first.fields["tiny.value"].contents() == 7
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is gguf.get_tensor_name_map(
            gguf.MODEL_ARCH.LLAMA, 2
        )
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)
    assert gguf.GGUFReader(path) is not gguf.GGUFReader(path)
