# recall case: fastai/fastai (0.7), fastai/model.py (predict_with_targs_)
# bug: the predictions of every batch are kept on the GPU and converted once at the end,
#      so a large data set runs out of GPU memory (https://github.com/fastai/fastai/pull/483,
#      merged: convert each batch with `to_np()`).
# reproduction written here (the pattern, not the project's code).
# expect: OOM114
import torch


def predict_with_targs_(m, dl):
    m.eval()
    res = []
    with torch.no_grad():
        for x, y in dl:
            res.append([m(x.cuda()), y])  # bug
    return res
