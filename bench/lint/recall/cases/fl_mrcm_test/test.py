# recall case: guopengf/FL-MRCM, test.py
# bug: the evaluation loop runs the reconstruction model without `torch.no_grad()`, so
#      autograd keeps every batch's activations (guopengf/FL-MRCM#2, "GPU Memory
#      Leakage"; the maintainer's fix is `with torch.no_grad():` at line 172).
# reproduction written here (the pattern, not the project's code); described in the issue (no code quoted); the loop is reconstructed.
# expect: OOM104
import torch


def run_test(args, model, data_loader):
    model.eval()
    reconstructions = {}
    for iter, data in enumerate(data_loader):
        input, target, mean, std, fname, slice_num = data
        input = input.unsqueeze(1).to(args.device)
        output = model(input)  # bug
        output = output * std.to(args.device) + mean.to(args.device)
        for i in range(output.shape[0]):
            reconstructions.setdefault(fname[i], []).append(
                (slice_num[i].numpy(), output[i].squeeze(0).cpu().numpy())
            )
    return reconstructions
