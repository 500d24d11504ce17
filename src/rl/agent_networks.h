#pragma once
// The networks of the agents (agent.h), built with the model zoo's layers so that parameters are
// initialized as PyTorch's nn.Linear and named like its state_dict ("pi.fc1.weight").
//
// Actor-critic ([batch, observation] -> "logits" [batch, actions], "value" [batch, 1]): separate
// policy and value MLPs, two tanh hidden layers each. With the loss, three more graph inputs
// carry what the agent computed on the host, already divided by the number of real (unpadded)
// rows n, so padding rows weigh nothing:
//   action_weights [batch, actions]: advantage_t at the taken action, 0 elsewhere, / n
//   row_weights    [batch, 1]:       1 / n for a real row, 0 for padding
//   value_targets  [batch, 1]:       the return the value regresses to
//   loss = -sum(action_weights * log_softmax(logits))
//          + value_coef * sum(row_weights * (value - value_targets)^2)
//          + entropy_coef * sum(row_weights * softmax(logits) * log_softmax(logits))
//
// Q network ([batch, observation] -> "logits" = Q values [batch, actions]): two ReLU hidden
// layers. With the loss, inputs action_weights [batch, actions] (1/batch at the taken action, 0
// elsewhere) and q_targets [batch, actions] (the TD target at the taken action); the loss is
// sum(action_weights * huber(logits - q_targets)), huber(d) = 0.5 min(|d|,1)^2 + |d| - min(|d|,1).
#include <cstdint>

#include "deep500/net/network.h"

namespace d5::rl {

inline constexpr const char* kObservation = "input";
inline constexpr const char* kLogits = "logits";
inline constexpr const char* kValue = "value";
inline constexpr const char* kLoss = "loss";
inline constexpr const char* kActionWeights = "action_weights";
inline constexpr const char* kRowWeights = "row_weights";
inline constexpr const char* kValueTargets = "value_targets";
inline constexpr const char* kQTargets = "q_targets";

struct NetShape {
  int64_t observation = 0, actions = 0, hidden = 64, batch = 1;
  uint64_t seed = 1;
};

Network build_actor_critic(const NetShape& shape, bool with_loss, double value_coef = 0.5, double entropy_coef = 0);
Network build_q_network(const NetShape& shape, bool with_loss);

// Makes every parameter of `to` a handle on the same buffer as `from`'s parameter of that name
// (networks of one architecture at two batch sizes), so updates of one are seen by the other.
void share_parameters(const Network& from, Network& to);
// Copies every parameter's values from `from` into `to`'s existing buffers (a target network).
void copy_parameters(const Network& from, Network& to);

}  // namespace d5::rl
