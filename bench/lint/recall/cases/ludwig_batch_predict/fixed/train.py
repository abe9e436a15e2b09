# The project's fix, restated here (see ../train.py).
import torch


class Predictor:
    def __init__(self, model):
        self.model = model

    def batch_predict(self, batches):
        self.model.eval()
        predictions = []
        for batch in batches:
            with torch.no_grad():
                preds = self.model(batch)
            predictions.append(preds.argmax(-1).cpu())
        return torch.cat(predictions)
