# recall case: google/brax, the PyTorch training example notebook
# bug: the training loop sums `total_loss += loss` on the differentiable loss, the
#      PyTorch FAQ's leak (https://github.com/google/brax/pull/152, merged: "Remove memory
#      leak in PyTorch training example").
# reproduction written here (the pattern, not the project's code).
# expect: OOM102
import torch


def train(agent, envs, optimizer, num_updates):
    total_loss = 0
    for update in range(num_updates):
        observation = envs.reset()
        loss = agent.loss(agent.rollout(envs, observation))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total_loss += loss  # bug
    return total_loss / num_updates
