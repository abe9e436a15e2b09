# recall case: growingnet/gromo, src/gromo/modules/growing_module.py (MergeGrowingModule)
# bug: `forward` stores its output on the module (`self.activity = y`) without
#      `.detach()`: the graph of the last forward stays alive (growingnet/gromo#135,
#      fixed in growingnet/gromo#138).
# reproduction written here (the pattern, not the project's code); the forward follows the code quoted in the issue.
# expect: OOM110
import torch


class MergeGrowingModule(torch.nn.Module):
    def __init__(self, post_merge_function=None):
        super().__init__()
        self.post_merge_function = post_merge_function
        self.store_input = 0
        self.store_activity = 0
        self.input = None
        self.activity = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.store_input > 0:
            self.input = x
            self.input.retain_grad()

        if self.post_merge_function and (x is not None):
            y = self.post_merge_function(x)
        else:
            y = x

        if self.store_activity > 0:
            self.activity = y  # bug

        return y
