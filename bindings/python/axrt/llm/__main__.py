"""The axrt.llm command line: ``python -m axrt.llm {convert,generate,serve} ...`` (docs/llm.md,
docs/serving.md)."""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import List, Optional


def _ids(text: str) -> List[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"token ids must be integers separated by commas, "
                                         f"not {text!r}") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m axrt.llm",
                                     description="Llama-family language models on axrt.")
    commands = parser.add_subparsers(dest="command", required=True)

    convert = commands.add_parser("convert", help="convert a Hugging Face checkpoint to an .axe")
    convert.add_argument("hf_dir", help="the checkpoint directory (config.json, *.safetensors)")
    convert.add_argument("out", help="the .axe file to write")
    convert.add_argument("--weights", default="f32",
                         choices=["f32", "bf16", "int8", "fp8", "int4"],
                         help="precision of the stored weights (default f32)")
    convert.add_argument("--activations", default="f32", choices=["f32", "int8"],
                         help="int8 (with --weights int4 or int8): projections quantize their "
                              "inputs to int8 and multiply integers; faster (docs/performance.md "
                              "says where), not exact (default f32)")
    convert.add_argument("--int4-group-size", type=int, choices=[32, 64, 128],
                         help="with --weights int4: inputs per scale and zero point (default: "
                              "each projection the largest of 128, 64, 32 that divides its "
                              "inputs)")
    convert.add_argument("--kv-cache-dtype", default="f32", choices=["f32", "bf16", "fp8_e4m3"],
                         help="element type of the KV cache: bf16 halves it, fp8_e4m3 (a scale "
                              "per token and head) quarters it; not exact (docs/kernels.md, "
                              "\"KV cache\"; default f32)")
    convert.add_argument("--fused-kernels", action="store_true",
                         help="run each residual add and the norm after it, and rope and "
                              "the KV-cache write (with --decode-matmuls and --weights bf16, "
                              "also the gate/up projection and its gated SiLU), as one kernel "
                              "each (the same results, fewer passes over memory; off by "
                              "default until validated on a GPU)")
    convert.add_argument("--decode-matmuls", action="store_true",
                         help="with --weights bf16, int8, fp8 or int4 (f32 activations): "
                              "projections on the decode matmuls' grid, "
                              "for a GPU's decode (off by default until validated on a GPU)")
    convert.add_argument("--tensor-core-matmuls", action="store_true",
                         help="with --weights bf16, int8, fp8 or int4 (f32 activations): "
                              "projections on a GPU's tensor cores, activations (and int4 "
                              "weights) rounded to bf16; not the same bits (docs/kernels.md, "
                              "\"Tensor-core matmul\"; off by default until validated on a GPU)")
    convert.add_argument("--split-attention", action="store_true",
                         help="attention over chunks of each token's context, then combined: "
                              "more parallel work for a GPU's decode, not the same bits "
                              "(docs/kernels.md, \"Split attention\"; off by default until "
                              "validated on a GPU)")
    convert.add_argument("--attention-splits", type=int, default=8, metavar="N",
                         help="with --split-attention: the chunks of each context (default 8)")
    convert.add_argument("--flash-attention", action="store_true",
                         help="attention on a GPU's tensor cores, queries, keys, values and "
                              "probabilities rounded to bf16; not the same bits "
                              "(docs/kernels.md, \"Flash attention\"; off by default until "
                              "validated on a GPU)")
    convert.add_argument("--max-context", type=int, default=None,
                         help="longest sequence (default: the checkpoint's)")
    convert.add_argument("--block-size", type=int, default=16, help="tokens per KV-cache block")
    convert.add_argument("--prefill-chunk", type=int, default=512,
                         help="most tokens of one step: the larger of this and --max-batch")
    convert.add_argument("--max-batch", type=int, default=64,
                         help="most sequences whose logits one step returns")
    convert.add_argument("--tensor-parallel", type=int, default=1, metavar="N",
                         help="write the N shards of a tensor-parallel set into the directory "
                              "OUT (rank0.axe ...), to run on N devices (default 1: one file)")
    convert.add_argument("--chat-template", default=None, metavar="FILE",
                         help="a Jinja2 chat template (or a JSON file holding "
                              "'chat_template') to keep instead of the checkpoint's")
    convert.add_argument("--cuda-fatbin", default=None,
                         help="CUDA kernels to add as variants (default: axrt's own, if built)")
    convert.add_argument("--no-cuda", action="store_true", help="add no CUDA variants")

    generate = commands.add_parser("generate", help="generate tokens with a converted model")
    generate.add_argument("model", help="the .axe file")
    prompt = generate.add_mutually_exclusive_group(required=True)
    prompt.add_argument("--prompt-ids", type=_ids, help="prompt token ids, comma-separated")
    prompt.add_argument("--prompt", help="prompt text (the model must carry a tokenizer)")
    generate.add_argument("--max-new-tokens", type=int, default=16)
    generate.add_argument("--temperature", type=float, default=0.0,
                          help="0 (default): greedy")
    generate.add_argument("--top-k", type=int, default=0, help="0 (default): all tokens")
    generate.add_argument("--top-p", type=float, default=1.0)
    generate.add_argument("--seed", type=int, default=0)
    generate.add_argument("--stop-ids", type=_ids, default=None,
                          help="stop after any of these ids (default: the model's EOS ids)")
    where = generate.add_mutually_exclusive_group()
    where.add_argument("--device", default=None, help="e.g. cpu:0, cuda:0")
    where.add_argument("--devices", default=None,
                       type=lambda text: [d for d in text.replace(" ", "").split(",") if d],
                       help="a tensor-parallel set's devices in rank order, comma-separated "
                            "(e.g. cuda:0,cuda:1)")
    generate.add_argument("--stats", action="store_true",
                          help="print timing to standard error")

    chat = commands.add_parser("chat", help="chat with a converted model in the terminal")
    chat.add_argument("model", help="the .axe file, or a tensor-parallel set's directory "
                                    "(with --devices)")
    chat_where = chat.add_mutually_exclusive_group()
    chat_where.add_argument("--device", default=None, help="e.g. cpu:0, cuda:0")
    chat_where.add_argument("--devices", default=None,
                            type=lambda text: [d for d in text.replace(" ", "").split(",") if d],
                            help="a tensor-parallel set's devices in rank order")
    chat.add_argument("--system", default=None, help="a system message to begin with")
    chat.add_argument("--chat-template", default=None, metavar="FILE",
                      help="a Jinja2 template to render the chat with instead of the model's")
    chat.add_argument("--max-tokens", type=int, default=512,
                      help="most tokens of one reply (default 512, or what the context "
                           "leaves)")
    chat.add_argument("--temperature", type=float, default=0.7, help="0: greedy (default 0.7)")
    chat.add_argument("--top-p", type=float, default=0.95)
    chat.add_argument("--top-k", type=int, default=0, help="0 (default): all tokens")
    chat.add_argument("--min-p", type=float, default=0.0)
    chat.add_argument("--repetition-penalty", type=float, default=1.0)
    chat.add_argument("--seed", type=int, default=None,
                      help="make the replies reproducible (default: a new seed each reply)")

    serve = commands.add_parser("serve", help="serve a converted model over HTTP "
                                "(OpenAI-compatible completions and chat completions)")
    serve.add_argument("model", help="the .axe file, or a tensor-parallel set's directory "
                                     "(with --devices)")
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--api-key", default=None,
                       help="require 'Authorization: Bearer KEY' on every endpoint but /health")
    serve.add_argument("--model-name", default=None,
                       help="the model's name in the API (default: the file name without .axe)")
    serve_where = serve.add_mutually_exclusive_group()
    serve_where.add_argument("--device", default=None, help="e.g. cpu:0, cuda:0")
    serve_where.add_argument("--devices", default=None,
                             type=lambda text: [d for d in text.replace(" ", "").split(",") if d],
                             help="a tensor-parallel set's devices in rank order, "
                                  "comma-separated (e.g. cpu:0,cpu:1); the engine runs every "
                                  "step on all of them")
    cache = serve.add_mutually_exclusive_group()
    cache.add_argument("--num-blocks", type=int, default=0, help="KV-cache blocks")
    cache.add_argument("--kv-cache-bytes", type=int, default=0,
                       help="KV-cache size in bytes (default: enough for --max-running "
                            "sequences of the longest length)")
    serve.add_argument("--max-running", type=int, default=0,
                       help="most requests running at once (default: the model's bound)")
    serve.add_argument("--max-waiting", type=int, default=0,
                       help="most requests waiting; more get 503 (default 0: no limit)")
    serve.add_argument("--max-step-tokens", type=int, default=0,
                       help="most tokens one engine step runs (default: the model's bound)")
    serve.add_argument("--no-chunked-prefill", action="store_true",
                       help="prefill each prompt in one step")
    serve.add_argument("--no-prefix-caching", action="store_true",
                       help="never share KV blocks between requests")
    serve.add_argument("--graph-max-batch", type=int, default=0,
                       help="decode steps of up to this many requests replay graphs "
                            "captured per batch-size bucket: one launch per step on a CUDA "
                            "device (default 0: off)")
    serve.add_argument("--chat-template", default=None, metavar="FILE",
                       help="render /v1/chat/completions with this Jinja2 template (or JSON "
                            "file holding 'chat_template') instead of the model's")
    serve.add_argument("--max-body-bytes", type=int, default=1 << 20,
                       help="larger request bodies get 413 (default 1 MiB)")
    spread = serve.add_argument_group(
        "a set across processes", "one process per shard of a tensor-parallel set's directory "
        "(docs/multi-device.md, \"Serving across processes\"): rank 0 serves HTTP and runs "
        "the engine, the other ranks (started the same way, or by torchrun) follow it")
    spread.add_argument("--world-size", type=int, default=None,
                        help="the number of processes (the set's shards); default: WORLD_SIZE")
    spread.add_argument("--rank", type=int, default=None,
                        help="this process's rank; default: RANK")
    spread.add_argument("--rendezvous", default=None,
                        help="where the processes meet: tcp://HOST:PORT (rank 0 serves it), "
                             "file://DIR, or env:// (torchrun's MASTER_ADDR and MASTER_PORT)")
    spread.add_argument("--join-timeout", type=float, default=60.0,
                        help="seconds to wait for every process to join (default 60)")
    spread.add_argument("--heartbeat-timeout", type=float, default=None,
                        help="seconds of silence after which a process counts as lost "
                             "(default 10)")
    serve.add_argument("--log-level", default="info",
                       choices=["critical", "error", "warning", "info", "debug"],
                       help="uvicorn's log level (default info: one line per request)")
    return parser


