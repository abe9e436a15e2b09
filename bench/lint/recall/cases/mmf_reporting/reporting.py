# recall case: facebookresearch/mmf, mmf/trainers/core/reporting.py (update_meter)
# bug: the reduced loss dict (graph-carrying tensors) is handed to the meter's update
#      dict as is, so the meter keeps every step's graph: GPU and CPU OOMs; fixed in
#      facebookresearch/mmf#560 (`.item()` per loss).
# reproduction written here (the pattern, not the project's code); the update lines follow the diff quoted in the PR review; reduced.
# expect: OOM113
import torch
from mmf.common.registry import registry
from mmf.utils.distributed import reduce_dict


class TrainerReportingMixin:
    def update_meter(self, report, meter=None, eval_mode=False):
        if meter is None:
            meter = self.meter
        if hasattr(report, "metrics"):
            metrics_dict = report.metrics
            reduced_metrics_dict = reduce_dict(metrics_dict)
        if not eval_mode:
            loss_dict = report.losses
            reduced_loss_dict = reduce_dict(loss_dict)
        meter_update_dict = {}
        if not eval_mode:
            total_loss_key = report.dataset_type + "/total_loss"
            reduced_loss = sum([loss.mean() for loss in reduced_loss_dict.values()])
            registry.register(total_loss_key, reduced_loss)
            meter_update_dict.update({total_loss_key: reduced_loss})
            meter_update_dict.update(reduced_loss_dict)  # bug
        if hasattr(report, "metrics"):
            meter_update_dict.update(reduced_metrics_dict)
        meter.update(meter_update_dict, report.batch_size)
