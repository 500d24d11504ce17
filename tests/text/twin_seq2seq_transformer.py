#!/usr/bin/env python3
"""PyTorch twin of `d5 train --model seq2seq-transformer` on number-words: PyTorch's own
nn.Transformer with the zoo model's sizes (d_model 64, 4 heads, 2 encoder and 2 decoder layers,
feed-forward 256, dropout 0.1, post-norm, ReLU), token embeddings of unit variance (unscaled) plus
the sinusoidal position encoding, a linear layer to the vocabulary; Adam, whole shuffled batches,
teacher forcing on `d5 data export`'s NPY files (inputs, decoder_input, labels). Its test pass
decodes the way a deployed model does, one position at a time (the decoder re-run on the growing
prefix, not d5's fixed-length passes), and prints the exact match after each epoch as one JSON
line: the fraction of test numbers whose decoded pieces, end token included, equal the labels.

Usage: twin_seq2seq_transformer.py TRAIN_DIR TEST_DIR --vocabulary V --source-length S
       [--epochs E] [--batch B] [--lr LR] [--seed S]
"""
import math
import sys
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
import twin_classifier  # noqa: E402

MODEL, HEADS, FEED_FORWARD, LAYERS, DROPOUT = 64, 4, 256, 2, 0.1


def position_encoding(length):
    pe = torch.zeros(length, MODEL)
    for pos in range(length):
        for i in range(0, MODEL, 2):
            angle = pos / 10000 ** (i / MODEL)
            pe[pos, i], pe[pos, i + 1] = math.sin(angle), math.cos(angle)
    return pe


class Seq2seqTransformer(nn.Module):
    def __init__(self, vocabulary, source_length):
        super().__init__()
        self.source_length = source_length
        self.src_embedding = nn.Embedding(vocabulary, MODEL)
        self.tgt_embedding = nn.Embedding(vocabulary, MODEL)
        nn.init.uniform_(self.src_embedding.weight, -math.sqrt(3), math.sqrt(3))
        nn.init.uniform_(self.tgt_embedding.weight, -math.sqrt(3), math.sqrt(3))
        self.dropout = nn.Dropout(DROPOUT)
        self.transformer = nn.Transformer(MODEL, HEADS, LAYERS, LAYERS, FEED_FORWARD, DROPOUT, batch_first=True)
        self.generator = nn.Linear(MODEL, vocabulary)
        self.register_buffer("pe", position_encoding(64))

    def embed(self, embedding, ids):
        return self.dropout(embedding(ids) + self.pe[: ids.shape[1]])

    def encode(self, source):
        return self.transformer.encoder(self.embed(self.src_embedding, source))

    def decode(self, memory, prefix):
        mask = self.transformer.generate_square_subsequent_mask(prefix.shape[1])
        return self.generator(self.transformer.decoder(self.embed(self.tgt_embedding, prefix), memory, tgt_mask=mask))

    def forward(self, joined):  # [N, S + T]: source ids, then the decoder's ids (teacher forcing)
        source, target = joined[:, : self.source_length], joined[:, self.source_length:]
        return self.decode(self.encode(source), target)


def sequence_loss(logits, labels):
    return nn.functional.cross_entropy(logits.transpose(1, 2), labels, ignore_index=-100)


def exact_match(model, tx, ty):
    """Greedy decoding one position at a time from the start token (the decoder input's first id)."""
    right = 0
    with torch.no_grad():
        for b in range(0, len(ty), 256):
            joined, labels = tx[b:b + 256], ty[b:b + 256]
            memory = model.encode(joined[:, : model.source_length])
            prefix = joined[:, model.source_length:model.source_length + 1]
            for _ in range(labels.shape[1]):
                best = model.decode(memory, prefix)[:, -1].argmax(-1, keepdim=True)
                prefix = torch.cat([prefix, best], dim=1)
            decoded = prefix[:, 1:]
            labelled = labels != -100
            right += int(((decoded == labels) | ~labelled).all(dim=1).sum())
    return right / len(ty)


def main():
    a = twin_classifier.arguments(__doc__, 0.001, [("--vocabulary", int, None), ("--source-length", int, None)])
    torch.manual_seed(a.seed)
    twin_classifier.train(Seq2seqTransformer(a.vocabulary, a.source_length), a, loss=sequence_loss,
                          measure=("exact_match", exact_match), loader=twin_classifier.load_with_decoder_input)


if __name__ == "__main__":
    main()
