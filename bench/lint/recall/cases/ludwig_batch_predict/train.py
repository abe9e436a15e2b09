# recall case: ludwig-ai/ludwig, ludwig/models/predictor.py (Predictor.batch_predict)
# bug: batch prediction runs the model with gradients on, holding activations for
#      nothing (https://github.com/ludwig-ai/ludwig/pull/1739, merged: "Added
#      torch.no_grad during batch predict to reduce memory pressure").
# reproduction written here (the pattern, not the project's code).
# expect: OOM104
import torch


class Predictor:
    def __init__(self, model):
        self.model = model

    def batch_predict(self, batches):
        self.model.eval()
        predictions = []
        for batch in batches:
            preds = self.model(batch)  # bug
            predictions.append(preds.argmax(-1).cpu())
        return torch.cat(predictions)
