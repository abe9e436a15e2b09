# the trainer of bubbliiiing/faster-rcnn-pytorch (nets/frcnn_training.py), reduced:
# `train_step` backpropagates the total loss and returns every loss tensor.
import torch.nn as nn


class FasterRCNNTrainer(nn.Module):
    def __init__(self, faster_rcnn, optimizer):
        super().__init__()
        self.faster_rcnn = faster_rcnn
        self.optimizer = optimizer

    def forward(self, imgs, bboxes, labels, scale):
        rpn_loc, rpn_cls, roi_loc, roi_cls = self.faster_rcnn(imgs, bboxes, labels, scale)
        return [rpn_loc, rpn_cls, roi_loc, roi_cls, rpn_loc + rpn_cls + roi_loc + roi_cls]

    def train_step(self, imgs, bboxes, labels, scale):
        self.optimizer.zero_grad()
        losses = self.forward(imgs, bboxes, labels, scale)
        losses[-1].backward()
        self.optimizer.step()
        return losses
