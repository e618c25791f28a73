// echo: data echoing (Choi et al. 2019, "Faster Neural Network Training with Data
// Echoing"). Re-emits the elements of the stage before it, so that the stages after it
// (and the trainer) get more elements than the stages before it had to produce. Where
// it is placed chooses the paper's variant: after decode and before a shuffle and the
// augment map (example echoing before augmentation: each copy is augmented on its own,
// because random map functions draw from (seed, id, echo index)); after augmentation
// (identical copies); after `batch` (batch echoing: the same batch again, every row's
// echo index raised). Copies share their tensors' buffers: a copy costs a pointer.
//
// Each copy carries its echo index: the input's own index plus k for its k-th repeat
// (0 for the element as it came in), so a batch knows how many of its rows are fresh.
//
// Fixed mode (`adaptive = false`): each input element is emitted floor(factor) times,
// plus once more with probability factor - floor(factor), drawn from a seeded Rng, so
// the mean number of copies is `factor`. Deterministic: the output is a function of the
// input and the seed (and the epoch, under `repeat`, and the lane, in a lane of an
// elastic pipeline: ops/elastic.h). Buffers one element (the one being repeated); no
// threads; input errors pass through unchanged. save()/restore() keep the held element,
// the repeats left and the Rng state.
//
// Adaptive mode (`adaptive = true`): a background thread runs the input ahead into a
// queue of at most `buffer` fresh elements and `buffer_bytes` bytes. next() returns the
// oldest fresh element if one is ready. If none is ready, it re-emits an element already
// emitted, out of a pool of the most recent fresh elements (again at most `buffer` of
// them and `buffer_bytes`): the one emitted the fewest times so far
// (ties broken by the seeded Rng). An element is emitted at most floor(max_factor) times
// in all (echo index < floor(max_factor)); it leaves the pool when it reaches that, or
// when a newer fresh element needs its slot (the most-repeated, then oldest, goes). If
// the pool is empty, next() blocks for the next fresh element. A repeat is never
// emitted while a fresh element is waiting, and nothing is repeated after the input
// has ended. So with a fast input there are (almost) no repeats, and with an input R
// times slower than the consumer the achieved factor tracks R, capped at max_factor.
// This mode DEPENDS ON TIMING: which elements are repeated, and how often, varies from
// run to run; use fixed mode when the stream must be reproducible. Buffers at most
// 2 * `buffer` elements and about 2 * `buffer_bytes` (queue plus pool; each may pass its
// bytes by one element, and always holds one) plus the one the thread is fetching.
// Why the queue is large by default: with the old default of 8 elements, adaptive echo
// at R about 2 on Fashion-MNIST over throttled HTTP read half as many records per second
// as the same pipeline without echo and settled at its cap (2.95 of 3) instead of at R:
// the reader stalled on a full queue between the network's bursts, and the consumer
// repeated instead of waiting. 64 elements gave 2.52, 512 gave R (1.39-1.49 at R 1.45)
// at the baseline's read rate (docs/results.md, "Adaptive echo at R about 2"). Elements
// differ in size by orders of magnitude (a 784-byte image, a 20 MB batch), so the bound
// is in elements and in bytes, whichever binds first.
// An input error is delivered in order, after the fresh elements queued before it, and
// ends the stream. Destroying the iterator cancels and joins the thread, whether it is
// waiting for room or inside the input's next(). save() pauses the thread and writes
// the queue, the pool with each element's copy count and the Rng; restore() resumes
// with no fresh element lost or duplicated (the repeats that follow depend on timing).
//
// Tuned mode (`adaptive = true, autotune = true`; "factor": "auto" in the spec): adaptive
// echo whose cap on the copies of an element is a knob of the pipeline's tuner
// (core/tuner.h), from 1 (no repeats: the echo passes its input through) up to
// floor(max_factor). The tuner raises it, straight to floor(max_factor), only when the
// consumer waits and it has no other setting left to raise (every tuned map and buffer is
// at its limit, over a budget or was tried without gain): the gap that tuning cannot
// close, echo fills. It keeps the raise if the echo's output rate rose, and takes it back
// otherwise. Timing-dependent like adaptive mode. Outside a Pipeline (no tuner) the cap
// stays 1.
//
// Stats, per echo node: counters "fresh" (rows emitted as copy 0) and "echoed" (rows
// emitted as repeats), and the value "achieved_factor" = (fresh + echoed) / fresh; tuned,
// also the value "max_copies" (the cap the tuner set).
//
// Thread-safety: like every iterator, one consumer thread at a time.
#pragma once

#include <cstdint>

#include "dataecho/core/dataset.h"

namespace dataecho {

struct EchoOptions {
  double factor = 2;      // fixed mode: mean copies per element, >= 1 (1: the identity)
  bool adaptive = false;  // adaptive mode: `factor` is ignored
  double max_factor = 4;  // adaptive mode: at most floor(max_factor) copies per element, >= 1
  // Adaptive mode: fresh elements queued ahead, and repeat candidates kept, at most this
  // many of each (>= 1) and at most `buffer_bytes` bytes of each (0: no byte bound).
  int64_t buffer = 1024;
  int64_t buffer_bytes = int64_t{16} << 20;
  uint64_t seed = 0;      // fractional repeats (fixed), tie-breaking (adaptive)
  bool autotune = false;  // adaptive mode: the tuner sets the cap, 1..floor(max_factor)
};

// Largest factor / max_factor accepted (echo indices are 32-bit).
inline constexpr double kMaxEchoFactor = 1e6;

// Fixed or adaptive echo, as `options.adaptive` says. Throws kInvalidArgument for a
// factor or max_factor below 1, above kMaxEchoFactor or not finite, a buffer < 1 or a
// buffer_bytes < 0.
DatasetPtr make_echo(DatasetPtr input, const EchoOptions& options);

// The one check of an echo's options, which make_echo applies (and the spec builder
// through it): throws kInvalidArgument naming the option and its range.
void validate_echo_options(const EchoOptions& options);

}  // namespace dataecho
