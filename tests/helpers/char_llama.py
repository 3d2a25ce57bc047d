"""llama-cpp-python's token interface with one token per character (eos 7), the part the test fakes share."""

from __future__ import annotations


class CharTokens:
    """Tokens are characters offset by 1000; token 7 is the end of a turn (`<|im_end|>`)."""

    def token_eos(self):
        return 7

    def token_bos(self):
        return -1

    def set_seed(self, seed):
        self.seed = seed

    def tokenize(self, data, add_bos=True, special=True):
        return [ord(c) + 1000 for c in data.decode()]

    def detokenize(self, tokens, prev_tokens=None, special=False):
        return "".join("<|im_end|>" if t == 7 else chr(t - 1000) for t in tokens).encode()
