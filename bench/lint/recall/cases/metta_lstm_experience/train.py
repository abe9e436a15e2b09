# recall case: Metta-AI/metta, the rollout that stores experience
# bug: the LSTM state that goes into the experience buffer keeps its graph, so every
#      rollout step's graph persists in the buffer
#      (https://github.com/Metta-AI/metta/pull/1139, merged: "Detaching the LSTM state
#      before storing experience").
# reproduction written here (the pattern, not the project's code).
# expect: OOM101
import torch


def rollout(policy, env, steps):
    experience = []
    obs = env.reset()
    state = None
    for step in range(steps):
        action, state = policy(obs, state)
        experience.append(state)  # bug
        obs = env.step(action)
        state = state.detach()
    return experience
