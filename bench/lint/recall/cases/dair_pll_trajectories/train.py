# recall case: DAIRLab/dair_pll, dair_pll/experiment.py (SupervisedLearningExperiment.trajectory_predict)
# bug: the final evaluation predicts trajectories for the whole data set with gradients
#      on and keeps every prediction, so graphs for the entire set stay alive
#      (https://github.com/DAIRLab/dair_pll/pull/20, merged, detaches them).
# reproduction written here (the pattern, not the project's code).
# expect: OOM101
import torch


def trajectory_predict(system, trajectories, horizon):
    predictions = []
    for trajectory in trajectories:
        state = trajectory[0]
        predicted = system.simulate(state, horizon)
        predictions.append(predicted)  # bug
    return predictions
