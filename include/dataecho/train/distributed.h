// Data-parallel training on PyTorch's own collectives: c10d's ProcessGroupGloo, with a
// TCPStore rendezvous (docs/distributed.md). No collective library or rendezvous of our
// own: this is a thin layer that gives the trainer the few operations it needs, and that
// turns a lost peer into an error naming the rank. No LibTorch in this header (the model
// is forward-declared), so that the command-line tool stays cheap to compile.
// Thread-safety: one Collective per process, used from the training thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dataecho::train {

class ClassifierImpl;  // dataecho/train/model.h

// Where this process sits in the job: torchrun's environment convention.
struct DistributedOptions {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // How long a collective (or the rendezvous) may wait for a peer before the job is
  // declared broken: every surviving rank then exits with an error naming the lost rank.
  double timeout_seconds = 60;
};

// The job described by the environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
// LOCAL_RANK, and DATAECHO_DIST_TIMEOUT in seconds), or nullopt when WORLD_SIZE is unset.
// Partial or inconsistent variables (RANK without WORLD_SIZE, RANK >= WORLD_SIZE, no
// MASTER_ADDR...) throw dataecho::Error naming the variable.
std::optional<DistributedOptions> distributed_from_env();

// Throws dataecho::Error saying how to get it when this build has no c10d Gloo backend
// (Debian's libgloo-dev at build time); returns otherwise.
void require_distributed();

class Collective {
 public:
  // Joins the job: the rendezvous (rank 0 hosts the TCPStore on MASTER_ADDR:MASTER_PORT),
  // a check that every rank was started with the same WORLD_SIZE, then the Gloo group.
  // Throws dataecho::Error: the port is in use, a rank did not come within the timeout,
  // world sizes disagree.
  static std::shared_ptr<Collective> connect(const DistributedOptions& options);
  virtual ~Collective() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // In place, over all ranks. Doubles carry counts exactly up to 2^53.
  virtual void sum(std::vector<double>& values) = 0;
  virtual void max(std::vector<double>& values) = 0;
  // `bytes` of rank `root` on every rank.
  virtual void broadcast(std::string& bytes, int root = 0) = 0;
  // Every rank's `mine`, in rank order, on every rank.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;

  // The model's parameters and buffers of rank 0 on every rank.
  virtual void broadcast_model(ClassifierImpl& model) = 0;
  // One allreduce per step: the gradients averaged over ranks (parameters that got none
  // count as zero); `loss`, which comes back averaged; `sums`, which come back summed over
  // ranks (small counts and flags: exact in float up to 2^24); and rank 0's BatchNorm
  // running statistics, which every rank then holds. PyTorch DDP (broadcast_buffers=True)
  // broadcasts them before each forward; carrying them after the step keeps every rank's
  // parameters and buffers bitwise identical between steps, so a checkpoint or an
  // evaluation sees the same model on any rank.
  // With `rows` (elastic sharding: this rank's rows of the global batch), each rank's
  // gradients and loss are weighted by its rows and divided by the sum of the ranks'
  // rows instead of by the world size: the mean over the global batch's rows, however
  // they are split between ranks.
  virtual void average_gradients(ClassifierImpl& model, float& loss, std::vector<float>& sums,
                                 std::optional<int64_t> rows = std::nullopt) = 0;

  // Before this process exits on an error of its own (a bad record, a bad config): tells
  // the other ranks what happened, so that their error names this rank and its reason.
  virtual void announce_failure(const std::string& message) = 0;

  // Seconds spent in the gradient and buffer collectives so far (the per-step
  // communication cost).
  virtual double communication_seconds() const = 0;
};

}  // namespace dataecho::train
