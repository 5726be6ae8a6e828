"""``python -m axrt.llm chat MODEL``: a chat in the terminal, on the serving engine, rendered
with the model's chat template and streamed as it is generated (docs/serving.md, "Chat").

Each line read is a user message; the reply streams to standard output.
``/reset`` forgets the conversation, ``/exit`` (or end of input) ends it.
Ctrl-C while a reply streams stops that reply; at the prompt it ends the chat.
"""
from __future__ import annotations

import argparse
import secrets
import sys
from typing import Dict, List, Optional, TextIO

from .chat import ChatError, ChatTemplate
from .detokenize import Completion
from .engine import Engine


class Chat:
    """A conversation with `engine`: :meth:`reply` adds a user message and streams the
    assistant's answer to `out`, which joins the conversation."""

    def __init__(self, engine: Engine, template: ChatTemplate, *, system: Optional[str] = None,
                 max_tokens: int = 512, seed: Optional[int] = None,
                 **sampling) -> None:
        if engine.tokenizer is None:
            raise ChatError("the model carries no tokenizer: it cannot chat")
        self.engine = engine
        self.template = template
        self.system = system
        self.max_tokens = int(max_tokens)
        self.seed = seed
        self.sampling = {k: v for k, v in sampling.items() if v is not None}
        self.messages: List[Dict[str, str]] = []
        self.reset()

    def reset(self) -> None:
        self.messages = [] if self.system is None else [{"role": "system",
                                                         "content": self.system}]

    def reply(self, text: str, out: TextIO) -> str:
        """Adds the user's `text`, streams the reply to `out` and returns it. ChatError when
        the conversation no longer fits the context (nothing is added then)."""
        messages = self.messages + [{"role": "user", "content": text}]
        ids = self.template.prompt_ids(self.engine.tokenizer, messages)
        room = self.engine.max_context - int(ids.size)
        if room < 1:
            raise ChatError(f"the conversation ({ids.size} tokens) no longer fits the model's "
                            f"context of {self.engine.max_context}: /reset starts again")
        seed = self.seed if self.seed is not None else secrets.randbits(63)
        request = self.engine.submit(ids, min(self.max_tokens, room), seed=seed,
                                     **self.sampling)
        completion = Completion(self.engine.tokenizer, ids, (), None)
        parts = []
        try:
            for event in request:
                if event.token >= 0:
                    piece, _ = completion.add(event)
                    parts.append(piece)
                    out.write(piece)
                    out.flush()
            rest, _ = completion.finish()
        finally:
            request.cancel()
        parts.append(rest)
        out.write(rest + "\n")
        out.flush()
        answer = "".join(parts)
        self.messages = messages + [{"role": "assistant", "content": answer}]
        return answer


def run_chat(args: argparse.Namespace) -> int:
    """The command: reads user messages from standard input until /exit or its end."""
    with Engine(args.model, args.device, devices=args.devices) as engine:
        template = engine.chat_template
        if args.chat_template is not None:
            template = ChatTemplate.from_file(
                args.chat_template, template.special_tokens if template is not None else None)
        if template is None:
            print(f"error: {args.model} carries no chat template: give one with "
                  "--chat-template FILE", file=sys.stderr)
            return 1
        options = {"min_p": args.min_p or None,
                   "repetition_penalty": (args.repetition_penalty
                                          if args.repetition_penalty != 1.0 else None)}
        chat = Chat(engine, template, system=args.system, max_tokens=args.max_tokens,
                    seed=args.seed, temperature=args.temperature, top_p=args.top_p,
                    top_k=args.top_k, **options)
        interactive = sys.stdin.isatty()
        if interactive:
            print(f"chatting with {args.model} (/reset forgets, /exit or Ctrl-D ends)",
                  file=sys.stderr)
        while True:
            try:
                line = input("> " if interactive else "")
            except (EOFError, KeyboardInterrupt):
                if interactive:
                    print(file=sys.stderr)
                return 0
            command = line.strip()
            if command == "/exit":
                return 0
            if command == "/reset":
                chat.reset()
                continue
            if not command:
                continue
            try:
                chat.reply(line, sys.stdout)
            except KeyboardInterrupt:
                print("\n[stopped]", file=sys.stderr)
            except ChatError as e:
                print(f"error: {e}", file=sys.stderr)
