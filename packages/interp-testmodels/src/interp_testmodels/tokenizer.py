"""Which tokenizer do the tiny test models share, and how is it made without a model hub?

Every test model is saved with the same small byte-level BPE tokenizer, trained here in a few
milliseconds on a fixed English corpus written for this purpose. Byte-level means any string
round-trips, so tests may feed arbitrary text; a fixed corpus and trainer settings make the
vocabulary identical on every machine and every run, so token ids in expected values are stable.

Special tokens take the first ids, in this order, and every family's config uses them:

- 0 `<|endoftext|>`: beginning, end and unknown token (GPT-2 style: one token for all three);
- 1 `<pad>`: padding, distinct from the end token so padded batches can be told apart;
- 2 `<|im_start|>` and 3 `<|im_end|>`: the ChatML markers the chat template writes.

No beginning-of-sequence token is prepended: a prompt of 12 tokens is 12 positions, which keeps
shapes in tests readable.
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from transformers import PreTrainedTokenizerFast

__all__ = [
    "BOS_TOKEN_ID",
    "CHAT_TEMPLATE",
    "EOS_TOKEN_ID",
    "PAD_TOKEN_ID",
    "SPECIAL_TOKENS",
    "TEST_PROMPT",
    "TOKENIZER_VOCAB_SIZE",
    "build_tokenizer",
    "pin_tokenizer_class",
    "tokenizer_fingerprint",
]

SPECIAL_TOKENS = ("<|endoftext|>", "<pad>", "<|im_start|>", "<|im_end|>")
BOS_TOKEN_ID = 0
EOS_TOKEN_ID = 0
PAD_TOKEN_ID = 1

# The trainer's target, special tokens included; the models' embedding tables have exactly this
# many rows, so every id a model can emit decodes to a real token.
TOKENIZER_VOCAB_SIZE = 1000

# Twelve tokens with this tokenizer (a test checks it). Sliding windows in the family configs are
# shorter than this, so the prompt crosses every window.
TEST_PROMPT = "The capital of France is Paris, and the"

# ChatML, the format most instruction-tuned checkpoints use; tests of chat helpers need a template
# that marks each message's span with tokens of its own.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Written for this tokenizer: varied everyday prose so the merges reach the target vocabulary
# (a short corpus runs out of pairs to merge long before 1000 entries) and common English words
# in test prompts become single tokens.
_CORPUS = """\
The capital of France is Paris, and the river there is the Seine.
The capital of Germany is Berlin; the capital of Italy is Rome; the capital of Spain is Madrid.
Japan has its capital in Tokyo, while Canada keeps its government in Ottawa.
A small model reads a prompt one token at a time and predicts the next token.
Every layer adds something to the residual stream, and the final norm prepares it for the head.
Attention lets each position look back at earlier positions and gather what it needs.
The keys and the queries meet in a dot product; the values carry the information forward.
When the window slides, a token can only see a few neighbours behind it.
Experts in a mixture are chosen by a router, and only the best two of them run for each token.
She walked to the market on Monday morning to buy bread, cheese, apples and fresh milk.
He cooked a simple dinner of rice, beans and roasted vegetables for his three friends.
The children played football in the park until the sun went down behind the hills.
Our team will meet again next Thursday afternoon to review the design and plan the release.
Please write a short answer, then explain your reasoning in two or three clear sentences.
What is the weather like today? It is cold and windy, with a chance of rain in the evening.
Water boils at one hundred degrees Celsius at sea level and freezes at zero.
The moon orbits the earth, and the earth orbits the sun once every year.
Light travels faster than sound, which is why we see lightning before we hear thunder.
A triangle has three sides, a square has four, and a hexagon has six equal sides.
Numbers such as 1, 2, 3, 10, 42, 100 and 2024 appear in many ordinary sentences.
def add(a, b): return a + b  # a tiny function written in Python
for item in items: print(item)  # loops are common in code
if value is None: raise ValueError("value must not be empty")
import numpy as np; x = np.zeros((4, 8)); y = x.sum(axis=0)
The library loads a model, captures activations, and steers the generation with a vector.
Researchers compare the hidden states of two engines to check that both compute the same thing.
History teaches that great cities grow near rivers, harbours and busy trade roads.
Music, painting and poetry have shaped every culture that people have ever built.
The doctor told the patient to rest, drink water, and come back in a week.
A good teacher asks questions that help students discover the answer for themselves.
Mountains rise above the clouds, and their snow melts into streams every spring.
The train leaves the station at seven o'clock and arrives in the city before noon.
Farmers plant wheat in autumn and harvest it in the long dry days of summer.
The ocean covers most of the planet and holds countless kinds of fish and plants.
Birds fly south for the winter and return north when the days grow warm again.
Reading books every evening improves vocabulary, patience and the ability to focus.
The engineer measured the speed, the memory and the cost before choosing a design.
Hello! How are you? I am fine, thank you. Could you help me with a question?
Yes, of course. Tell me what you need and I will do my best to answer it.
The quick brown fox jumps over the lazy dog while the cat sleeps by the warm fire.
Blue, red, green, yellow, purple, orange, black and white are common colour names.
January, February, March, April, May, June, July, August, September, October, November, December.
One, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve, thirteen.
Sunday, Monday, Tuesday, Wednesday, Thursday, Friday and Saturday make up the week.
The committee approved the budget after a long debate about schools, roads and hospitals.
Scientists observed the stars through a telescope and recorded their positions each night.
The museum opened a new exhibition of ancient coins, maps, tools and jewellery.
An apple a day keeps the doctor away, or so the old saying goes.
Translate the sentence into French: the cat is sleeping on the chair near the window.
Summarize the article in one paragraph and list the three most important points.
The assistant answered politely, and the user thanked it for the helpful reply.
Gradient descent updates the weights a little at every step to reduce the loss.
Silver, gold, copper, iron and tin were traded across the sea for many centuries.
The kitchen smelled of coffee, cinnamon and warm bread early in the morning.
Elephants, lions, zebras and giraffes live together on the wide African plains.
The storm knocked down trees and power lines, so the town was dark for two days.
Careful testing finds mistakes early, when they are still cheap and easy to fix.
"""


@functools.cache
def _trained_tokenizer_json() -> str:
    # Training is cached as JSON text, not as an object: each caller gets its own tokenizer to
    # mutate or save, and the work happens once per process.
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TOKENIZER_VOCAB_SIZE,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_CORPUS.splitlines(), trainer=trainer)
    return tokenizer.to_str()


def tokenizer_fingerprint() -> str:
    """A digest of everything the tokenizer is made from, for cache keys (no training needed)."""
    recipe = "\x00".join(
        [_CORPUS, *SPECIAL_TOKENS, str(TOKENIZER_VOCAB_SIZE), CHAT_TEMPLATE, "bpe-bytelevel-1"]
    )
    return hashlib.sha256(recipe.encode()).hexdigest()[:16]


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A fresh `PreTrainedTokenizerFast` over the shared test vocabulary, with the chat template."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(_trained_tokenizer_json()),
        bos_token=SPECIAL_TOKENS[BOS_TOKEN_ID],
        eos_token=SPECIAL_TOKENS[EOS_TOKEN_ID],
        unk_token=SPECIAL_TOKENS[EOS_TOKEN_ID],
        pad_token=SPECIAL_TOKENS[PAD_TOKEN_ID],
        additional_special_tokens=list(SPECIAL_TOKENS[2:]),
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def pin_tokenizer_class(folder: Path) -> None:
    """Name the tokenizer class of a saved folder `PreTrainedTokenizerFast`, which loads in
    transformers 4 and 5 alike: transformers 5 records `TokenizersBackend`, which transformers 4
    and some reference engines cannot import (the test families and the SmolLM2 conversion)."""
    path = folder / "tokenizer_config.json"
    data = json.loads(path.read_text())
    data["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