def _serve(args: argparse.Namespace) -> int:
    from .server import serve

    # SIGTERM ends the process the way SIGINT does: the server shuts down,
    # the engine closes, the exit status is 0.
    def terminate(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    spread = {}
    if args.rendezvous is not None or args.world_size is not None or args.rank is not None:
        from ..distributed import rendezvous_from_env

        if args.devices is not None:
            print("axrt.llm serve: --devices runs a set in one process; a set across processes "
                  "takes --device (this rank's)", file=sys.stderr)
            return 2
        rendezvous = args.rendezvous
        try:
            if rendezvous is None or rendezvous == "env://":
                rendezvous = rendezvous_from_env()
            world_size = args.world_size if args.world_size is not None else int(os.environ["WORLD_SIZE"])
            rank = args.rank if args.rank is not None else int(os.environ["RANK"])
        except (KeyError, ValueError) as e:
            print(f"axrt.llm serve: a set across processes needs --world-size, --rank and "
                  f"--rendezvous (or torchrun's environment): {e}", file=sys.stderr)
            return 2
        if not 0 <= rank < world_size:
            print(f"axrt.llm serve: --rank {rank} is not in a world of {world_size}",
                  file=sys.stderr)
            return 2
        spread = dict(rendezvous=rendezvous, world_size=world_size, rank=rank,
                      join_timeout=args.join_timeout, heartbeat_timeout=args.heartbeat_timeout)
    status = 0
    try:
        status = serve(args.model, host=args.host, port=args.port, device=args.device,
                       devices=args.devices, **spread,
                       api_key=args.api_key, model_name=args.model_name,
                       max_body_bytes=args.max_body_bytes, log_level=args.log_level,
                       chat_template=args.chat_template,
                       num_blocks=args.num_blocks, kv_cache_bytes=args.kv_cache_bytes,
                       max_running=args.max_running, max_waiting=args.max_waiting,
                       max_step_tokens=args.max_step_tokens,
                       chunked_prefill=not args.no_chunked_prefill,
                       prefix_caching=not args.no_prefix_caching,
                       graph_max_batch=args.graph_max_batch)
    except KeyboardInterrupt:
        pass
    return status


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    # Imported here so that --help works without the compiled module.
    import axrt

    from .._extras import MissingExtraError
    from . import UnsupportedModelError, convert, load
    from .checkpoint import CheckpointError

    try:
        if args.command == "convert":
            start = time.perf_counter()
            config = convert(args.hf_dir, args.out, weights=args.weights,
                             max_context=args.max_context, block_size=args.block_size,
                             prefill_chunk=args.prefill_chunk, max_batch=args.max_batch,
                             cuda_fatbin=args.cuda_fatbin, cuda=not args.no_cuda,
                             activations=args.activations,
                             int4_group_size=args.int4_group_size,
                             kv_cache_dtype=args.kv_cache_dtype,
                             fused_kernels=args.fused_kernels,
                             decode_matmuls=args.decode_matmuls,
                             tensor_core_matmuls=args.tensor_core_matmuls,
                             split_attention=args.split_attention,
                             attention_splits=args.attention_splits,
                             flash_attention=args.flash_attention,
                             tensor_parallel=args.tensor_parallel,
                             chat_template=args.chat_template)
            shards = (f" ({args.tensor_parallel} tensor-parallel shards)"
                      if args.tensor_parallel > 1 else "")
            print(f"wrote {args.out}{shards}: {config.architecture}, {config.num_layers} layers, "
                  f"hidden {config.hidden_size}, vocabulary {config.vocab_size}, weights "
                  f"{config.weights}"
                  f"{', activations int8' if config.activations == 'int8' else ''}, "
                  f"{'' if config.kv_cache_dtype == 'f32' else 'KV cache ' + config.kv_cache_dtype + ', '}"
                  f"context {config.max_context} "
                  f"({time.perf_counter() - start:.1f} s)")
            return 0
        if args.command == "serve":
            return _serve(args)
        if args.command == "chat":
            from .chat_terminal import run_chat

            return run_chat(args)

        model = load(args.model, args.device, devices=args.devices)
        if args.prompt is not None:
            if model.tokenizer is None:
                print(f"error: {args.model} carries no tokenizer: use --prompt-ids",
                      file=sys.stderr)
                return 2
            prompt_ids = model.tokenizer.encode(args.prompt).ids
        else:
            prompt_ids = args.prompt_ids
        start = time.perf_counter()
        first = None
        tokens: List[int] = []
        for token in model.stream(prompt_ids, args.max_new_tokens, temperature=args.temperature,
                                  top_k=args.top_k, top_p=args.top_p, seed=args.seed,
                                  stop_ids=args.stop_ids):
            if first is None:
                first = time.perf_counter()
            tokens.append(token)
        end = time.perf_counter()
        if args.prompt is not None:
            print(model.tokenizer.decode(tokens, skip_special_tokens=True))
        else:
            print(" ".join(str(t) for t in tokens))
        if args.stats and first is not None:
            rest = len(tokens) - 1
            rate = f", {rest / (end - first):.1f} tokens/s after the first" if rest > 0 else ""
            print(f"{len(prompt_ids)} prompt tokens, {len(tokens)} generated; first token "
                  f"{(first - start) * 1e3:.1f} ms{rate}", file=sys.stderr)
        return 0
    except (UnsupportedModelError, CheckpointError, MissingExtraError, ValueError, OSError,
            axrt.Error) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
