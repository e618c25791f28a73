#!/usr/bin/python3
"""A byte-level Transformer language model in a plain PyTorch loop, fed by dataecho.

The text counterpart of train_fashion.py, on dict-gcide (the GNU Collaborative
International Dictionary of English, split by scripts/gcide_split.py). The training
pipeline is the one of examples/gcide_train.json, written with the Python builder:

    text (JSON Lines, gzip) -> repeat -> shuffle entries -> tokenize bytes (ids 0-255,
    end of sequence 256) -> pack blocks of context + 1 -> [echo E] -> shuffle blocks
    -> padded_batch -> prefetch

``--echo E`` inserts example echoing after ``pack``, where the paper puts it for its
language models (nothing is augmented: each block is repeated E times in all), with
the block shuffle after it keeping a block's copies out of one batch. The model is a
small causal Transformer (token and position embeddings, pre-norm blocks whose
attention is causal and kept within each packed document, a tied output layer) trained
with AdamW, linear warm-up and linear decay. Every ``--eval-every`` steps the loss on
the first ``--eval-blocks`` blocks of the validation split is measured (nats per target
byte, and bits per byte = loss / ln 2), off the training clock. The run stops at
``--target-loss`` or ``--max-steps`` and writes a JSON summary to ``--out``.

    scripts/gcide_split.py --out out/gcide                # once, a few seconds
    PYTHONPATH=build/python /usr/bin/python3 examples/python/train_text.py --echo 2

A demonstration, not evidence: one seed, one machine (the evidence: docs/lm_protocol.md,
its results in docs/results.md, "The language model").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn
from torch.optim.lr_scheduler import LambdaLR

import dataecho as de

VOCAB = 257  # tokenize "bytes": 0-255 and the end of sequence, 256


def train_pipeline(path: str, context: int, batch: int, echo: float, shuffle_blocks: int) -> de.PipelineDef:
    d = (de.text(path, format="jsonl").repeat().shuffle(10_000)
         .map("tokenize", tokenizer="bytes")
         .pack(context + 1))  # inputs: tokens 0..context-1, targets: tokens 1..context
    if echo > 1:
        d = d.echo(echo)  # after pack: a block is one example; the shuffle below mixes its copies
    return d.shuffle(shuffle_blocks).padded_batch(batch, lengths=False).prefetch(4)


def eval_batches(path: str, context: int, blocks: int) -> List[Dict[str, torch.Tensor]]:
    d = (de.text(path, format="jsonl").map("tokenize", tokenizer="bytes")
         .pack(context + 1).take(blocks).padded_batch(64, lengths=False))
    with d.build() as p:
        return [{"tokens": b["tokens"].long(), "document": b["document"]} for b in p]


class Block(nn.Module):
    """Pre-norm: x + attention(LayerNorm(x)), then x + MLP(LayerNorm(x))."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n, length, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(n, length, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        attention = scores.masked_fill(~mask[:, None], float("-inf")).softmax(-1)
        x = x + self.proj((attention @ v).transpose(1, 2).reshape(n, length, width))
        return x + self.mlp(self.ln2(x))


