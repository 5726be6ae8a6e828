"""Generated tokens to the text a client sees (docs/serving.md, "Text" and
"Log-probabilities"), for :mod:`axrt.llm.server`.

:class:`IncrementalDecoder` (or :class:`IdDecoder`, for a model without a
tokenizer) turns the tokens into text a piece at a time;
:class:`StopMatcher` cuts that text at the first stop string;
:class:`TokenTexts` names single tokens for log-probabilities; and
:class:`Completion` puts them together for one request.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from .engine import TokenEvent

_REPLACEMENT = "\ufffd"


_BYTE_TOKENS: Dict[int, Tuple[object, frozenset]] = {}


def byte_fallback_ids(tokenizer) -> frozenset:
    """The ids of a tokenizer's byte tokens (``<0x00>``..``<0xFF>``) when its decoder turns
    them back into bytes (SentencePiece's byte fallback), else an empty set. Its decoder
    decodes each run of byte tokens as a whole, and a run that is not UTF-8 as one U+FFFD
    per token: a byte already decoded can still change while its run goes on."""
    entry = _BYTE_TOKENS.get(id(tokenizer))
    if entry is None or entry[0] is not tokenizer:
        decoder = json.loads(tokenizer.to_str()).get("decoder") or {}
        kinds = {d.get("type") for d in decoder.get("decoders", [decoder])}
        ids = frozenset()
        if "ByteFallback" in kinds:
            found = (tokenizer.token_to_id(f"<0x{b:02X}>") for b in range(256))
            ids = frozenset(t for t in found if t is not None)
        entry = _BYTE_TOKENS[id(tokenizer)] = (tokenizer, ids)
    return entry[1]


class IncrementalDecoder:
    """Generated token ids to text, a piece per token.

    Decodes the ids generated so far (after a few prompt tokens of context,
    so that a tokenizer that drops a leading space does not drop the one
    between prompt and completion) and hands out what is new; holds text
    back while it ends with U+FFFD (a character whose bytes have not all
    come) and while the last token is a byte token of a byte-fallback
    tokenizer (whose run of bytes decodes as a whole). Every `rebase` tokens
    the context moves forward (never inside a run of byte tokens), so that
    a token costs a bounded amount of decoding. What it hands out adds up
    to the whole decoded at once.
    """

    CONTEXT = 8
    REBASE = 64

    def __init__(self, tokenizer, context: Sequence[int] = ()) -> None:
        self._tokenizer = tokenizer
        self._byte_ids = byte_fallback_ids(tokenizer)
        self._ids: List[int] = []
        self._base = 0
        self._window = ""
        self._set_context([int(t) for t in context[-self.CONTEXT:]])
        #: Everything handed out so far.
        self.text = ""

    def _decode(self, ids: List[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=True)

    def _set_context(self, ids: List[int]) -> bool:
        base = self._decode(ids) if ids else ""
        if base.endswith(_REPLACEMENT):
            return False
        self._ids, self._base, self._window = ids, len(base), ""
        return True

    def _advance(self, full: str) -> str:
        new = full[self._base:]
        delta = new[len(self._window):] if len(new) > len(self._window) else ""
        self._window = new
        self.text += delta
        return delta

    def push(self, token: int) -> str:
        """The text `token` completes (often all of its own; "" while a character is
        incomplete)."""
        self._ids.append(int(token))
        if self._ids[-1] in self._byte_ids:
            return ""
        full = self._decode(self._ids)
        if full.endswith(_REPLACEMENT):
            return ""
        delta = self._advance(full)
        if len(self._ids) >= self.REBASE:
            start = len(self._ids) - self.CONTEXT
            while start > 0 and self._ids[start - 1] in self._byte_ids:
                start -= 1  # the context begins where a run of byte tokens does
            self._set_context(self._ids[start:])
        return delta

    def flush(self) -> str:
        """The text held back at the end (incomplete characters as U+FFFD)."""
        return self._advance(self._decode(self._ids))


class IdDecoder:
    """The text of a model without a tokenizer: the generated ids in decimal, separated by
    single spaces ("464 11 9")."""

    def __init__(self) -> None:
        self.text = ""

    def push(self, token: int) -> str:
        piece = f" {int(token)}" if self.text else str(int(token))
        self.text += piece
        return piece

    def flush(self) -> str:
        return ""


class StopMatcher:
    """Cuts text at the first stop string; never hands out a stop string, even one split
    over several pieces: it holds back any end of the text that could begin one."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [s for s in stops if s]
        self._held = ""
        self.stopped = False
        #: Characters handed out so far.
        self.emitted = 0

    def feed(self, text: str) -> str:
        """The part of `text` (after what was held back) that can be handed out now."""
        if self.stopped:
            return ""
        buf = self._held + text
        cuts = [i for i in (buf.find(s) for s in self.stops) if i >= 0]
        if cuts:
            out, self._held, self.stopped = buf[:min(cuts)], "", True
        else:
            hold = 0
            for s in self.stops:
                for k in range(min(len(s) - 1, len(buf)), hold, -1):
                    if buf.endswith(s[:k]):
                        hold = k
                        break
            out, self._held = buf[:len(buf) - hold], buf[len(buf) - hold:]
        self.emitted += len(out)
        return out

    def flush(self) -> str:
        """What was held back, once no more text comes (it held no stop string)."""
        out, self._held = ("", "") if self.stopped else (self._held, "")
        self.emitted += len(out)
        return out


def _byte_level_table() -> Dict[str, int]:
    """The characters a byte-level BPE vocabulary writes bytes as (GPT-2's), to the bytes."""
    visible = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
               + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    table, extra = {}, 0
    for b in range(256):
        if b in visible:
            table[chr(b)] = b
        else:
            table[chr(256 + extra)] = b
            extra += 1
    return table


class TokenTexts:
    """The text of single tokens, for log-probabilities: the token decoded on its own, or
    where that is not whole characters, its bytes as OpenAI writes them (``bytes:\\xe2``).
    Without a tokenizer, the id in decimal."""

    def __init__(self, tokenizer) -> None:
        self._tokenizer = tokenizer
        self._cache: Dict[int, str] = {}
        self._byte_level: Optional[Dict[str, int]] = None
        if tokenizer is not None:
            decoder = json.loads(tokenizer.to_str()).get("decoder") or {}
            kinds = {d.get("type") for d in decoder.get("decoders", [decoder])}
            if "ByteLevel" in kinds:
                self._byte_level = _byte_level_table()

    def _bytes(self, token: int) -> Optional[bytes]:
        piece = self._tokenizer.id_to_token(token)
        if piece is None:
            return None
        if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", piece):
            return bytes([int(piece[3:5], 16)])
        if self._byte_level is not None and all(c in self._byte_level for c in piece):
            return bytes(self._byte_level[c] for c in piece)
        return None

    def bytes_of(self, token: int) -> List[int]:
        """The token's bytes (the chat API's ``bytes``): its raw bytes where the vocabulary
        says them, else its text's UTF-8."""
        raw = self._bytes(token) if self._tokenizer is not None else None
        if raw is None:
            raw = self(token).encode("utf-8")
        return list(raw)

    def __call__(self, token: int) -> str:
        text = self._cache.get(token)
        if text is None:
            if self._tokenizer is None:
                text = str(token)
            else:
                text = self._tokenizer.decode([token], skip_special_tokens=False)
                if _REPLACEMENT in text:
                    raw = self._bytes(token)
                    if raw is not None:
                        text = "bytes:" + "".join(f"\\x{b:02x}" for b in raw)
            self._cache[token] = text
        return text


@dataclass
class _TokenEntry:
    text: str
    logprob: Optional[float]
    top: Any  # completions: {text: logprob}; chat: [{"token", "logprob", "bytes"}]
    start: int
    end: int
    token: int = -1


class Completion:
    """The text and log-probabilities of one completion, token by token.

    :meth:`add` takes each generated token (a :class:`TokenEvent`) and
    returns the text that may be sent now and the log-probabilities of the
    tokens whose text has all been sent; :attr:`stopped` turns True when a
    stop string appeared (the text ends before it). :meth:`finish` returns
    the rest. Log-probabilities come as the completions API writes them
    (``tokens``, ``token_logprobs``, ``top_logprobs``, ``text_offset``), or
    with `chat` as the chat API does (``content``: a list of ``token``,
    ``logprob``, ``bytes`` and ``top_logprobs``).
    """

    def __init__(self, tokenizer, prompt: Sequence[int], stops: Sequence[str],
                 logprobs: Optional[int], tokens_as_ids: bool = False,
                 token_texts: Optional[TokenTexts] = None, chat: bool = False) -> None:
        self._chat = chat
        self._decoder = IdDecoder() if tokenizer is None else IncrementalDecoder(tokenizer, prompt)
        self._matcher = StopMatcher(stops)
        self._logprobs = logprobs
        self._tokens_as_ids = tokens_as_ids
        self._token_texts = token_texts
        if logprobs is not None and token_texts is None and not tokens_as_ids:
            self._token_texts = TokenTexts(tokenizer)
        self._entries: List[_TokenEntry] = []
        self._decoded = 0
        #: The tokens taken so far.
        self.tokens: List[int] = []
        #: The engine's message when the request failed.
        self.error: Optional[str] = None

    @property
    def stopped(self) -> bool:
        return self._matcher.stopped

    def _token_text(self, token: int) -> str:
        if self._tokens_as_ids:
            return f"token_id:{token}"
        return self._token_texts(token)

    def add(self, event: TokenEvent) -> Tuple[str, Optional[Dict[str, list]]]:
        self.tokens.append(event.token)
        piece = self._decoder.push(event.token)
        start = self._decoded
        self._decoded += len(piece)
        if self._logprobs is not None:
            top = None
            alternatives = (event.top_logprobs or [])[:self._logprobs]
            if self._chat:
                top = [self._chat_entry(t, p) for t, p in alternatives]
            elif self._logprobs > 0:
                top = {self._token_text(t): p for t, p in alternatives}
                # As OpenAI's: the chosen token is always among the alternatives.
                top.setdefault(self._token_text(event.token), event.logprob)
            self._entries.append(_TokenEntry(self._token_text(event.token), event.logprob, top,
                                             start, self._decoded, event.token))
        text = self._matcher.feed(piece)
        return text, self._take_logprobs(final=False)

    def finish(self) -> Tuple[str, Optional[Dict[str, list]]]:
        text = ""
        if not self.stopped:
            piece = self._decoder.flush()
            self._decoded += len(piece)
            if self._entries and piece:
                self._entries[-1].end = self._decoded
            text = self._matcher.feed(piece)
            text += self._matcher.flush()
        return text, self._take_logprobs(final=True)

    def _chat_entry(self, token: int, logprob: Optional[float]) -> Dict[str, Any]:
        if self._tokens_as_ids:
            raw = list(f"token_id:{token}".encode())
        else:
            raw = self._token_texts.bytes_of(token)
        return {"token": self._token_text(token), "logprob": logprob, "bytes": raw}

    def _take_logprobs(self, final: bool) -> Optional[Dict[str, list]]:
        if self._logprobs is None:
            return None
        # Offsets only grow from entry to entry, so the entries ready form a prefix.
        sent, entries = self._matcher.emitted, self._entries
        if not final:
            n = next((i for i, e in enumerate(entries) if e.end > sent), len(entries))
        elif self.stopped:
            n = next((i for i, e in enumerate(entries) if e.start >= sent), len(entries))
        else:
            n = len(entries)
        ready, self._entries = entries[:n], entries[n:] if not final else []
        if self._chat:
            return {"content": [{**self._chat_entry(e.token, e.logprob), "top_logprobs": e.top}
                                for e in ready]}
        return {"tokens": [e.text for e in ready],
                "token_logprobs": [e.logprob for e in ready],
                "top_logprobs": None if self._logprobs == 0 else [e.top for e in ready],
                "text_offset": [e.start for e in ready]}
