"""Bytes only: safetensors headers, `.bin` ranges, hub access, streamed writing, verification, atomic output."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # what type checkers see
    from eagle_convert.io.atomic import (
        OutputExistsError,
        atomic_output_dir,
        check_output_dir,
        was_published,
        write_text_atomic,
    )
    from eagle_convert.io.binranges import read_bin_tensors
    from eagle_convert.io.bounded import MAX_INDEX_BYTES, JsonLimits, brief
    from eagle_convert.io.durable import flush_early
    from eagle_convert.io.hub import HubSource, parse_hub_ref
    from eagle_convert.io.hub_env import OFFLINE_REASON, endpoint, endpoint_display, offline
    from eagle_convert.io.hub_errors import translate
    from eagle_convert.io.links import LinkOutcome, link_or_copy, same_bytes_cheaply
    from eagle_convert.io.localpath import looks_like_path, missing_path_error, suggestion
    from eagle_convert.io.outfile import (
        DTYPE_BITS,
        FORMAT_PT_METADATA,
        INDEX_FILENAME,
        SINGLE_FILENAME,
        ByteRange,
        OutFile,
        OutTensor,
        WriterError,
        file_header,
    )
    from eagle_convert.io.rows import RowReader
    from eagle_convert.io.safetensors_header import DTYPE_BYTES, TensorInfo, read_header
    from eagle_convert.io.safetext import printable
    from eagle_convert.io.signals import INTERRUPT_SIGNALS, TerminatedBySignal, restore_handlers, swap_handlers
    from eagle_convert.io.source import LocalSource, Source, read_json, where
    from eagle_convert.io.tensordata import (
        DECODABLE,
        decode,
        encode,
        read_array,
        readable_vocab_map,
        tensor_bytes,
        tensor_torch,
        torch_dtype,
    )
    from eagle_convert.io.verify import verify_file, verify_same_bytes
    from eagle_convert.io.writer import index_text, write_file, write_index
else:  # what runs: each name imported from its module on first use
    __getattr__, __dir__ = attach(
        __name__,
        {
            "OutputExistsError": "eagle_convert.io.atomic",
            "atomic_output_dir": "eagle_convert.io.atomic",
            "check_output_dir": "eagle_convert.io.atomic",
            "was_published": "eagle_convert.io.atomic",
            "write_text_atomic": "eagle_convert.io.atomic",
            "read_bin_tensors": "eagle_convert.io.binranges",
            "JsonLimits": "eagle_convert.io.bounded",
            "MAX_INDEX_BYTES": "eagle_convert.io.bounded",
            "brief": "eagle_convert.io.bounded",
            "flush_early": "eagle_convert.io.durable",
            "HubSource": "eagle_convert.io.hub",
            "parse_hub_ref": "eagle_convert.io.hub",
            "OFFLINE_REASON": "eagle_convert.io.hub_env",
            "endpoint": "eagle_convert.io.hub_env",
            "endpoint_display": "eagle_convert.io.hub_env",
            "offline": "eagle_convert.io.hub_env",
            "translate": "eagle_convert.io.hub_errors",
            "LinkOutcome": "eagle_convert.io.links",
            "link_or_copy": "eagle_convert.io.links",
            "same_bytes_cheaply": "eagle_convert.io.links",
            "looks_like_path": "eagle_convert.io.localpath",
            "missing_path_error": "eagle_convert.io.localpath",
            "suggestion": "eagle_convert.io.localpath",
            "ByteRange": "eagle_convert.io.outfile",
            "DTYPE_BITS": "eagle_convert.io.outfile",
            "FORMAT_PT_METADATA": "eagle_convert.io.outfile",
            "INDEX_FILENAME": "eagle_convert.io.outfile",
            "OutFile": "eagle_convert.io.outfile",
            "OutTensor": "eagle_convert.io.outfile",
            "SINGLE_FILENAME": "eagle_convert.io.outfile",
            "WriterError": "eagle_convert.io.outfile",
            "file_header": "eagle_convert.io.outfile",
            "printable": "eagle_convert.io.safetext",
            "RowReader": "eagle_convert.io.rows",
            "DTYPE_BYTES": "eagle_convert.io.safetensors_header",
            "TensorInfo": "eagle_convert.io.safetensors_header",
            "read_header": "eagle_convert.io.safetensors_header",
            "INTERRUPT_SIGNALS": "eagle_convert.io.signals",
            "TerminatedBySignal": "eagle_convert.io.signals",
            "restore_handlers": "eagle_convert.io.signals",
            "swap_handlers": "eagle_convert.io.signals",
            "LocalSource": "eagle_convert.io.source",
            "Source": "eagle_convert.io.source",
            "read_json": "eagle_convert.io.source",
            "where": "eagle_convert.io.source",
            "DECODABLE": "eagle_convert.io.tensordata",
            "decode": "eagle_convert.io.tensordata",
            "encode": "eagle_convert.io.tensordata",
            "read_array": "eagle_convert.io.tensordata",
            "readable_vocab_map": "eagle_convert.io.tensordata",
            "tensor_bytes": "eagle_convert.io.tensordata",
            "tensor_torch": "eagle_convert.io.tensordata",
            "torch_dtype": "eagle_convert.io.tensordata",
            "verify_file": "eagle_convert.io.verify",
            "verify_same_bytes": "eagle_convert.io.verify",
            "index_text": "eagle_convert.io.writer",
            "write_file": "eagle_convert.io.writer",
            "write_index": "eagle_convert.io.writer",
        },
    )

__all__ = [
    "atomic_output_dir",
    "brief",
    "ByteRange",
    "check_output_dir",
    "DECODABLE",
    "decode",
    "DTYPE_BITS",
    "DTYPE_BYTES",
    "encode",
    "endpoint",
    "endpoint_display",
    "file_header",
    "flush_early",
    "FORMAT_PT_METADATA",
    "HubSource",
    "INDEX_FILENAME",
    "index_text",
    "INTERRUPT_SIGNALS",
    "JsonLimits",
    "link_or_copy",
    "LinkOutcome",
    "LocalSource",
    "looks_like_path",
    "MAX_INDEX_BYTES",
    "missing_path_error",
    "offline",
    "OFFLINE_REASON",
    "OutFile",
    "OutputExistsError",
    "OutTensor",
    "parse_hub_ref",
    "printable",
    "read_array",
    "read_bin_tensors",
    "read_header",
    "read_json",
    "readable_vocab_map",
    "restore_handlers",
    "RowReader",
    "same_bytes_cheaply",
    "SINGLE_FILENAME",
    "Source",
    "suggestion",
    "swap_handlers",
    "tensor_bytes",
    "tensor_torch",
    "TensorInfo",
    "TerminatedBySignal",
    "torch_dtype",
    "translate",
    "verify_file",
    "verify_same_bytes",
    "was_published",
    "where",
    "write_file",
    "write_index",
    "write_text_atomic",
    "WriterError",
]
