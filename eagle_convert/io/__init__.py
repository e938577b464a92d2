"""Bytes only: safetensors headers, `.bin` ranges, hub access, streamed writing, verification, atomic output."""

from __future__ import annotations

from eagle_convert._lazy import TYPE_CHECKING, attach

if TYPE_CHECKING:  # the face: what type checkers see and what __getattr__ loads
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
        ONE,
        decode,
        encode,
        read_array,
        read_ints,
        readable_vocab_map,
        tensor_bytes,
        tensor_torch,
        torch_dtype,
    )
    from eagle_convert.io.trailing import TrailingVerifier
    from eagle_convert.io.verify import verify_file, verify_same_bytes
    from eagle_convert.io.writer import index_text, write_file, write_index
else:
    __getattr__, __dir__ = attach(__name__, __file__)