class LanguageModel(nn.Module):
    def __init__(self, depth: int, width: int, heads: int, context: int) -> None:
        super().__init__()
        self.embed, self.position = nn.Embedding(VOCAB, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.ln = nn.LayerNorm(width)
        for name, p in self.named_parameters():  # GPT-2's: residual outputs scaled by 1/sqrt(2 depth)
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() > 1:
                residual = name.endswith(("proj.weight", "mlp.2.weight"))
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * depth) if residual else 0.02)

    def forward(self, tokens: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
        """Logits [N, L, VOCAB]: token i sees token j when j <= i and both are of one document."""
        length = tokens.shape[1]
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        mask = causal & (document[:, :, None] == document[:, None, :])
        x = self.embed(tokens) + self.position(torch.arange(length))
        for block in self.blocks:
            x = block(x, mask)
        return self.ln(x) @ self.embed.weight.T  # tied output layer


def loss_of(net: LanguageModel, tokens: torch.Tensor, document: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy in nats per target token; a target on padding is not scored."""
    targets = tokens[:, 1:].masked_fill(document[:, 1:] < 0, -100)
    logits = net(tokens[:, :-1], document[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100)


def evaluate(net: LanguageModel, batches: List[Dict[str, torch.Tensor]]) -> float:
    net.eval()
    total = scored = 0.0
    with torch.no_grad():
        for b in batches:
            n = int((b["document"][:, 1:] >= 0).sum())
            total += float(loss_of(net, b["tokens"], b["document"])) * n
            scored += n
    net.train()
    return total / scored


def arguments(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--data", default="out/gcide", help="scripts/gcide_split.py's folder (train/valid.jsonl.gz)")
    ap.add_argument("--echo", type=float, default=1.0, help="echo factor after pack (1: no echo)")
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=64, help="tokens the model sees (blocks hold context + 1)")
    ap.add_argument("--batch", type=int, default=16, help="blocks per batch")
    ap.add_argument("--shuffle-blocks", type=int, default=256, help="the block shuffle's buffer")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup-steps", type=int, default=30)
    ap.add_argument("--final-lr-fraction", type=float, default=0.1, help="lr at --max-steps, as a fraction")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--clip-norm", type=float, default=1.0)
    ap.add_argument("--max-steps", type=int, default=300)
    ap.add_argument("--target-loss", type=float, default=0.0, help="stop at this validation loss (nats/byte)")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-blocks", type=int, default=512, help="validation blocks scored")
    ap.add_argument("--log-every", type=int, default=10, help="steps per point of the training-loss trajectory")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the pipeline has its own)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="out/python_text/summary.json")
    return ap.parse_args(argv)


def optimizer(net: nn.Module, args: argparse.Namespace) -> Tuple[torch.optim.Optimizer, LambdaLR]:
    """AdamW (weight decay on matrices only), linear warm-up, then linear decay to
    final_lr_fraction x lr at max_steps."""
    decay = [p for p in net.parameters() if p.dim() > 1]
    rest = [p for p in net.parameters() if p.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay}, {"params": rest, "weight_decay": 0}],
                            lr=args.lr, betas=(0.9, 0.99))

    def lr_factor(k: int) -> float:
        if k < args.warmup_steps:
            return (k + 1) / args.warmup_steps
        done = min(1.0, (k - args.warmup_steps) / max(1, args.max_steps - args.warmup_steps))
        return 1.0 - done * (1.0 - args.final_lr_fraction)

    return opt, LambdaLR(opt, lr_factor)


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    args = arguments(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    data = Path(args.data)
    if not (data / "train.jsonl.gz").exists():
        sys.exit(f"train_text: no {data / 'train.jsonl.gz'} (run scripts/gcide_split.py --out {data} first)")
    valid = eval_batches(str(data / "valid.jsonl.gz"), args.context, args.eval_blocks)
    net = LanguageModel(args.depth, args.width, args.heads, args.context)
    opt, schedule = optimizer(net, args)
    params = sum(p.numel() for p in net.parameters())
    print(f"train_text: {params:,} parameters; echo {args.echo:g}; {len(valid)} validation batches", flush=True)

    step = fresh = 0
    window: List[float] = []
    losses: List[Dict[str, float]] = []
    evals: List[Dict[str, float]] = []
    eval_s = wait_s = 0.0
    t0 = ready = time.monotonic()
    pipeline = train_pipeline(str(data / "train.jsonl.gz"), args.context, args.batch, args.echo, args.shuffle_blocks)
    with pipeline.build(seed=args.seed) as p:
        for batch in p:
            wait_s += time.monotonic() - ready  # the training loop waiting for its next batch
            loss = loss_of(net, batch["tokens"].long(), batch["document"])
            opt.zero_grad()
            loss.backward()
            if args.clip_norm > 0:
                nn.utils.clip_grad_norm_(net.parameters(), args.clip_norm)
            opt.step()
            schedule.step()
            step += 1
            fresh += batch.fresh_rows  # blocks read from the file, not repeated by the echo
            window.append(float(loss))
            if step % args.log_every == 0:
                losses.append({"step": step, "train_loss": sum(window) / len(window)})
                window.clear()
            if step % args.eval_every == 0 or step == args.max_steps:
                e0 = time.monotonic()
                val = evaluate(net, valid)
                eval_s += time.monotonic() - e0
                seconds = time.monotonic() - t0 - eval_s  # training time: evaluations left out
                evals.append({"step": step, "fresh": fresh, "seconds": round(seconds, 2), "loss": val,
                              "bits_per_byte": val / math.log(2)})
                print(f"  step {step:5d} | fresh {fresh:6d} blocks | {step / seconds:5.2f} steps/s | "
                      f"valid loss {val:.3f} nats, {val / math.log(2):.3f} bits/byte | {seconds:6.1f}s", flush=True)
                if val <= args.target_loss or step >= args.max_steps:
                    break
            ready = time.monotonic()
        stats = p.stats()
    echo_stage = next((s for s in stats.values() if s["name"].endswith(":echo")), None)
    hit = next((e for e in evals if e["loss"] <= args.target_loss), None)
    summary = {
        "args": vars(args), "parameters": params, "steps": step,
        "examples": step * args.batch, "fresh_examples": fresh, "echoed_examples": step * args.batch - fresh,
        "fresh_target_bytes": fresh * args.context,  # each block scores context bytes
        "echo_stage_counters": echo_stage["counters"] if echo_stage else None,  # incl. blocks read ahead
        "reached_target": hit is not None, "fresh_to_target": hit["fresh"] if hit else None,
        "seconds_to_target": hit["seconds"] if hit else None,
        "final_loss": evals[-1]["loss"] if evals else None,
        "final_bits_per_byte": evals[-1]["bits_per_byte"] if evals else None,
        "train_seconds": evals[-1]["seconds"] if evals else None, "wait_seconds": round(wait_s, 2),
        "eval_seconds": round(eval_s, 2),
        "wall_seconds": round(time.monotonic() - t0, 2), "evals": evals, "train_losses": losses,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"train_text: {step} steps, {fresh} fresh blocks of {step * args.batch}, {wait_s:.1f}s of the "
          f"training time waiting for data, {eval_s:.1f}s evaluating; wrote {out}", flush=True)
    return summary


if __name__ == "__main__":
    main()
